package engine_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// conns counts, at the server, the requests in flight at once and the
// connections they came on (by remote address).
type conns struct {
	inFlight
	mu    sync.Mutex
	addrs map[string]bool
}

func (c *conns) wrap(h http.HandlerFunc) http.HandlerFunc {
	counted := c.inFlight.wrap(h)
	return func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		if c.addrs == nil {
			c.addrs = map[string]bool{}
		}
		c.addrs[r.RemoteAddr] = true
		c.mu.Unlock()
		counted(w, r)
	}
}

func (c *conns) connections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.addrs)
}

// slowly serves h after d.
func slowly(d time.Duration, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d)
		h(w, r)
	}
}

// busiest is the most requests that overlap, at the start of one of them,
// when each is counted from its start to its end plus delay (less slack):
// N connections that each keep delay between their own requests never
// exceed N, whichever connection a request came on.
func busiest(reqs []demosite.Request, delay time.Duration) int {
	most := 0
	for _, r := range reqs {
		n := 0
		for _, o := range reqs {
			if !o.Start.After(r.Start) && o.End.Add(delay-slack).After(r.Start) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// pages lists the requests for pages (robots.txt left out).
func pages(reqs []demosite.Request) []demosite.Request {
	var out []demosite.Request
	for _, r := range reqs {
		if r.Path != "/robots.txt" {
			out = append(out, r)
		}
	}
	return out
}

// span is from the first request's start to the last one's end.
func span(reqs []demosite.Request) time.Duration {
	first, last := reqs[0].Start, reqs[0].End
	for _, r := range reqs {
		if r.Start.Before(first) {
			first = r.Start
		}
		if r.End.After(last) {
			last = r.End
		}
	}
	return last.Sub(first)
}

// TestLanes: a rule with connections=4 and delay 1s on a host with 40 URLs
// (2 s responses): at most 4 requests in flight at the server, every
// connection keeping 1 s after its own responses, the whole in about
// 40/4 x (1 s + 2 s), not 40 x; robots.txt read once, before the lanes,
// and its Disallow applied to every lane's URLs.
func TestLanes(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		var c conns
		s := newSite(t, c.wrap(withRobots(200, "User-agent: *\nDisallow: /private\n", slowly(2*time.Second, page))))
		p := testParams()
		p.FetchTimeout = 5 * time.Second
		// maxDelay 1s: the rule's delay, not twice the 2 s responses
		// (DelayFactor), is each connection's.
		p = withRules(t, p, fmt.Sprintf(`[{"match":%q,"delay":"1s","maxDelay":"1s","connections":4}]`, nameOf(s.host)))
		e := newEnv(t, p)
		var urls []string
		for i := range 40 {
			urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
		}
		private := []string{s.url("/private/a"), s.url("/private/b")}
		e.seed(append(urls, private...)...)
		e.runUntil(len(urls)+len(private), 5*time.Minute)

		if n := s.count("/robots.txt"); n != 1 {
			t.Errorf("robots.txt requested %d times, want once", n)
		}
		if got := s.paths(); len(got) == 0 || got[0] != "/robots.txt" {
			t.Errorf("first request %v, want robots.txt before any page", got)
		}
		reqs := pages(s.requests())
		if len(reqs) != len(urls) {
			t.Fatalf("%d page requests, want %d: %v", len(reqs), len(urls), s.paths())
		}
		if peak := c.peak.Load(); peak != 4 {
			t.Errorf("at most %d requests in flight, want 4 (the rule's connections)", peak)
		}
		if n := c.connections(); n > 4 {
			t.Errorf("%d connections, want at most 4", n)
		}
		if n := busiest(s.requests(), time.Second); n > 4 {
			t.Errorf("%d requests within 1s of each other's end at once, want at most 4 (each connection keeps the delay)", n)
		}
		// 40 requests, each taking 2 s and holding its connection 1 s
		// more, on 4 connections: at least 40 x 3 s / 4 - 1 s; the lanes
		// wait for each other only at round ends (10 URLs).
		if d := span(reqs); d < 29*time.Second || d > 40*time.Second {
			t.Errorf("40 URLs took %v, want about 30s (40/4 x 3s; sequentially 120s)", d)
		}
		for _, u := range urls {
			if res := e.pub.one(t, u); res.Status != result.StatusFetched {
				t.Errorf("%s: %s %q", u, res.Status, res.Error)
			}
		}
		for _, u := range private {
			if res := e.pub.one(t, u); res.Status != result.StatusDenied {
				t.Errorf("%s: %s, want denied by robots.txt", u, res.Status)
			}
		}
		if h := e.load(s.host); h != nil && h.Pending != 0 {
			t.Errorf("%d urls still queued", h.Pending)
		}
	})
}

// TestLanesOnLoopback: the same on the real loopback network and clock
// (and DynamoDB on moto): a host with connections=3 has at most 3 requests
// in flight on at most 3 connections, each keeping the delay; a host
// without a rule, worked at the same time, exactly one on one connection.
func TestLanesOnLoopback(t *testing.T) {
	t.Parallel()
	var laned, plain conns
	lanes := newSite(t, laned.wrap(withRobots(404, "", slowly(300*time.Millisecond, page))))
	one := newSite(t, plain.wrap(withRobots(404, "", slowly(300*time.Millisecond, page))))
	p := testParams()
	p.FetchDelay = 200 * time.Millisecond
	p = withRules(t, p, fmt.Sprintf(`[{"match":%q,"delay":"200ms","connections":3}]`, nameOf(lanes.host)))
	e := newEnv(t, p)
	var urls []string
	for i := range 12 {
		urls = append(urls, lanes.url(fmt.Sprintf("/l%d", i)), one.url(fmt.Sprintf("/o%d", i)))
	}
	e.seed(urls...)
	// The bound only ends a hang: the run stops when every result is in.
	e.runUntil(len(urls), 2*time.Minute)
	for _, u := range urls {
		if res := e.pub.one(t, u); res.Status != result.StatusFetched {
			t.Errorf("%s: %s %q", u, res.Status, res.Error)
		}
	}
	if peak := laned.peak.Load(); peak < 2 || peak > 3 {
		t.Errorf("ruled host: %d requests in flight at most, want 2 or 3 (3 connections)", peak)
	}
	if n := laned.connections(); n > 3 {
		t.Errorf("ruled host: %d connections, want at most 3", n)
	}
	if n := busiest(lanes.requests(), 200*time.Millisecond); n > 3 {
		t.Errorf("ruled host: %d requests within the delay of each other at once, want at most 3", n)
	}
	if peak := plain.peak.Load(); peak != 1 {
		t.Errorf("host without a rule: %d requests in flight at most, want 1", peak)
	}
	if n := plain.connections(); n != 1 {
		t.Errorf("host without a rule: %d connections, want 1", n)
	}
	if g := minGap(one.requests()); g < p.FetchDelay-slack {
		t.Errorf("host without a rule: smallest gap %v, want >= %v", g, p.FetchDelay)
	}
}

// TestNoRuleOneInFlight: without a rule, or with a rule of one connection,
// a host has exactly one request in flight and every gap is the delay.
func TestNoRuleOneInFlight(t *testing.T) {
	t.Parallel()
	for _, rules := range []string{"", `[{"match":%q,"delay":"500ms","connections":1}]`, `[{"match":"elsewhere.example","connections":8}]`} {
		t.Run(strings.ReplaceAll(rules, "%q", "host"), func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				var c conns
				s := newSite(t, c.wrap(withRobots(404, "", slowly(time.Second, page))))
				p := testParams()
				p.FetchDelay = 500 * time.Millisecond
				if rules != "" {
					p = withRules(t, p, strings.ReplaceAll(rules, "%q", fmt.Sprintf("%q", nameOf(s.host))))
				}
				e := newEnv(t, p)
				var urls []string
				for i := range 15 {
					urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
				}
				e.seed(urls...)
				e.runUntil(len(urls), 5*time.Minute)
				for _, u := range urls {
					e.pub.one(t, u)
				}
				if peak := c.peak.Load(); peak != 1 {
					t.Errorf("%d requests in flight at most, want 1", peak)
				}
				if n := c.connections(); n != 1 {
					t.Errorf("%d connections, want 1", n)
				}
				if g := minGap(s.requests()); g < p.FetchDelay-slack {
					t.Errorf("smallest gap %v, want >= %v", g, p.FetchDelay)
				}
			})
		})
	}
}

// outage answers 503 to every request for a while from the first request
// for trigger, and h otherwise.
type outage struct {
	trigger string
	last    time.Duration
	h       http.HandlerFunc

	mu    sync.Mutex
	until time.Time
	hits  []string
}

func (o *outage) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	now := time.Now()
	if o.until.IsZero() && r.URL.Path == o.trigger {
		o.until = now.Add(o.last)
	}
	down := now.Before(o.until)
	if down {
		o.hits = append(o.hits, r.URL.Path)
	}
	o.mu.Unlock()
	if down {
		time.Sleep(500 * time.Millisecond)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	o.h(w, r)
}

func (o *outage) refused() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.hits)
}

// TestLanesPauseTogether: a 503 on one lane pauses the whole host: no lane
// starts a request until its back-off has passed; a host still failing is
// then probed one request at a time, and once it answers its lanes come
// back.
func TestLanesPauseTogether(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// last is how long the host answers 503 to everything from the
		// first request for /p6.
		last time.Duration
	}{
		// One 503: the requests already sent are answered, which ends the
		// failure run (lanes again after the pause).
		{"one refusal", time.Millisecond},
		// Every request in flight refused too: the failing host is probed
		// alone.
		{"outage", 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				var c conns
				o := &outage{trigger: "/p6", last: tc.last, h: slowly(500*time.Millisecond, page)}
				s := newSite(t, c.wrap(withRobots(404, "", o.serve)))
				p := testParams()
				p.MaxBackoff = 10 * time.Second
				p.MaxAttempts = 5
				p = withRules(t, p, fmt.Sprintf(`[{"match":%q,"delay":"1s","maxDelay":"1s","connections":4}]`, nameOf(s.host)))
				e := newEnv(t, p)
				var urls []string
				for i := range 30 {
					urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
				}
				e.seed(urls...)
				e.runUntil(len(urls), 5*time.Minute)

				refused := o.refused()
				if len(refused) == 0 || refused[0] != "/p6" {
					t.Fatalf("refused %v, want /p6 first", refused)
				}
				reqs := pages(s.requests())
				sort.Slice(reqs, func(i, j int) bool { return reqs[i].Start.Before(reqs[j].Start) })
				var first, last demosite.Request
				n := 0
				for _, r := range reqs {
					if n < len(refused) && r.Path == refused[n] {
						if n == 0 {
							first = r
						}
						last = r
						n++
					}
				}
				// 503 without Retry-After: a back-off of the rule's delay x 2.
				pause := 2 * time.Second
				var after []demosite.Request
				for _, r := range reqs {
					if r.Start.After(first.End) {
						if g := r.Start.Sub(first.End); g < pause-slack {
							t.Errorf("%s came %v after the 503, want >= %v: every lane waits the back-off", r.Path, g, pause)
						}
					}
					if r.Start.After(last.End) {
						after = append(after, r)
					}
				}
				if len(after) < 5 {
					t.Fatalf("%d requests after the refusals, want the rest: %v", len(after), s.paths())
				}
				if len(refused) > 1 {
					if probe, next := after[0], after[1]; next.Start.Before(probe.End) {
						t.Errorf("%s started %v before the probe %s was answered, want the failing host probed alone", next.Path, probe.End.Sub(next.Start), probe.Path)
					}
				}
				// The lanes come back: requests overlap again.
				if busiest(after, 0) < 2 {
					t.Errorf("no two requests in flight at once after the host answered again, want its lanes back")
				}
				if peak := c.peak.Load(); peak > 4 {
					t.Errorf("%d requests in flight at most, want at most 4", peak)
				}
				if n := busiest(s.requests(), time.Second); n > 4 {
					t.Errorf("%d requests within the delay at once, want at most 4", n)
				}
				for _, u := range urls {
					res := e.pub.one(t, u)
					if res.Status != result.StatusFetched {
						t.Errorf("%s: %s %q", u, res.Status, res.Error)
					}
					path := u[strings.LastIndex(u, "/"):]
					if want := 1 + count(refused, path); res.Attempts != want || s.count(path) != want {
						// A result fetched behind /p6 is kept and handed over
						// in order, not fetched again.
						t.Errorf("%s: attempts %d, requested %d times, want %d", u, res.Attempts, s.count(path), want)
					}
				}
			})
		})
	}
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// TestLanesDuplicatesOnce: copies of a URL taken by two lanes at once cost
// one request: the second waits for the first's answer and takes its
// result.
func TestLanesDuplicatesOnce(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		s := newSite(t, withRobots(404, "", slowly(time.Second, page)))
		p := withRules(t, testParams(), fmt.Sprintf(`[{"match":%q,"delay":"0s","connections":4}]`, nameOf(s.host)))
		e := newEnv(t, p)
		var urls []string
		for i := range 8 {
			for range 4 {
				urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
			}
		}
		e.seed(urls...)
		e.runUntil(len(urls), 5*time.Minute)
		for i := range 8 {
			if n := s.count(fmt.Sprintf("/p%d", i)); n != 1 {
				t.Errorf("/p%d requested %d times, want once", i, n)
			}
		}
		if n := len(e.pub.all()); n != len(urls) {
			t.Errorf("%d results, want %d (one per id)", n, len(urls))
		}
		for _, r := range e.pub.all() {
			if r.Status != result.StatusFetched {
				t.Errorf("%s %s: %s %q", r.ID, r.URL, r.Status, r.Error)
			}
		}
	})
}

// TestLanesWithinBudget: each lane takes a worker slot of the process's
// budget: with room for 3 workers, a host with 8 connections gets 3.
func TestLanesWithinBudget(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		var c conns
		s := newSite(t, c.wrap(withRobots(404, "", slowly(time.Second, page))))
		p := withRules(t, testParams(), fmt.Sprintf(`[{"match":%q,"delay":"0s","connections":8}]`, nameOf(s.host)))
		e := newEnv(t, p)
		var urls []string
		for i := range 20 {
			urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
		}
		e.seed(urls...)
		eng := e.engine()
		eng.Budget = engine.Budget{Conns: 3}
		if n := eng.WorkerLimit(p); n != 3 {
			t.Fatalf("budget of %d workers, want 3", n)
		}
		e.runWith(eng, "owner", 5*time.Minute, 0, e.pub.has(len(urls)))
		for _, u := range urls {
			e.pub.one(t, u)
		}
		if peak := c.peak.Load(); peak != 3 {
			t.Errorf("%d requests in flight at most, want 3 (the budget's workers)", peak)
		}
		if now, _ := eng.Workers(); now != 0 {
			t.Errorf("%d worker slots still taken after the run", now)
		}
	})
}

// TestLanesCrash: a run that dies mid-round, with requests in flight on
// other lanes, loses nothing: the next run, once the lease has expired,
// gives every URL its result.
func TestLanesCrash(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		s := newSite(t, withRobots(404, "", slowly(500*time.Millisecond, page)))
		p := withRules(t, testParams(), fmt.Sprintf(`[{"match":%q,"delay":"200ms","connections":4}]`, nameOf(s.host)))
		e := newEnv(t, p)
		var urls []string
		for i := range 25 {
			urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
		}
		ids := e.seed(urls...)
		var fetched atomic.Int32
		ctx := engine.WithCrash(t.Context(), func(point engine.CrashPoint, _ string) bool {
			return point == engine.CrashFetched && fetched.Add(1) == 13
		})
		_, err := e.engine().Run(ctx, engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "crashing",
			Until: time.Now().Add(time.Minute), Tick: 250 * time.Millisecond})
		if !errors.Is(err, engine.ErrCrashed) {
			t.Fatalf("run: %v, want the injected crash", err)
		}
		before := len(e.pub.all())
		if before == 0 || before >= len(urls) {
			t.Fatalf("%d results before the crash, want some but not all", before)
		}
		e.runWith(e.engine(), "successor", 5*time.Minute, 2*time.Minute, func() bool {
			return len(e.pub.byURL()) == len(urls)
		})
		got := e.pub.byURL()
		for _, u := range urls {
			if len(got[u]) == 0 {
				t.Errorf("%s (%s): no result after the crash", u, ids[u])
			}
			for _, r := range got[u] {
				if r.Status != result.StatusFetched {
					t.Errorf("%s: %s %q", u, r.Status, r.Error)
				}
			}
		}
		if n := busiest(s.requests(), 200*time.Millisecond); n > 4 {
			t.Errorf("%d requests within the delay at once, want at most 4", n)
		}
	})
}

// TestLanesLongDelayOneConnection: a rule's delay beyond what a worker
// waits in place (40 s) releases the host between requests, as with one
// connection, whatever its connections say: one request at a time, the
// whole delay apart.
func TestLanesLongDelayOneConnection(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		var c conns
		s := newSite(t, c.wrap(withRobots(404, "", page)))
		p := withRules(t, testParams(), fmt.Sprintf(`[{"match":%q,"delay":"40s","connections":4}]`, nameOf(s.host)))
		e := newEnv(t, p)
		urls := []string{s.url("/p0"), s.url("/p1"), s.url("/p2")}
		e.seed(urls...)
		for range 8 {
			// Longer than a new host's spread start (within its delay).
			e.run(45 * time.Second)
			if len(e.pub.all()) == len(urls) {
				break
			}
			time.Sleep(40 * time.Second)
		}
		for _, u := range urls {
			if res := e.pub.one(t, u); res.Status != result.StatusFetched {
				t.Errorf("%s: %s %q", u, res.Status, res.Error)
			}
		}
		if peak := c.peak.Load(); peak != 1 {
			t.Errorf("%d requests in flight at most, want 1", peak)
		}
		for i, g := range gaps(s.requests()) {
			if g < 40*time.Second-slack {
				t.Errorf("gap %d = %v, want >= 40s", i, g)
			}
		}
	})
}
