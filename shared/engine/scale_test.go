package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestHostsStartSpread: hosts that fall due together start spread (paced,
// see startPacer) within their first delay instead of in one burst, and
// keep their own phase:
// every request still comes at least the delay after the host's last one.
func TestHostsStartSpread(t *testing.T) {
	t.Parallel()
	const hosts, perHost = 40, 2
	run := func(t *testing.T, spread func(time.Duration) time.Duration) (firsts []time.Duration, sites []*site) {
		p := testParams()
		p.FetchDelay = time.Second
		p.MaxConcurrentHosts = hosts
		e := newEnv(t, p)
		var urls []string
		for range hosts {
			s := newSite(t, page)
			sites = append(sites, s)
			for i := range perHost {
				urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
			}
		}
		e.seed(urls...)
		eng := e.engine()
		eng.Spread = spread
		start := time.Now()
		e.runWith(eng, "owner-"+t.Name(), 30*time.Second, 0, e.pub.has(len(urls)))
		for _, s := range sites {
			reqs := s.requests()
			if len(reqs) != perHost+1 {
				t.Fatalf("%s: requests %v, want robots.txt and %d pages", s.host, s.paths(), perHost)
			}
			firsts = append(firsts, reqs[0].Start.Sub(start))
			if g := minGap(reqs); g < p.FetchDelay-slack {
				t.Errorf("%s: gap %v below the delay %v", s.host, g, p.FetchDelay)
			}
		}
		return firsts, sites
	}

	t.Run("default: paced, within the first delay", func(t *testing.T) {
		t.Parallel()
		virtual(t, func(t *testing.T) {
			firsts, _ := run(t, nil)
			slices.Sort(firsts)
			if firsts[0] < 0 || firsts[len(firsts)-1] >= time.Second+slack {
				t.Errorf("first requests from %v to %v after the start, want within the first delay (1s)", firsts[0], firsts[len(firsts)-1])
			}
			// Each host takes the next of the pacer's slots, 1/startRate
			// apart: a burst (everyone at once, or two in one slot) fails.
			for i := 1; i < len(firsts); i++ {
				if gap := firsts[i] - firsts[i-1]; gap < time.Second/10000 {
					t.Fatalf("first requests %v and %v only %v apart, want a slot (100µs) between any two: %v", firsts[i-1], firsts[i], gap, firsts)
				}
			}
			// ... and no host waits longer than the hosts ahead of it need:
			// 40 slots are 4 ms, where a uniform wait within the delay held
			// the last host back most of a second.
			if span := firsts[len(firsts)-1] - firsts[0]; span > 100*time.Millisecond {
				t.Errorf("first requests spread over %v, want the 40 hosts' slots (4ms): %v", span, firsts)
			}
		})
	})

	t.Run("each host keeps its own phase", func(t *testing.T) {
		t.Parallel()
		virtual(t, func(t *testing.T) {
			// Host i waits i x 25 ms: its later requests keep that offset
			// (a delay after its own last response), not a common beat.
			var n atomic.Int64
			firsts, sites := run(t, func(time.Duration) time.Duration {
				return time.Duration(n.Add(1)-1) * 25 * time.Millisecond
			})
			offsets := map[time.Duration]bool{}
			for i, s := range sites {
				offsets[firsts[i].Round(5*time.Millisecond)] = true
				reqs := s.requests()
				last := reqs[len(reqs)-1].Start.Sub(reqs[0].Start)
				if want := time.Duration(perHost) * time.Second; last < want-slack || last > want+time.Second/4 {
					t.Errorf("%s: last request %v after its first, want about %v (its own phase)", s.host, last, want)
				}
			}
			if len(offsets) != hosts {
				t.Errorf("%d distinct start offsets among %d hosts, want each its own: %v", len(offsets), hosts, firsts)
			}
		})
	})

	t.Run("a host with a last fetch is not spread again", func(t *testing.T) {
		t.Parallel()
		virtual(t, func(t *testing.T) {
			p := testParams()
			p.FetchDelay = time.Second
			e := newEnv(t, p)
			s := newSite(t, page)
			e.seed(s.url("/a"))
			e.runUntil(1, 30*time.Second)
			// Its next session starts from the stored last fetch: a spread
			// of an hour would hold it back, so none may apply.
			e.seed(s.url("/b"))
			eng := e.engine()
			eng.Spread = func(time.Duration) time.Duration { return time.Hour }
			e.runWith(eng, "owner-"+t.Name(), 30*time.Second, 0, e.pub.has(2))
			if got := e.pub.one(t, s.url("/b")); got.URL == "" {
				t.Fatalf("the second URL has no result")
			}
			if g := minGap(s.requests()); g < p.FetchDelay-slack {
				t.Errorf("gap %v below the delay", g)
			}
		})
	})
}

// closingFetcher records CloseHost calls and whether a request of that
// host was in flight at the time.
type closingFetcher struct {
	engine.Fetcher
	mu       sync.Mutex
	inFlight map[string]int
	closed   map[string]int
	early    []string
}

func (c *closingFetcher) Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	u, _ := url.Parse(req.URL)
	c.mu.Lock()
	c.inFlight[u.Hostname()]++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight[u.Hostname()]--
		c.mu.Unlock()
	}()
	return c.Fetcher.Fetch(ctx, req)
}

func (c *closingFetcher) CloseHost(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight[host] > 0 {
		c.early = append(c.early, host)
	}
	c.closed[host]++
}

// TestSessionClosesItsConnections: a session that ends with its host not
// to be requested for longer than a connection stays idle (a Retry-After
// of two minutes) closes the connections it kept (HostCloser), once no
// request of it is in flight; a host due again soon keeps its connection
// in the pool for its next session.
func TestSessionClosesItsConnections(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		cf := &closingFetcher{inFlight: map[string]int{}, closed: map[string]int{}}
		e.wrap = func(f engine.Fetcher) engine.Fetcher { cf.Fetcher = f; return cf }
		soon := newSite(t, page)
		paused := newSite(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		})
		e.seed(soon.url("/1"), soon.url("/2"), paused.url("/1"))
		e.runUntilSeen(func() bool {
			return len(e.pub.all()) >= 2 && paused.count("/1") >= 1
		}, 30*time.Second)
		cf.mu.Lock()
		defer cf.mu.Unlock()
		name := func(s *site) string { n, _, _ := strings.Cut(s.host, ":"); return n }
		if cf.closed[name(paused)] == 0 {
			t.Errorf("%s (paused 120 s): connections not closed after its session (closed %v)", name(paused), cf.closed)
		}
		if cf.closed[name(soon)] != 0 {
			t.Errorf("%s (due again within its delay): connection closed, want it kept for its next session", name(soon))
		}
		if len(cf.early) > 0 {
			t.Errorf("CloseHost while a request of the host was in flight: %v", cf.early)
		}
	})
}

// TestRequestSlots: with Budget.Requests the process has at most that many
// requests in flight, whatever number of hosts its workers work at once;
// the others wait for a slot before their request (and its timeout)
// starts, and every URL is fetched.
func TestRequestSlots(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		const hosts, slots = 8, 2
		p := testParams()
		p.MaxConcurrentHosts = hosts
		// Longer than the timeout, were the wait part of the request.
		p.FetchTimeout = 300 * time.Millisecond
		e := newEnv(t, p)
		var inFlight, peak atomic.Int64
		slow := func(w http.ResponseWriter, r *http.Request) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(100 * time.Millisecond)
			page(w, r)
		}
		var urls []string
		for range hosts {
			s := newSite(t, slow)
			urls = append(urls, s.url("/a"), s.url("/b"))
		}
		e.seed(urls...)
		eng := e.engine()
		eng.Budget = engine.Budget{Requests: slots}
		e.runWith(eng, "owner-"+t.Name(), 30*time.Second, 0, e.pub.has(len(urls)))
		checkFetched(t, e.pub, urls...)
		if got := peak.Load(); got > slots {
			t.Errorf("the sites served %d requests at once, want at most Budget.Requests = %d", got, slots)
		}
		if got := peak.Load(); got < slots {
			t.Errorf("the sites never served %d requests at once (peak %d)", slots, got)
		}
	})
}

// TestFinishedHostClosesItsConnections: a session that empties the queue
// of a host no URL will come to any more (Engine.Finished: local mode's
// input is read whole) closes its connections at its end; a host whose
// queue may still grow keeps its connection for its next session.
func TestFinishedHostClosesItsConnections(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		cf := &closingFetcher{inFlight: map[string]int{}, closed: map[string]int{}}
		e.wrap = func(f engine.Fetcher) engine.Fetcher { cf.Fetcher = f; return cf }
		done, open := newSite(t, page), newSite(t, page)
		e.seed(done.url("/1"), done.url("/2"), open.url("/1"))
		eng := e.engine()
		eng.Finished = func(key string) bool { return key == done.host }
		e.runWith(eng, "owner", 30*time.Second, 0, func() bool {
			now, _ := eng.Workers()
			return len(e.pub.all()) >= 3 && now == 0
		})
		checkFetched(t, e.pub, done.url("/1"), done.url("/2"), open.url("/1"))
		cf.mu.Lock()
		defer cf.mu.Unlock()
		name := func(s *site) string { n, _, _ := strings.Cut(s.host, ":"); return n }
		if cf.closed[name(done)] == 0 {
			t.Errorf("%s (finished, queue emptied): connections not closed after its session (closed %v)", name(done), cf.closed)
		}
		if cf.closed[name(open)] != 0 {
			t.Errorf("%s (may get more URLs, due again soon): connection closed, want it kept", name(open))
		}
		if len(cf.early) > 0 {
			t.Errorf("CloseHost while a request of the host was in flight: %v", cf.early)
		}
	})
}

// TestCloseFinished: a host emptied while more URLs could still come
// keeps its connection, also after a later URL gave it a second session;
// once Engine.Finished says none will come, CloseFinished closes each
// host's connections once.
func TestCloseFinished(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		cf := &closingFetcher{inFlight: map[string]int{}, closed: map[string]int{}}
		e.wrap = func(f engine.Fetcher) engine.Fetcher { cf.Fetcher = f; return cf }
		early, late := newSite(t, page), newSite(t, page)
		e.seed(early.url("/1"), late.url("/1"))
		eng := e.engine()
		eng.Appends = &engine.Appends{}
		var ended atomic.Bool
		eng.Finished = func(string) bool { return ended.Load() }
		e.runWith(eng, "owner", 30*time.Second, 0, func() bool {
			now, _ := eng.Workers()
			return len(e.pub.all()) >= 2 && now == 0
		})
		// late gets a URL of a later batch: its next session takes its
		// connection back.
		e.seed(late.url("/2"))
		e.runWith(eng, "owner", 30*time.Second, 0, func() bool {
			now, _ := eng.Workers()
			return len(e.pub.all()) >= 3 && now == 0
		})
		name := func(s *site) string { n, _, _ := strings.Cut(s.host, ":"); return n }
		cf.mu.Lock()
		if cf.closed[name(early)] != 0 || cf.closed[name(late)] != 0 {
			t.Errorf("closed %v before the input ended, want both kept", cf.closed)
		}
		cf.mu.Unlock()

		ended.Store(true)
		eng.CloseFinished()
		cf.mu.Lock()
		defer cf.mu.Unlock()
		if cf.closed[name(early)] != 1 {
			t.Errorf("%s: closed %d times once the input ended, want once", name(early), cf.closed[name(early)])
		}
		if cf.closed[name(late)] != 1 {
			t.Errorf("%s: closed %d times once the input ended, want once (its last session emptied it too)", name(late), cf.closed[name(late)])
		}
		eng.CloseFinished()
		if cf.closed[name(early)] != 1 {
			t.Errorf("%s: closed again by a second CloseFinished", name(early))
		}
	})
}
