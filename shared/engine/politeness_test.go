package engine_test

import (
	"context"
	"fmt"
	stdnet "net"
	"net/url"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// startDemo starts a demo site of n hosts, closed with the test (on the
// test's in-memory network in virtual).
func startDemo(t *testing.T, n, firstIP int) *demosite.Site {
	t.Helper()
	opts := demosite.Options{Hosts: n, FirstIP: firstIP}
	if net := networkOf(t); net != nil {
		opts.Listen = func(ip string) (stdnet.Listener, error) { return net.Listen(ip), nil }
	}
	s, err := demosite.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// checkExactlyOnce fails unless every url has exactly one result, fetched
// with the demo site's body, and nothing else was published.
func checkExactlyOnce(t *testing.T, pub *recorder, urls []string) {
	t.Helper()
	by := pub.byURL()
	for _, u := range urls {
		rs := by[u]
		if len(rs) != 1 {
			t.Errorf("%s: %d results, want exactly 1:%s", u, len(rs), describe(rs))
			continue
		}
		pu, _ := url.Parse(u)
		if rs[0].Status != result.StatusFetched || rs[0].Data != demosite.Body(pu.Host, pu.Path) {
			t.Errorf("%s: %s data=%q err=%q, want the page", u, rs[0].Status, rs[0].Data, rs[0].Error)
		}
	}
	if n := len(pub.all()); n != len(urls) {
		t.Errorf("%d results for %d urls", n, len(urls))
	}
}

// checkPolite fails when two requests to one host came closer than delay
// (end of one answer to the start of the next, on the server's clock).
func checkPolite(t *testing.T, reqs []demosite.Request, delay time.Duration) {
	t.Helper()
	for h, g := range demosite.Gaps(reqs) {
		if g.Min < delay-slack {
			t.Errorf("host %s: smallest gap %v over %d requests, want >= %v", h, g.Min, g.Requests, delay)
		}
	}
}

// TestOverlappingRuns runs two invocations of the same shard at once, as a
// duplicated or late EventBridge schedule does: they never both work a host
// (the server sees every host's requests spaced by the delay) and every URL
// gets exactly one result.
func TestOverlappingRuns(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name    string
		stagger time.Duration
		// stopA is how many requests the server sees before a stops (0:
		// a runs until every url has a result).
		stopA     int
		leaseWait time.Duration
	}{
		// Whoever wins a virtual shard's lease works it; the other run
		// does not retry within the test (a lease renews every TTL/4).
		{"simultaneous", 0, 0, 0},
		// a stops mid-queue; b takes the leases over when a releases them.
		{"second waits for the lease", 300 * time.Millisecond, 9, 12 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inBothWorlds(t, func(t *testing.T) {
				p := testParams()
				p.FetchDelay = 200 * time.Millisecond
				p.CheckHostPeriod = 1100 * time.Millisecond
				e := newEnv(t, p)
				s := startDemo(t, 3, 10+10*i)
				urls := s.URLs(12) // 2.6s of requests per host: more than a's run
				e.seed(urls...)

				var wg sync.WaitGroup
				var sa, sb engine.Summary
				wg.Add(2)
				go func() {
					defer wg.Done()
					stop := e.pub.has(len(urls))
					if tc.stopA > 0 {
						// (Maybe mid-request on another host: b fetches that
						// page again, still paced by the stored last fetch.)
						stop = func() bool { return len(s.Requests()) >= tc.stopA }
					}
					sa = e.runWith(e.engine(), "invocation-a", 12*time.Second, 0, stop)
				}()
				go func() {
					defer wg.Done()
					time.Sleep(tc.stagger)
					sb = e.runWith(e.engine(), "invocation-b", 12*time.Second, tc.leaseWait, e.pub.has(len(urls)))
				}()
				wg.Wait()
				t.Logf("a: leased %d shards, %d requests; b: leased %d shards, %d requests", len(sa.Leased), sa.Requests, len(sb.Leased), sb.Requests)

				checkPolite(t, s.Requests(), p.FetchDelay)
				checkExactlyOnce(t, e.pub, urls)
				if tc.leaseWait > 0 && (sa.Requests == 0 || sb.Requests == 0) {
					t.Errorf("a made %d requests and b %d: want a to start and b to finish after taking the leases over", sa.Requests, sb.Requests)
				}
				if tc.leaseWait == 0 {
					for _, v := range sa.Leased {
						if slices.Contains(sb.Leased, v) {
							t.Errorf("virtual shard %d leased by both overlapping runs", v)
						}
					}
				}
			})
		})
	}
}

// TestRunEndsMidQueue checks that a run ending with URLs left leaves them
// queued and due, and the next invocation finishes them, each exactly once,
// keeping the delay across the two runs and reusing the stored robots.txt.
func TestRunEndsMidQueue(t *testing.T) {
	t.Parallel()
	inBothWorlds(t, func(t *testing.T) {
		p := testParams()
		p.CheckHostPeriod = 1100 * time.Millisecond
		e := newEnv(t, p)
		s := startDemo(t, 1, 40)
		host := s.Hosts()[0]
		urls := s.URLs(30)
		e.seed(urls...)

		// Ended by Until, as an invocation is: 31 requests 150ms apart take
		// 4.5s, and a loaded machine may take a second or two to start.
		e.run(3 * time.Second)
		first := len(e.pub.all())
		if first == 0 || first >= len(urls) {
			t.Fatalf("first run produced %d of %d results, want some but not all", first, len(urls))
		}
		h := e.load(host)
		if h == nil || h.Pending != len(urls)-first {
			t.Fatalf("stored host %+v, want %d pending", h, len(urls)-first)
		}
		if h.Due.IsZero() || h.Due.After(time.Now().Add(2*p.CheckHostPeriod)) {
			t.Errorf("host due at %v, want due within two periods", h.Due)
		}
		// The pending URLs are the ones without a result, in order.
		done := e.pub.byURL()
		var want []string
		for _, u := range urls {
			if len(done[u]) == 0 {
				want = append(want, u)
			}
		}
		var got []string
		for _, ent := range h.Head {
			got = append(got, ent.URL)
		}
		if !slices.Equal(got, want) {
			t.Errorf("pending %v, want the unfinished urls %v", got, want)
		}

		e.runUntil(len(urls), 2*p.CheckHostPeriod+8*time.Second)
		checkExactlyOnce(t, e.pub, urls)
		checkPolite(t, s.Requests(), p.FetchDelay)
		robots := 0
		for _, r := range s.Requests() {
			if r.Path == "/robots.txt" {
				robots++
			}
		}
		if robots != 1 {
			t.Errorf("robots.txt requested %d times over two runs, want 1 (stored)", robots)
		}
		if h := e.load(host); h == nil || h.Pending != 0 || !h.Due.IsZero() {
			t.Errorf("stored host %+v, want an empty queue out of the due index", h)
		}
	})
}

// TestDelayAcrossRuns checks that the stored last fetch holds back the next
// invocation: with a 1s delay, a run that ends just after a request leaves
// the next run waiting out the rest of the delay.
func TestDelayAcrossRuns(t *testing.T) {
	t.Parallel()
	inBothWorlds(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay = time.Second
		p.CheckHostPeriod = 1100 * time.Millisecond
		e := newEnv(t, p)
		s := startDemo(t, 1, 50)
		urls := s.URLs(3)
		e.seed(urls...)
		// Stop right after page 0: page 1 is due 1s after it.
		e.runUntilSeen(func() bool { return settled(s.Requests(), 2) }, 10*time.Second)
		if n := len(s.Requests()); n != 2 {
			t.Fatalf("first run made %d requests, want robots.txt and page 0", n)
		}
		// Due at once: only the stored last fetch holds the new engine back.
		e.dueNow(s.Hosts()[0])
		e.runUntil(len(urls), 2*p.CheckHostPeriod+6*time.Second)
		checkExactlyOnce(t, e.pub, urls)
		checkPolite(t, s.Requests(), p.FetchDelay)
	})
}

// TestPublishFailureKeepsURLs checks that results the output queue refused
// leave their URLs queued: nothing is lost, and the next run sends them.
func TestPublishFailureKeepsURLs(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.CheckHostPeriod = 1100 * time.Millisecond
		e := newEnv(t, p)
		s := startDemo(t, 1, 60)
		urls := s.URLs(3)
		e.seed(urls...)
		e.pub.fail.Store(true)
		sum := e.runUntilSeen(func() bool { return e.pub.refused.Load() > 0 }, 10*time.Second)
		if len(e.pub.all()) != 0 || sum.Errors == 0 {
			t.Fatalf("failing publisher: %d results, %d errors counted", len(e.pub.all()), sum.Errors)
		}
		if h := e.load(s.Hosts()[0]); h == nil || h.Pending != len(urls) {
			t.Fatalf("stored host %+v, want all %d urls still queued", h, len(urls))
		}
		e.pub.fail.Store(false)
		e.runUntil(len(urls), 2*p.CheckHostPeriod+5*time.Second)
		checkExactlyOnce(t, e.pub, urls)
		checkPolite(t, s.Requests(), p.FetchDelay)
	})
}

// TestRandomizeDelay checks that RandomizeDelay spreads the gaps over 0.5x
// to 1.5x of the delay.
func TestRandomizeDelay(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay = 300 * time.Millisecond
		p.RandomizeDelay = true
		e := newEnv(t, p)
		s := startDemo(t, 1, 70)
		urls := s.URLs(6)
		e.seed(urls...)
		e.runUntil(len(urls), 10*time.Second)
		checkExactlyOnce(t, e.pub, urls)
		g := gaps(s.Requests())
		lo, hi := slices.Min(g), slices.Max(g)
		if lo < p.FetchDelay/2-slack || hi > p.FetchDelay*3/2+200*time.Millisecond {
			t.Errorf("gaps %v, want all within 0.5x..1.5x of %v", g, p.FetchDelay)
		}
		if hi-lo < 20*time.Millisecond {
			t.Errorf("gaps %v barely vary: delay not randomised", g)
		}
	})
}

// TestIngesterQueueKeys checks the grouping QueueMode=domain relies on: the
// Ingester puts hosts of one registrable domain (same port) in one stored
// queue; IP literals and names without a registrable domain keep their own.
func TestIngesterQueueKeys(t *testing.T) {
	t.Parallel()
	hosts := []string{
		"a.example.com", "b.example.com", "example.com", "a.example.com:8080",
		"www.example.co.uk", "shop.example.co.uk",
		"foo.github.io", "bar.github.io",
		"127.0.0.2:8080", "[::1]:8080", "localhost",
	}
	for _, tc := range []struct {
		mode params.QueueMode
		want map[string]int // queue key -> pending
	}{
		{params.QueueByDomain, map[string]int{
			"example.com": 3, "example.com:8080": 1, "example.co.uk": 2,
			"foo.github.io": 1, "bar.github.io": 1,
			"127.0.0.2:8080": 1, "[::1]:8080": 1, "localhost": 1,
		}},
		{params.QueueByHost, map[string]int{
			"a.example.com": 1, "b.example.com": 1, "example.com": 1, "a.example.com:8080": 1,
			"www.example.co.uk": 1, "shop.example.co.uk": 1, "foo.github.io": 1, "bar.github.io": 1,
			"127.0.0.2:8080": 1, "[::1]:8080": 1, "localhost": 1,
		}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				e := newEnv(t, testParams())
				var msgs []urlmsg.Message
				for i, h := range hosts {
					m, err := urlmsg.Validate(urlmsg.Input{URL: "http://" + h + "/p"})
					if err != nil {
						t.Fatal(err)
					}
					m.ID = urlmsg.MakeID("ingest", i, m.URL)
					msgs = append(msgs, m)
				}
				in := &hostqueue.Ingester{Store: e.store, Publisher: e.pub, Now: time.Now}
				res := in.Ingest(t.Context(), hostqueue.IngestParams{
					PersistLimit: 100, ByDomain: tc.mode == params.QueueByDomain,
				}, msgs)
				if len(res.Failed) != 0 || res.Appended != len(msgs) {
					t.Fatalf("ingest: %+v", res)
				}
				for key, n := range tc.want {
					h := e.load(key)
					if h == nil || h.Pending != n {
						t.Errorf("queue %s: %+v, want %d pending", key, h, n)
						continue
					}
					for _, ent := range h.Head {
						u, _ := url.Parse(ent.URL)
						if got := hostqueue.QueueKey(u.Host, tc.mode == params.QueueByDomain); got != key {
							t.Errorf("queue %s holds %s, whose key is %s", key, ent.URL, got)
						}
					}
				}
			})
		})
	}
}

// hostMap is a Fetcher that sends requests for some host names to loopback
// addresses: a stand-in for DNS, so that hosts of one registrable domain can
// be served by loopback sites. Everything else is the real fetcher.
type hostMap struct {
	f     engine.Fetcher
	hosts map[string]string // name:port -> ip:port
}

func (m hostMap) Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	u, err := url.Parse(req.URL)
	if err == nil {
		if to, ok := m.hosts[u.Host]; ok {
			u.Host = to
			req.URL = u.String()
		}
	}
	return m.f.Fetch(ctx, req)
}

// TestDomainQueueSharesDelay checks QueueMode=domain end to end: the hosts
// a.example.com and b.example.com (served by two loopback sites through a
// host map) share one queue, so the delay holds across both of them; in
// host mode they are paced independently and their requests interleave.
func TestDomainQueueSharesDelay(t *testing.T) {
	t.Parallel()
	for i, mode := range []params.QueueMode{params.QueueByDomain, params.QueueByHost} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.FetchDelay = 250 * time.Millisecond
				p.QueueMode = mode
				e := newEnv(t, p)
				s := startDemo(t, 2, 80+10*i)
				addrs := s.Hosts()
				names := []string{"a.example.com:8080", "b.example.com:8080"}
				e.wrap = func(f engine.Fetcher) engine.Fetcher {
					return hostMap{f: f, hosts: map[string]string{names[0]: addrs[0], names[1]: addrs[1]}}
				}
				var urls []string
				for j := range 3 {
					for _, n := range names {
						urls = append(urls, fmt.Sprintf("http://%s/page/%d", n, j))
					}
				}
				e.seed(urls...)
				e.runUntil(len(urls), 10*time.Second)

				by := e.pub.byURL()
				for j, u := range urls {
					rs := by[u]
					if len(rs) != 1 || rs[0].Status != result.StatusFetched || rs[0].Data != demosite.Body(addrs[j%2], fmt.Sprintf("/page/%d", j/2)) {
						t.Errorf("%s: results%s, want one fetched page", u, describe(rs))
					}
				}
				reqs := s.Requests()
				checkPolite(t, reqs, p.FetchDelay)
				// Merge both hosts into one timeline: the domain's gaps.
				sort.Slice(reqs, func(a, b int) bool { return reqs[a].Start.Before(reqs[b].Start) })
				g := minGap(reqs)
				if mode == params.QueueByDomain {
					if g < p.FetchDelay-slack {
						t.Errorf("smallest gap across the domain's two hosts %v, want >= %v (one shared queue)", g, p.FetchDelay)
					}
					if h := e.load("example.com:8080"); h == nil {
						t.Errorf("no stored queue example.com:8080")
					}
				} else if g >= p.FetchDelay-slack {
					t.Errorf("host mode: smallest gap across two hosts %v; want them paced independently (overlapping)", g)
				}
			})
		})
	}
}

// TestMaxConcurrentHosts checks that a run works at most MaxConcurrentHosts
// hosts at a time: with 1, requests to three hosts never overlap.
func TestMaxConcurrentHosts(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxConcurrentHosts = 1
		e := newEnv(t, p)
		s := startDemo(t, 3, 100)
		urls := s.URLs(2)
		e.seed(urls...)
		sum := e.runUntil(len(urls), 10*time.Second)
		checkExactlyOnce(t, e.pub, urls)
		if sum.Hosts != 3 || sum.Results[result.StatusFetched] != len(urls) {
			t.Errorf("summary %+v, want 3 hosts and %d fetched", sum, len(urls))
		}
		reqs := s.Requests()
		for i := 1; i < len(reqs); i++ {
			if reqs[i].Start.Before(reqs[i-1].End) {
				t.Errorf("%s%s started before %s%s ended: two hosts worked at once", reqs[i].Host, reqs[i].Path, reqs[i-1].Host, reqs[i-1].Path)
			}
		}
	})
}

// TestDeadlineStopsRequests checks RunRequest.Deadline: no request starts
// unless it can time out and be committed (2s margin) before the deadline,
// even though Until is later; the rest stays queued.
func TestDeadlineStopsRequests(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchTimeout = time.Second
		e := newEnv(t, p)
		s := startDemo(t, 1, 110)
		urls := s.URLs(30)
		e.seed(urls...)
		start := time.Now()
		// Requests may start until 3s in (deadline - timeout - 2s margin); the
		// run goes on to 4s without starting more.
		deadline := start.Add(6 * time.Second)
		e.runRequest(e.engine(), engine.RunRequest{
			Shard: 0, ShardCount: 1, Owner: "deadline", Until: start.Add(4 * time.Second), Deadline: deadline,
			Tick: 250 * time.Millisecond,
		})
		if time.Now().After(deadline) {
			t.Errorf("run returned %v after its deadline", time.Since(deadline))
		}
		reqs := s.Requests()
		if len(reqs) == 0 {
			t.Fatal("no request at all")
		}
		lastStart := deadline.Add(-p.FetchTimeout - 2*time.Second)
		for _, r := range reqs {
			if r.Start.After(lastStart.Add(slack)) {
				t.Errorf("%s started %v before the deadline, want >= FetchTimeout + 2s", r.Path, deadline.Sub(r.Start))
			}
		}
		n := len(e.pub.all())
		if h := e.load(s.Hosts()[0]); h == nil || h.Pending != len(urls)-n || h.Pending == 0 {
			t.Errorf("stored host %+v after %d results, want the rest pending", h, n)
		}
	})
}
