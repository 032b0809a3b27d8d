package engine_test

import (
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestLongCrawlDelay: a Crawl-delay longer than a worker waits in place
// (45 s, a day) is honoured, not denied: the host is released between
// requests, due again at its last fetch plus the delay, and each request
// comes that long after the previous one. The lease stays short.
func TestLongCrawlDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		delay time.Duration
		body  string
	}{
		{"45 s", 45 * time.Second, "User-agent: *\nCrawl-delay: 45\n"},
		{"a day", 24 * time.Hour, "User-agent: *\nCrawl-delay: 86400\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.MaxCrawlDelay = 24 * time.Hour
				e := newEnv(t, p)
				s := newSite(t, withRobots(200, tc.body, page))
				urls := []string{s.url("/p0"), s.url("/p1"), s.url("/p2")}
				e.seed(urls...)
				// The first run fetches robots.txt, then releases the host.
				e.run(10 * time.Second)
				if got := s.paths(); len(got) != 1 {
					t.Fatalf("first run requested %v, want robots.txt only", got)
				}
				h := e.load(s.host)
				if want := s.requests()[0].End.Add(tc.delay); h.Due.Before(want.Add(-slack)) || h.Due.After(want.Add(time.Second)) {
					t.Errorf("due %v, want the last fetch + %v = %v", h.Due, tc.delay, want)
				}
				// Runs come and go; each finds the host when it is due. A
				// robots.txt is trusted for twice its Crawl-delay, so with a
				// day's delay it is read again every other visit.
				for range 6 {
					time.Sleep(tc.delay)
					e.run(10 * time.Second)
					if len(e.pub.all()) == len(urls) {
						break
					}
				}
				reqs := s.requests()
				if len(reqs) < 4 || len(reqs) > 6 {
					t.Fatalf("requests %v, want robots.txt and 3 pages (robots.txt again at most twice)", s.paths())
				}
				for i, g := range gaps(reqs) {
					if g < tc.delay-slack {
						t.Errorf("gap %d = %v, want >= %v", i, g, tc.delay)
					}
				}
				// Without a crash the delay counts from the real end: the
				// pause recorded before each request (for a successor after
				// a crash) is replaced by the commit after it.
				for i, g := range gaps(reqs) {
					if g > tc.delay+5*time.Second {
						t.Errorf("gap %d = %v, want about %v", i, g, tc.delay)
					}
				}
				for _, u := range urls {
					if res := e.pub.one(t, u); res.Status != result.StatusFetched {
						t.Errorf("%s: %s %q, want fetched", u, res.Status, res.Error)
					}
				}
			})
		})
	}
}
