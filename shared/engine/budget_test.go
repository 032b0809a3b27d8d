package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// inFlight is a handler wrapper that counts the requests being served at
// once, across every site that shares it.
type inFlight struct {
	now, peak atomic.Int32
}

func (c *inFlight) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := c.now.Add(1)
		defer c.now.Add(-1)
		for {
			p := c.peak.Load()
			if n <= p || c.peak.CompareAndSwap(p, n) {
				break
			}
		}
		h(w, r)
	}
}

// slowPages answers robots.txt 404 at once and every page after 300 ms, so
// the hosts' workers overlap long enough to be counted.
func slowPages(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	time.Sleep(300 * time.Millisecond)
	page(w, r)
}

// runShards runs the given shards of shardCount side by side on one engine,
// as one wake-up invocation does, until the recorder holds want results or
// max has passed.
func (e *env) runShards(eng *engine.Engine, shards []int, shardCount, want int, max time.Duration) []engine.Summary {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	defer cancel()
	go func() {
		for ctx.Err() == nil && !e.pub.has(want)() {
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	sums := make([]engine.Summary, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Go(func() {
			sums[i], errs[i] = eng.Run(ctx, engine.RunRequest{
				Shard: s, ShardCount: shardCount, Owner: fmt.Sprintf("owner-%s-%d", e.t.Name(), s),
				Until: time.Now().Add(max), Tick: 250 * time.Millisecond,
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatalf("run: %v", err)
	}
	return sums
}

// TestBudgetSharedByShards: two shards worked by one process share its
// Budget: however many due hosts each has and whatever MaxConcurrentHosts
// allows each run, the process never works more hosts at once than the
// budget's workers, and still fetches every URL.
func TestBudgetSharedByShards(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams() // MaxConcurrentHosts 16 per run
		e := newEnv(t, p)
		var flight inFlight
		slow := flight.wrap(slowPages)
		// Four hosts in each of the two shards.
		perShard := map[int][]string{}
		var urls []string
		for len(perShard[0]) < 4 || len(perShard[1]) < 4 {
			s := newSite(t, slow)
			shard := hostqueue.VirtualShard(s.host) % 2
			if len(perShard[shard]) == 4 {
				continue
			}
			perShard[shard] = append(perShard[shard], s.host)
			urls = append(urls, s.url("/a"), s.url("/b"))
		}
		e.seed(urls...)
		eng := e.engine()
		eng.Budget = engine.Budget{Conns: 3} // 3 workers
		if got := eng.Budget.Workers(p.MaxBodyBytes); got != 3 {
			t.Fatalf("Budget{Conns: 3}.Workers = %d, want 3", got)
		}
		sums := e.runShards(eng, []int{0, 1}, 2, len(urls), 30*time.Second)

		checkFetched(t, e.pub, urls...)
		if got := flight.peak.Load(); got > 3 {
			t.Errorf("the sites served %d requests at once, want at most the budget's 3 workers", got)
		}
		now, peak := eng.Workers()
		if peak != 3 || now != 0 {
			t.Errorf("engine workers: peak %d, %d left; want the budget's 3 reached and none left", peak, now)
		}
		for i, s := range sums {
			if s.Hosts == 0 {
				t.Errorf("shard %d worked no host: %+v", i, s)
			}
		}
	})
}

// localFailer makes chosen calls of its fetcher fail as the process running
// out of descriptors does (fetch.KindLocal), without a request.
type localFailer struct {
	f     engine.Fetcher
	calls *atomic.Int32
	fail  map[int32]bool
}

func (l localFailer) Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	if l.fail[l.calls.Add(1)] {
		return nil, &fetch.Error{Kind: fetch.KindLocal, Op: "request", URL: req.URL,
			Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.EMFILE)}}
	}
	return l.f.Fetch(ctx, req)
}

// TestOutOfDescriptorsIsNotTheHosts: a request the process cannot make
// (EMFILE on dial, for robots.txt and then for the page) is never the
// host's failure: no back-off, no failure run, no attempt counted on the
// URL, which stays queued and is fetched later with attempts 1; the run
// counts the errors as its own.
func TestOutOfDescriptorsIsNotTheHosts(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxAttempts = 1 // one counted failure would end the URL
		e := newEnv(t, p)
		s := newSite(t, withRobots(404, "", page))
		var calls atomic.Int32
		// Calls 1 (robots.txt) and 3 (the page, after robots.txt worked)
		// fail; robots.txt is then known to the engine and not asked again.
		e.wrap = func(f engine.Fetcher) engine.Fetcher {
			return localFailer{f: f, calls: &calls, fail: map[int32]bool{1: true, 3: true}}
		}
		e.seed(s.url("/p"))
		sum := e.runUntil(1, 20*time.Second)

		r := e.pub.one(t, s.url("/p"))
		if r.Status != result.StatusFetched || r.Attempts != 1 {
			t.Errorf("result %s attempts %d (%q), want fetched at the first counted attempt", r.Status, r.Attempts, r.Error)
		}
		if sum.LocalErrors != 2 {
			t.Errorf("summary counts %d local errors, want 2: %+v", sum.LocalErrors, sum)
		}
		if got := strings.Join(s.paths(), " "); got != "/robots.txt /p" {
			t.Errorf("the host saw %q, want robots.txt and the page once each", got)
		}
		if h := e.load(s.host); h == nil || h.Errors != 0 || !h.FailingSince.IsZero() || h.LastError != "" {
			t.Errorf("host state %+v, want no error, failure run or back-off recorded", h)
		}
	})
}

// TestFailingHostYieldsWhenStarved: a failing host in back-off gives its
// worker slot up as soon as another due host waits for one, instead of
// holding it for its whole session; its pause is kept in its stored state.
func TestFailingHostYieldsWhenStarved(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxConcurrentHosts = 1
		p.FetchDelay = 600 * time.Millisecond // back-off after one failure: 1.2s
		e := newEnv(t, p)
		failing := newSite(t, withRobots(http.StatusServiceUnavailable, "", page))
		healthy := newSite(t, withRobots(http.StatusNotFound, "", page))
		e.seed(failing.url("/a"))
		// The healthy host falls due once the failing one holds the only slot.
		var seededAt atomic.Int64
		go func() {
			for len(failing.requests()) == 0 && t.Context().Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			_, err := e.store.Append(t.Context(), hostqueue.AppendRequest{Key: healthy.host, Limit: 10, Due: time.Now(),
				Entries: []hostqueue.Entry{{ID: "b", URL: healthy.url("/b")}}})
			if err != nil {
				t.Errorf("seed the healthy host: %v", err)
			}
			seededAt.Store(time.Now().UnixNano())
		}()
		e.runUntil(1, 10*time.Second)

		checkFetched(t, e.pub, healthy.url("/b"))
		// Held, the slot would come free only when the next probe no longer
		// fits in the run (back-offs of 1.2 s, 2.4 s, 4.8 s: about 8.5 s).
		if reqs := healthy.requests(); len(reqs) == 0 || reqs[0].Start.Sub(time.Unix(0, seededAt.Load())) > 2*time.Second {
			t.Errorf("the healthy host waited %v for a slot, want the failing host to give it up in its back-off", reqs[0].Start.Sub(time.Unix(0, seededAt.Load())))
		}
		h := e.load(failing.host)
		if h == nil || h.Errors == 0 || h.FailingSince.IsZero() || !h.PauseUntil.After(h.LastFetch) || h.Pending != 1 {
			t.Errorf("failing host state %+v, want its failure run, pause and URL kept", h)
		}
	})
}

// TestAdmissionBoundsWorkers: with an Admission that allows three hosts'
// request rate, two shards on one process never work more than three
// hosts at once, and every URL is fetched.
func TestAdmissionBoundsWorkers(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		var flight inFlight
		slow := flight.wrap(slowPages)
		var urls []string
		for range 8 {
			s := newSite(t, slow)
			urls = append(urls, s.url("/a"), s.url("/b"))
		}
		e.seed(urls...)
		eng := e.engine()
		// Never late, never adjusted: the allowance stays three hosts'.
		three := 3 * engine.HostRate(p.FetchDelay)
		eng.Admission = &engine.Admission{Start: three, Min: three, Late: time.Hour, Period: time.Hour}
		e.runShards(eng, []int{0, 1}, 2, len(urls), 60*time.Second)

		checkFetched(t, e.pub, urls...)
		if got := flight.peak.Load(); got > 3 {
			t.Errorf("the sites served %d requests at once, want at most the 3 hosts admitted", got)
		}
		if now, peak := eng.Workers(); peak != 3 || now != 0 {
			t.Errorf("engine workers: peak %d, %d left; want 3 reached and none left", peak, now)
		}
	})
}

// TestRequestSlotWait: a request that waits for one of the process's
// request slots (Budget.Requests) starts when it gets one. The wait is the
// process's own queue: the admission counts it as lateness and lowers its
// allowance, and the host is not charged with it as a slow answer (the
// adaptive delay follows the response's own 300 ms).
func TestRequestSlotWait(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		var flight inFlight
		slow := flight.wrap(slowPages)
		var sites []*site
		var urls []string
		for range 4 {
			s := newSite(t, slow)
			sites = append(sites, s)
			urls = append(urls, s.url("/a"))
		}
		e.seed(urls...)
		eng := e.engine()
		eng.Budget = engine.Budget{Requests: 1}
		start := 100 * engine.HostRate(p.FetchDelay)
		eng.Admission = &engine.Admission{Start: start, Min: engine.HostRate(p.FetchDelay), Late: 50 * time.Millisecond, Period: 200 * time.Millisecond}
		e.runShards(eng, []int{0}, 1, len(urls), 60*time.Second)

		checkFetched(t, e.pub, urls...)
		if got := flight.peak.Load(); got != 1 {
			t.Errorf("the sites served %d pages at once, want 1 (one request slot)", got)
		}
		for _, s := range sites {
			if h := e.load(s.host); h == nil || h.LastTook != 300*time.Millisecond {
				t.Errorf("host %s state %+v, want the page's own 300ms as its last response's duration", s.host, h)
			}
		}
		if got := eng.Admission.Allowed(); got >= start {
			t.Errorf("admission allows %.1f req/s, want below its start %.1f: the waits for the slot were lateness", got, start)
		}
	})
}

// slowReleaseStore is a store whose first release commit waits until the
// sites have served want pages, or a minute.
type slowReleaseStore struct {
	hostqueue.Store
	pages   *atomic.Int32
	want    int32
	waited  atomic.Bool
	timeout atomic.Bool
	// onRelease, when set, is called at every release commit, first.
	onRelease func(key string)
}

func (s *slowReleaseStore) Commit(ctx context.Context, key string, c hostqueue.Commit) (*hostqueue.Host, error) {
	// Not a sync.Once: a goroutine blocked on its mutex would stop the
	// bubble's clock (synctest), and with it this wait.
	if c.Release && s.onRelease != nil {
		s.onRelease(key)
	}
	if c.Release && s.waited.CompareAndSwap(false, true) {
		deadline := time.Now().Add(5 * time.Second)
		for s.pages.Load() < s.want {
			if time.Now().After(deadline) {
				s.timeout.Store(true)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return s.Store.Commit(ctx, key, c)
}

// TestAdmissionFreedBeforeTheLastCommit: a host that will make no request
// any more (its queue drained, Engine.Finished) gives its admitted rate
// back before its last commit, not after it: with an allowance of one host
// and the first host's release commit held up, the second host is admitted
// and fetched meanwhile. At 10,000 hosts a wave of sessions ending
// together held the admission through thousands of queued commits.
func TestAdmissionFreedBeforeTheLastCommit(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		var pages atomic.Int32
		count := func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			pages.Add(1)
			page(w, r)
		}
		a, b := newSite(t, count), newSite(t, count)
		e.seed(a.url("/1"), b.url("/1"))
		store := &slowReleaseStore{Store: e.store, pages: &pages, want: 2}
		eng := e.engine()
		eng.Store = store
		eng.Finished = func(string) bool { return true }
		one := engine.HostRate(p.FetchDelay)
		eng.Admission = &engine.Admission{Start: one, Min: one, Late: time.Hour, Period: time.Hour}
		e.runWith(eng, "owner", 5*time.Minute, 0, func() bool {
			now, _ := eng.Workers()
			return len(e.pub.all()) >= 2 && now == 0
		})
		checkFetched(t, e.pub, a.url("/1"), b.url("/1"))
		if !store.waited.Load() {
			t.Fatal("no release commit was made")
		}
		if store.timeout.Load() {
			t.Error("the second host was not fetched while the first one's last commit waited: its admission was held through the commit")
		}
	})
}

// TestFinishedHostClosesBeforeItsLastCommit: a finished host's connections
// are closed once its last request is answered, before the wait for its
// results and its last commit, not after them.
func TestFinishedHostClosesBeforeItsLastCommit(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		cf := &closingFetcher{inFlight: map[string]int{}, closed: map[string]int{}}
		e.wrap = func(f engine.Fetcher) engine.Fetcher { cf.Fetcher = f; return cf }
		s := newSite(t, page)
		e.seed(s.url("/1"), s.url("/2"))
		var closedAtCommit atomic.Int32
		name, _, _ := strings.Cut(s.host, ":")
		store := &slowReleaseStore{Store: e.store, pages: &atomic.Int32{}, onRelease: func(string) {
			cf.mu.Lock()
			defer cf.mu.Unlock()
			closedAtCommit.Store(int32(cf.closed[name]))
		}}
		eng := e.engine()
		eng.Store = store
		eng.Finished = func(string) bool { return true }
		e.runWith(eng, "owner", time.Minute, 0, func() bool {
			now, _ := eng.Workers()
			return len(e.pub.all()) >= 2 && now == 0
		})
		checkFetched(t, e.pub, s.url("/1"), s.url("/2"))
		if closedAtCommit.Load() == 0 {
			t.Error("the finished host's connection was still open at its last commit, want it closed once its last request was answered")
		}
		if len(cf.early) > 0 {
			t.Errorf("CloseHost while a request of the host was in flight: %v", cf.early)
		}
	})
}

// TestRoomMadeWakesTheRun: a due host left waiting by the admission is
// dispatched once a worker gives its rate back, not at the run's next
// tick: with an allowance of one host and a 2 s tick, the second host's
// request follows the first host's end within a second.
func TestRoomMadeWakesTheRun(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.CheckHostPeriod = 10 * time.Second
		e := newEnv(t, p)
		note, requested := noteRequests()
		a, b := newSite(t, note), newSite(t, note)
		e.seed(a.url("/1"), b.url("/1"))
		eng := e.engine()
		eng.Finished = func(string) bool { return true }
		one := engine.HostRate(p.FetchDelay)
		eng.Admission = &engine.Admission{Start: one, Min: one, Late: time.Hour, Period: time.Hour}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			for len(e.pub.all()) < 2 {
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
		}()
		start := time.Now()
		if _, err := eng.Run(ctx, engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "owner", Until: start.Add(time.Minute), Tick: 2 * time.Second}); err != nil {
			t.Fatalf("run: %v", err)
		}
		checkFetched(t, e.pub, a.url("/1"), b.url("/1"))
		first, second := requested(a.host), requested(b.host)
		if second.Before(first) {
			first, second = second, first
		}
		if gap := second.Sub(first); gap >= time.Second {
			t.Errorf("the second host's request came %v after the first host's (at %v from the start), want within 1s: the run waited for its 2s tick instead of the room made", gap, first.Sub(start))
		}
	})
}

// TestArrivalsWakeTheRun: in a process with an Admission (local mode), a
// host queued while a run sleeps is worked as soon as Arrived says so, not
// at the run's next tick; without the signal it waits the tick.
func TestArrivalsWakeTheRun(t *testing.T) {
	t.Parallel()
	for _, signal := range []bool{true, false} {
		t.Run(fmt.Sprintf("signal=%v", signal), func(t *testing.T) {
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.CheckHostPeriod = 10 * time.Second
				e := newEnv(t, p)
				note, requested := noteRequests()
				a, b := newSite(t, note), newSite(t, note)
				e.seed(a.url("/1"))
				eng := e.engine()
				eng.Finished = func(string) bool { return true }
				eng.Admission = &engine.Admission{Start: 100, Min: 1, Late: time.Hour, Period: time.Hour}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var queued time.Time
				go func() {
					for len(e.pub.all()) < 1 {
						time.Sleep(20 * time.Millisecond)
					}
					// The run has looked and gone to sleep for its tick.
					time.Sleep(300 * time.Millisecond)
					queued = time.Now()
					e.seed(b.url("/1"))
					if signal {
						eng.Arrived()
					}
					for len(e.pub.all()) < 2 {
						time.Sleep(20 * time.Millisecond)
					}
					cancel()
				}()
				start := time.Now()
				if _, err := eng.Run(ctx, engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "owner", Until: start.Add(time.Minute), Tick: 3 * time.Second}); err != nil {
					t.Fatalf("run: %v", err)
				}
				checkFetched(t, e.pub, a.url("/1"), b.url("/1"))
				wait := requested(b.host).Sub(queued)
				if signal && wait >= time.Second {
					t.Errorf("the host queued and signalled was requested %v later, want within 1s (the run waited for its 3s tick)", wait)
				}
				if !signal && wait < time.Second {
					t.Errorf("the host queued without a signal was requested %v later: the run looked before its tick, so this test cannot tell the signal's effect", wait)
				}
			})
		})
	}
}

// noteRequests is a site's handler that answers robots.txt with 404 and
// pages as page does, and when each host's latest page request came.
func noteRequests() (http.HandlerFunc, func(host string) time.Time) {
	var mu sync.Mutex
	requested := map[string]time.Time{}
	note := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		requested[r.Host] = time.Now()
		mu.Unlock()
		page(w, r)
	}
	return note, func(host string) time.Time {
		mu.Lock()
		defer mu.Unlock()
		return requested[host]
	}
}
