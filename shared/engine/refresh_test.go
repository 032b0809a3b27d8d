package engine_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// feed is a page whose content changes at set times after it starts; it
// answers a matching If-None-Match with 304, as nginx does.
type feed struct {
	start   time.Time
	changes []time.Duration
	status  func(n int) int // the n-th request's status, 0 for the page's own
	mu      sync.Mutex
	n       int
}

func (f *feed) version() int {
	v := 1
	for _, c := range f.changes {
		if time.Since(f.start) >= c {
			v++
		}
	}
	return v
}

func (f *feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	if f.status != nil {
		if code := f.status(n); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	etag := fmt.Sprintf(`"v%d"`, f.version())
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	fmt.Fprintf(w, "<rss>version %d</rss>", f.version())
}

// seedRefresh keeps url on its host as a refreshing URL, due within every.
func (e *env) seedRefresh(url string, s refresh.Schedule) string {
	e.t.Helper()
	key := strings.TrimPrefix(url, "http://")
	key = key[:strings.Index(key, "/")]
	id := "refresh-" + e.t.Name()
	_, err := e.store.Append(e.t.Context(), hostqueue.AppendRequest{
		Key: key, Refreshes: []hostqueue.Refresh{{ID: id, URL: url, Schedule: s}},
		RefreshCap: 10, Limit: e.params().PersistLimit, Due: time.Now(),
	})
	if err != nil {
		e.t.Fatalf("seed refresh %s: %v", url, err)
	}
	return key
}

// pageRequests are the site's requests of path, robots.txt aside.
func pageRequests(s *site, path string) (starts []time.Time, inm []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.reqs {
		if r.Path == path {
			starts = append(starts, r.Start)
			inm = append(inm, s.hdrs[i].Get("If-None-Match"))
		}
	}
	return starts, inm
}

func TestRefreshFixedInterval(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		f := &feed{start: time.Now(), changes: []time.Duration{150 * time.Second, 330 * time.Second}}
		s := newSite(t, f.ServeHTTP)
		e.seedRefresh(s.url("/feed"), refresh.Schedule{Every: time.Minute})
		e.run(10 * time.Minute)

		starts, inm := pageRequests(s, "/feed")
		if len(starts) < 9 || len(starts) > 10 {
			t.Fatalf("%d fetches in 10 minutes at 1m, want 9 or 10", len(starts))
		}
		for i := 1; i < len(starts); i++ {
			// The first fetch waits for its politeness slot; the next keep
			// the schedule's phase.
			if gap := starts[i].Sub(starts[i-1]); gap < time.Minute-time.Second || gap > time.Minute+2*time.Second {
				t.Errorf("fetch %d came %s after the one before, want the interval, 1m", i, gap)
			}
			if inm[i] == "" {
				t.Errorf("refetch %d was not conditional", i)
			}
		}
		rs := e.pub.all()
		if len(rs) != 3 {
			t.Fatalf("%d results, want 3 (the first fetch and two changes): %s", len(rs), describe(rs))
		}
		for i, r := range rs {
			if r.Seq != i+1 || r.Changed == nil || !*r.Changed || r.Final || r.Status != result.StatusFetched {
				t.Errorf("result %d: seq %d changed %v final %v status %s, want seq %d, changed, not final, fetched",
					i, r.Seq, r.Changed, r.Final, r.Status, i+1)
			}
			if want := fmt.Sprintf("<rss>version %d</rss>", i+1); r.Data != want {
				t.Errorf("result %d: data %q, want %q", i, r.Data, want)
			}
		}
	})
}

func TestRefreshAdaptiveWithinBounds(t *testing.T) {
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MinRefresh, p.MaxRefresh = time.Minute, 4*time.Minute
		e := newEnv(t, p)
		f := &feed{start: time.Now()}
		s := newSite(t, f.ServeHTTP)
		e.seedRefresh(s.url("/feed"), refresh.Schedule{Every: time.Minute, Adapt: true, EmitUnchanged: true})
		e.run(25 * time.Minute)

		starts, _ := pageRequests(s, "/feed")
		// Unchanged every time: 1m after the first fetch (nothing to
		// compare with), then x 1.4 each fetch, up to MaxRefresh.
		want := []time.Duration{time.Minute, 84 * time.Second, 117600 * time.Millisecond, 164640 * time.Millisecond, 230496 * time.Millisecond, 4 * time.Minute, 4 * time.Minute}
		if len(starts) < len(want)+1 {
			t.Fatalf("%d fetches, want at least %d", len(starts), len(want)+1)
		}
		for i, w := range want {
			if gap := starts[i+1].Sub(starts[i]); gap < w-slack || gap > w+2*time.Second {
				t.Errorf("gap %d is %s, want %s", i, gap, w)
			}
		}
		rs := e.pub.all()
		if len(rs) != len(starts) {
			t.Fatalf("%d results for %d fetches with emitUnchanged", len(rs), len(starts))
		}
		for i, r := range rs[1:] {
			if r.Changed == nil || *r.Changed || r.Status != result.StatusNotModified || r.Seq != i+2 {
				t.Errorf("result %d: changed %v status %s seq %d, want unchanged not_modified seq %d", i+1, r.Changed, r.Status, r.Seq, i+2)
			}
		}
	})
}

func TestRefreshErrorsAndStop(t *testing.T) {
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxAttempts = 1
		e := newEnv(t, p)
		// The 2nd and 3rd requests fail.
		f := &feed{start: time.Now(), status: func(n int) int {
			if n == 3 || n == 4 { // after robots.txt and the first fetch
				return http.StatusNotFound
			}
			return 0
		}}
		s := newSite(t, f.ServeHTTP)
		key := e.seedRefresh(s.url("/feed"), refresh.Schedule{Every: time.Minute})
		e.run(4*time.Minute + 30*time.Second)
		rs := e.pub.all()
		var got []string
		for _, r := range rs {
			got = append(got, fmt.Sprintf("%d:%s", r.Seq, r.Status))
		}
		if strings.Join(got, " ") != "1:fetched 2:fetch_error 3:fetch_error 4:not_modified" {
			t.Errorf("results %v, want the first, two failures, then the page again (unchanged, sent after a failure)", got)
		}
		if len(rs) == 0 {
			t.Fatal("no result")
		}
		if c := rs[len(rs)-1].Changed; c == nil || *c {
			t.Errorf("the fetch after the failures: changed %v, want false (the page is as before them)", c)
		}
		// Stop: the same URL with refresh "0".
		if _, err := e.store.Append(t.Context(), hostqueue.AppendRequest{Key: key, Limit: 10, RefreshCap: 10, Due: time.Now(),
			Refreshes: []hostqueue.Refresh{{ID: "the-stop", URL: s.url("/feed"), Stop: true}}}); err != nil {
			t.Fatal(err)
		}
		before, _ := pageRequests(s, "/feed")
		e.run(3 * time.Minute)
		after, _ := pageRequests(s, "/feed")
		rs = e.pub.all()
		if len(rs) == 0 {
			t.Fatal("no result after the stop")
		}
		last := rs[len(rs)-1]
		if last.Status != result.StatusStopped || !last.Final || last.Seq != 5 || last.ID != "refresh-"+t.Name() {
			t.Errorf("last result %+v, want stopped, final, seq 5, the schedule's id", last)
		}
		if len(after) != len(before) {
			t.Errorf("%d fetches after the stop, want none", len(after)-len(before))
		}
		if h := e.load(key); h != nil && (h.Refreshing != 0 || !h.Due.IsZero()) {
			t.Errorf("after the stop: refreshing %d due %v, want none, out of the due index", h.Refreshing, h.Due)
		}
	})
}

func TestRefreshDeniedByRobotsEnds(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				fmt.Fprint(w, "User-agent: *\nDisallow: /feed\n")
				return
			}
			fmt.Fprint(w, "page")
		})
		key := e.seedRefresh(s.url("/feed"), refresh.Schedule{Every: time.Minute})
		e.run(3 * time.Minute)
		rs := e.pub.all()
		if len(rs) != 1 || rs[0].Status != result.StatusDenied || !rs[0].Final || rs[0].Seq != 1 {
			t.Fatalf("results %s, want one denied, final, seq 1", describe(rs))
		}
		if h := e.load(key); h != nil && h.Refreshing != 0 {
			t.Errorf("the denied schedule is still kept (%d)", h.Refreshing)
		}
	})
}

// TestRefreshResumesOnSchedule: a run cancelled mid-schedule and a new
// one later fetch on the same schedule: nothing before it is due, and
// the cycles missed meanwhile coalesce into one fetch.
func TestRefreshResumesOnSchedule(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		f := &feed{start: time.Now()}
		s := newSite(t, f.ServeHTTP)
		e.seedRefresh(s.url("/feed"), refresh.Schedule{Every: time.Minute})
		e.runUntilSeen(s.seen(3), 5*time.Minute) // robots.txt and two fetches
		first, _ := pageRequests(s, "/feed")
		if len(first) < 2 {
			t.Fatalf("%d fetches before the pause, want 2", len(first))
		}
		time.Sleep(3*time.Minute + 20*time.Second) // no run: three cycles missed
		e.run(2 * time.Minute)
		starts, _ := pageRequests(s, "/feed")
		if len(starts) < len(first)+2 {
			t.Fatalf("%d fetches after the restart, want 2", len(starts)-len(first))
		}
		resumed := starts[len(first)]
		if gap := resumed.Sub(first[len(first)-1]); gap < 3*time.Minute {
			t.Errorf("resumed %s after the last fetch, want one fetch after the pause, not the missed cycles", gap)
		}
		if gap := starts[len(first)+1].Sub(resumed); gap > time.Minute+2*time.Second {
			t.Errorf("the fetch after the resumed one came %s later, want within the interval, on the schedule's phase", gap)
		}
		// The first fetch waits for its politeness slot; the second is on
		// the schedule's phase.
		phase := first[1]
		for _, st := range starts[1:] {
			off := st.Sub(phase) % time.Minute
			if st != resumed && off > 2*time.Second {
				t.Errorf("fetch at %s off the schedule's phase by %s", st.Sub(phase), off)
			}
		}
	})
}

// TestRefreshInterleavesWithLongQueue: a host whose plain queue takes
// minutes still fetches its refreshing URL when due, between the queue's
// requests and paced like them, not only when the session starts.
func TestRefreshInterleavesWithLongQueue(t *testing.T) {
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay = time.Second
		e := newEnv(t, p)
		f := &feed{start: time.Now()}
		s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/feed" || r.URL.Path == "/robots.txt" {
				f.ServeHTTP(w, r)
				return
			}
			fmt.Fprint(w, "page")
		})
		e.seedRefresh(s.url("/feed"), refresh.Schedule{Every: time.Minute})
		var urls []string
		for i := range 300 { // five minutes of requests at 1s apart
			urls = append(urls, s.url(fmt.Sprintf("/p/%d", i)))
		}
		e.seed(urls...)
		e.run(4 * time.Minute)

		starts, _ := pageRequests(s, "/feed")
		if len(starts) < 3 {
			t.Fatalf("%d fetches of the refreshing url in 4 minutes at 1m behind a 5-minute queue, want at least 3", len(starts))
		}
		for i := 1; i < len(starts); i++ {
			// Due every minute; each waits at most one request's delay
			// (and that request) for its turn.
			if gap := starts[i].Sub(starts[i-1]); gap > time.Minute+5*time.Second {
				t.Errorf("fetch %d came %s after the one before, want about the interval, 1m", i, gap)
			}
		}
		reqs := s.requests()
		for i := 1; i < len(reqs); i++ {
			if gap := reqs[i].Start.Sub(reqs[i-1].End); gap < time.Second-slack {
				t.Fatalf("request %d (%s) started %s after the one before, want the host's delay, 1s", i, reqs[i].Path, gap)
			}
		}
	})
}

// TestRefreshGiveUpEndsEverySchedule: a host given up ends all its
// refreshing URLs with a final result, also those not due in the session.
func TestRefreshGiveUpEndsEverySchedule(t *testing.T) {
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.GiveUpAfter = time.Minute
		p.MaxAttempts = 100
		e := newEnv(t, p)
		s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		// The plain URL's failures give the host up; the schedule is not
		// due before days from now.
		key := e.seedRefresh(s.url("/weekly"), refresh.Schedule{Every: 100 * time.Hour})
		e.seed(s.url("/page"))
		e.run(5 * time.Minute)
		final := map[string]bool{}
		for _, r := range e.pub.all() {
			if r.Final && r.Status == result.StatusFetchError {
				final[r.URL] = true
			}
		}
		if !final[s.url("/weekly")] {
			t.Errorf("final fetch_error results for %v, want the schedule's: %s", final, describe(e.pub.all()))
		}
		if h := e.load(key); h != nil && h.Refreshing != 0 {
			t.Errorf("%d schedules kept after the give-up, want none", h.Refreshing)
		}
	})
}

// TestRefreshLagReported: each refetch tells its lag (Engine.OnRefetch,
// as the RefreshLag metric): about nothing on schedule, the whole pause
// for the fetch that follows missed cycles.
func TestRefreshLagReported(t *testing.T) {
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		f := &feed{start: time.Now()}
		s := newSite(t, f.ServeHTTP)
		e.seedRefresh(s.url("/feed"), refresh.Schedule{Every: time.Minute})
		var lags []time.Duration
		eng := e.engine()
		eng.OnRefetch = func(lag time.Duration) { lags = append(lags, lag) }
		e.runWith(eng, "owner-"+t.Name(), 3*time.Minute, 0, nil)
		if len(lags) < 2 {
			t.Fatalf("%d lags told in 3 minutes at 1m, want a lag per fetch", len(lags))
		}
		for i, l := range lags[1:] {
			if l > 2*time.Second {
				t.Errorf("refetch %d on schedule told a lag of %s, want about none", i+1, l)
			}
		}
		n := len(lags)
		time.Sleep(3*time.Minute + 20*time.Second) // no run: cycles missed
		eng = e.engine()
		eng.OnRefetch = func(lag time.Duration) { lags = append(lags, lag) }
		e.runWith(eng, "owner-"+t.Name(), 30*time.Second, 0, nil)
		if len(lags) <= n {
			t.Fatal("no lag told after the pause")
		}
		if l := lags[n]; l < 2*time.Minute {
			t.Errorf("the fetch after a 3m20s pause told a lag of %s, want the cycles missed (over 2m)", l)
		}
	})
}
