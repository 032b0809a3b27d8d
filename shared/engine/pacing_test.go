package engine_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestCrawlDelay checks robots.txt Crawl-delay from the server's side: the
// host's delay is max(FetchDelay, Crawl-delay) for every request, the
// robots.txt request included, and a Crawl-delay above MaxCrawlDelay denies
// the host's URLs without requesting them.
func TestCrawlDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		robots     string
		fetchDelay time.Duration
		urls       int
		wantGap    time.Duration
		denied     bool
	}{
		{"1s over a 100ms FetchDelay", "User-agent: *\nCrawl-delay: 1\n", 100 * time.Millisecond, 3, time.Second, false},
		{"fraction", "User-agent: *\nCrawl-delay: 0.5\n", 100 * time.Millisecond, 2, 500 * time.Millisecond, false},
		{"FetchDelay above Crawl-delay", "User-agent: *\nCrawl-delay: 0.1\n", 400 * time.Millisecond, 2, 400 * time.Millisecond, false},
		{"other agent's Crawl-delay ignored", "User-agent: slowbot\nCrawl-delay: 20\n\nUser-agent: *\nAllow: /\n", 150 * time.Millisecond, 3, 150 * time.Millisecond, false},
		{"above MaxCrawlDelay denies", "User-agent: *\nCrawl-delay: 10\n", 100 * time.Millisecond, 3, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.FetchDelay = tc.fetchDelay
				p.MaxCrawlDelay = 5 * time.Second
				e := newEnv(t, p)
				s := newSite(t, withRobots(200, tc.robots, page))
				var urls []string
				for i := range tc.urls {
					urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
				}
				e.seed(urls...)
				e.runUntil(len(urls), 10*time.Second)

				if tc.denied {
					if got := s.paths(); len(got) != 1 || got[0] != "/robots.txt" {
						t.Errorf("requests %v, want only robots.txt", got)
					}
					for _, u := range urls {
						res := e.pub.one(t, u)
						if res.Status != result.StatusDenied || !strings.Contains(res.Error, "Crawl-delay") || !strings.Contains(res.Error, "MaxCrawlDelay") {
							t.Errorf("%s: %s %q, want denied naming Crawl-delay and MaxCrawlDelay", u, res.Status, res.Error)
						}
					}
					return
				}
				reqs := s.requests()
				if len(reqs) != tc.urls+1 {
					t.Fatalf("requests %v, want robots.txt and %d pages", s.paths(), tc.urls)
				}
				for i, g := range gaps(reqs) {
					if g < tc.wantGap-slack {
						t.Errorf("gap %d (%s -> %s) = %v, want >= %v", i, reqs[i].Path, reqs[i+1].Path, g, tc.wantGap)
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

// TestCrawlDelayAcrossRuns checks that a new invocation, with no robots.txt
// in memory, spaces its first request by the stored Crawl-delay after the
// previous invocation's last one.
func TestCrawlDelayAcrossRuns(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay = 100 * time.Millisecond
		p.CheckHostPeriod = 1100 * time.Millisecond
		e := newEnv(t, p)
		s := newSite(t, withRobots(200, "User-agent: *\nCrawl-delay: 1\n", page))
		urls := []string{s.url("/a"), s.url("/b"), s.url("/c")}
		e.seed(urls...)
		e.runUntilSeen(s.seen(2), 10*time.Second) // robots.txt, /a; stop while /b waits
		if got := s.paths(); len(got) != 2 {
			t.Fatalf("first run requested %v, want robots.txt and /a", got)
		}
		// The host is due again within two periods; the rest go 1s apart.
		e.runUntil(len(urls), 2*p.CheckHostPeriod+6*time.Second)
		reqs := s.requests()
		if len(reqs) != 1+len(urls) {
			t.Fatalf("requests %v, want robots.txt once and %d pages", s.paths(), len(urls))
		}
		for i, g := range gaps(reqs) {
			if g < time.Second-slack {
				t.Errorf("gap %d (%s -> %s) = %v, want >= the 1s Crawl-delay", i, reqs[i].Path, reqs[i+1].Path, g)
			}
		}
		for _, u := range urls {
			e.pub.one(t, u)
		}
	})
}

// flaky answers each path from a script: the i-th request to a path gets
// script[path][i], and once the script is used up, 200 with a page. A path
// in forever gets its answer every time.
type flaky struct {
	mu      sync.Mutex
	n       map[string]int
	script  map[string][]func(w http.ResponseWriter)
	forever map[string]func(w http.ResponseWriter)
}

func newFlaky(script map[string][]func(w http.ResponseWriter), forever map[string]func(w http.ResponseWriter)) *flaky {
	return &flaky{n: map[string]int{}, script: script, forever: forever}
}

func (f *flaky) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	i := f.n[r.URL.Path]
	f.n[r.URL.Path]++
	steps, always := f.script[r.URL.Path], f.forever[r.URL.Path]
	f.mu.Unlock()
	switch {
	case always != nil:
		always(w)
	case i < len(steps):
		steps[i](w)
	default:
		page(w, r)
	}
}

func status(code int, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

// resetConn answers by closing the connection without a response.
func resetConn(w http.ResponseWriter) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = c.Close()
	}
}

// TestRetryAfter checks that 429 and 503 with Retry-After pause the host
// until then (no request at all before), keep the URL queued and then fetch
// it; it is not a failure yet.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// header builds the Retry-After value at answer time.
		header func() string
		code   int
		// wantGap is the least time from the 429/503 to the next request.
		wantGap    time.Duration
		maxBackoff time.Duration
	}{
		{"429 seconds", func() string { return "1" }, 429, time.Second, 5 * time.Second},
		{"503 seconds", func() string { return "1" }, 503, time.Second, 5 * time.Second},
		{"429 http-date", func() string { return time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat) }, 429, 2 * time.Second, 5 * time.Second},
		// The server's wait is honoured even beyond MaxBackoff, which caps
		// only our own exponential back-off (issue 3).
		{"longer than MaxBackoff", func() string { return "2" }, 429, 2 * time.Second, 500 * time.Millisecond},
		{"zero", func() string { return "0" }, 429, 150 * time.Millisecond, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.MaxBackoff = tc.maxBackoff
				e := newEnv(t, p)
				f := newFlaky(map[string][]func(http.ResponseWriter){
					"/r": {func(w http.ResponseWriter) { status(tc.code, "Retry-After", tc.header())(w) }},
				}, nil)
				s := newSite(t, withRobots(404, "", f.serve))
				e.seed(s.url("/r"), s.url("/next"))
				e.runUntil(2, 10*time.Second)

				reqs := s.requests()
				if got := s.paths(); strings.Join(got, " ") != "/robots.txt /r /r /next" {
					t.Fatalf("requests %v, want robots.txt, /r (%d), /r again, /next", got, tc.code)
				}
				if g := reqs[2].Start.Sub(reqs[1].End); g < tc.wantGap-slack {
					t.Errorf("retry came %v after the %d, want >= %v (Retry-After)", g, tc.code, tc.wantGap)
				}
				res := e.pub.one(t, s.url("/r"))
				if res.Status != result.StatusFetched || res.Attempts != 2 {
					t.Errorf("/r: %s attempts=%d err=%q, want fetched on attempt 2", res.Status, res.Attempts, res.Error)
				}
				if res := e.pub.one(t, s.url("/next")); res.Status != result.StatusFetched || res.Attempts != 1 {
					t.Errorf("/next: %s attempts=%d, want fetched on attempt 1", res.Status, res.Attempts)
				}
				if h := e.load(s.host); h == nil || h.Errors != 0 || len(h.Attempts) != 0 {
					t.Errorf("stored host %+v, want no errors and no attempts left", h)
				}
			})
		})
	}
}

// TestRetryAfterAcrossRuns checks that the pause is stored on the host and
// honoured by a new engine in the next invocation.
func TestRetryAfterAcrossRuns(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		f := newFlaky(map[string][]func(http.ResponseWriter){
			"/r": {status(429, "Retry-After", "2")},
		}, nil)
		s := newSite(t, withRobots(404, "", f.serve))
		ids := e.seed(s.url("/r"))
		e.runUntilSeen(s.seen(2), 10*time.Second) // stop during the pause
		if got := s.paths(); len(got) != 2 || got[1] != "/r" {
			t.Fatalf("first run requested %v, want robots.txt and /r", got)
		}
		answered := s.requests()[1].End
		h := e.load(s.host)
		if h == nil || h.Pending != 1 {
			t.Fatalf("stored host %+v, want /r still pending", h)
		}
		if d := h.PauseUntil.Sub(answered); d < 2*time.Second-slack || d > 3*time.Second {
			t.Errorf("stored PauseUntil is %v after the 429, want about 2s", d)
		}
		if h.Due.Before(h.PauseUntil) {
			t.Errorf("host due at %v, before its pause ends at %v", h.Due, h.PauseUntil)
		}
		if h.Attempts[ids[s.url("/r")]] != 1 {
			t.Errorf("stored attempts %v, want 1 for /r", h.Attempts)
		}
		if len(e.pub.all()) != 0 {
			t.Fatalf("results before the retry:%s", describe(e.pub.all()))
		}

		// Due at once: only the stored PauseUntil holds the new engine back.
		e.dueNow(s.host)
		e.runUntil(1, 10*time.Second)
		reqs := s.requests()
		if len(reqs) != 3 {
			t.Fatalf("requests %v, want one retry of /r", s.paths())
		}
		if g := reqs[2].Start.Sub(answered); g < 2*time.Second-slack {
			t.Errorf("the next invocation retried %v after the 429, want >= 2s", g)
		}
		if res := e.pub.one(t, s.url("/r")); res.Status != result.StatusFetched || res.Attempts != 2 {
			t.Errorf("/r: %s attempts=%d, want fetched on attempt 2", res.Status, res.Attempts)
		}
	})
}

// TestBackoff checks transient failures without Retry-After: the host backs
// off exponentially (FetchDelay x 2^n), the URL is retried, and after
// MaxAttempts it ends as fetch_error with its attempts and the last error.
func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		answer  func(w http.ResponseWriter)
		wantErr string
	}{
		{"429 without Retry-After", status(429), "429"},
		{"503 without Retry-After", status(503), "503"},
		{"503 with a bad Retry-After", status(503, "Retry-After", "soon"), "503"},
		{"500", status(500), "500"},
		{"502", status(502), "502"},
		{"408", status(408), "408"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.MaxAttempts = 3
				e := newEnv(t, p)
				f := newFlaky(nil, map[string]func(http.ResponseWriter){"/always": tc.answer})
				s := newSite(t, withRobots(404, "", f.serve))
				e.seed(s.url("/always"), s.url("/after"))
				// The give-up is a failure too: /after waits 8 x delay.
				e.runUntil(2, 10*time.Second)

				var tries []demosite.Request
				for _, r := range s.requests() {
					if r.Path == "/always" {
						tries = append(tries, r)
					}
				}
				if len(tries) != p.MaxAttempts {
					t.Fatalf("/always requested %d times, want MaxAttempts %d; requests %v", len(tries), p.MaxAttempts, s.paths())
				}
				g := gaps(tries)
				// errors counts this failure too: 2 x delay after the first,
				// 4 x after the second.
				if g[0] < 2*p.FetchDelay-slack || g[1] < 4*p.FetchDelay-slack || g[1] <= g[0] {
					t.Errorf("gaps between attempts %v, want >= %v then >= %v, growing", g, 2*p.FetchDelay, 4*p.FetchDelay)
				}
				res := e.pub.one(t, s.url("/always"))
				if res.Status != result.StatusFetchError || res.Attempts != p.MaxAttempts || !strings.Contains(res.Error, tc.wantErr) {
					t.Errorf("/always: %s attempts=%d err=%q, want fetch_error after %d attempts naming %q", res.Status, res.Attempts, res.Error, p.MaxAttempts, tc.wantErr)
				}
				if res := e.pub.one(t, s.url("/after")); res.Status != result.StatusFetched {
					t.Errorf("/after: %s %q, want fetched after the failing url gave up", res.Status, res.Error)
				}
				if h := e.load(s.host); h == nil || h.Pending != 0 || len(h.Attempts) != 0 || h.Errors != 0 {
					t.Errorf("stored host %+v, want empty queue, no attempts, errors reset by the success", h)
				}
			})
		})
	}
}

// TestSuccessResetsBackoff checks that a success resets the host's error
// count: a failure after it backs off from the start again.
func TestSuccessResetsBackoff(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxAttempts = 3
		e := newEnv(t, p)
		f := newFlaky(map[string][]func(http.ResponseWriter){
			"/a": {status(500), status(500)},
			"/b": {status(500)},
		}, nil)
		s := newSite(t, withRobots(404, "", f.serve))
		e.seed(s.url("/a"), s.url("/b"))
		e.runUntil(2, 10*time.Second)
		reqs := s.requests()
		if got := strings.Join(s.paths(), " "); got != "/robots.txt /a /a /a /b /b" {
			t.Fatalf("requests %s, want /a three times then /b twice", got)
		}
		if res := e.pub.one(t, s.url("/a")); res.Status != result.StatusFetched || res.Attempts != 3 {
			t.Errorf("/a: %s attempts=%d, want fetched on attempt 3", res.Status, res.Attempts)
		}
		if res := e.pub.one(t, s.url("/b")); res.Status != result.StatusFetched || res.Attempts != 2 {
			t.Errorf("/b: %s attempts=%d, want fetched on attempt 2", res.Status, res.Attempts)
		}
		// /b's first failure comes after /a's success: one error, 2 x delay.
		// Without the reset it would be the host's third error, 8 x delay.
		if g := reqs[5].Start.Sub(reqs[4].End); g < 2*p.FetchDelay-slack || g >= 6*p.FetchDelay {
			t.Errorf("retry of /b came %v after its failure, want about %v (back-off reset by /a's success)", g, 2*p.FetchDelay)
		}
		if h := e.load(s.host); h == nil || h.Errors != 0 {
			t.Errorf("stored host %+v, want errors reset", h)
		}
	})
}

// TestAttemptsAcrossRuns checks that a URL's failed attempts live in the
// store, so MaxAttempts counts over invocations.
func TestAttemptsAcrossRuns(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxAttempts = 2
		p.FetchDelay = 400 * time.Millisecond
		e := newEnv(t, p)
		f := newFlaky(nil, map[string]func(http.ResponseWriter){"/always": status(500)})
		s := newSite(t, withRobots(404, "", f.serve))
		ids := e.seed(s.url("/always"))
		e.runUntilSeen(s.seen(2), 10*time.Second) // robots.txt, try 1; stop during the back-off
		h := e.load(s.host)
		if h == nil || h.Attempts[ids[s.url("/always")]] != 1 || h.Errors != 1 {
			t.Fatalf("stored host after one failure %+v, want attempts 1 and errors 1; requests %v", h, s.paths())
		}
		e.runUntil(1, 2*p.CheckHostPeriod+5*time.Second)
		if n := s.count("/always"); n != 2 {
			t.Fatalf("/always requested %d times over two runs, want MaxAttempts 2", n)
		}
		res := e.pub.one(t, s.url("/always"))
		if res.Status != result.StatusFetchError || res.Attempts != 2 || !strings.Contains(res.Error, "500") {
			t.Errorf("/always: %s attempts=%d err=%q, want fetch_error after 2 attempts", res.Status, res.Attempts, res.Error)
		}
		reqs := s.requests()
		if g := reqs[2].Start.Sub(reqs[1].End); g < 2*p.FetchDelay-slack {
			t.Errorf("the retry in the second run came %v after the failure, want the stored back-off >= %v", g, 2*p.FetchDelay)
		}
	})
}

// TestDroppedConnectionIsNotReplayed checks that a server closing the
// connection without an answer gets each attempt once, paced: net/http's
// Transport silently replays a GET that failed on a reused keep-alive
// connection, which would put a second request on the server within a
// millisecond, outside the host's delay.
func TestDroppedConnectionIsNotReplayed(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxAttempts = 3
		e := newEnv(t, p)
		f := newFlaky(nil, map[string]func(http.ResponseWriter){"/always": resetConn})
		s := newSite(t, withRobots(404, "", f.serve))
		e.seed(s.url("/always"))
		e.runUntil(1, 10*time.Second)

		res := e.pub.one(t, s.url("/always"))
		if res.Status != result.StatusFetchError || res.Attempts != p.MaxAttempts {
			t.Errorf("/always: %s attempts=%d err=%q, want fetch_error after %d attempts", res.Status, res.Attempts, res.Error, p.MaxAttempts)
		}
		if n := s.count("/always"); n != p.MaxAttempts {
			t.Errorf("server got %d requests for %d attempts; requests %v", n, p.MaxAttempts, s.paths())
		}
		if g := minGap(s.requests()); g < p.FetchDelay-slack {
			t.Errorf("smallest gap on the server %v, want >= FetchDelay %v (a request replayed outside the engine's pacing)", g, p.FetchDelay)
		}
	})
}

// TestRobotsRefetchPacedByCrawlDelay checks that when a stored or cached
// robots.txt has expired, the request that reads it again keeps the
// Crawl-delay it asked for after the host's previous request, even in a
// worker that has not read any robots.txt yet.
func TestRobotsRefetchPacedByCrawlDelay(t *testing.T) {
	t.Parallel()
	for _, warm := range []bool{false, true} {
		name := map[bool]string{false: "new instance, stored copy expired", true: "same instance, cached copy expired"}[warm]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				const crawlDelay = 3 * time.Second
				p := testParams()
				p.FetchDelay = 100 * time.Millisecond
				// Expired by the time the page after it is fetched.
				p.RobotsTTL = 500 * time.Millisecond
				e := newEnv(t, p)
				s := newSite(t, withRobots(200, "User-agent: *\nCrawl-delay: 3\n", page))
				eng := e.engine()
				e.seed(s.url("/a"))
				e.runWith(eng, "owner", 15*time.Second, 0, s.seen(2))
				if got := strings.Join(s.paths(), " "); got != "/robots.txt /a" {
					t.Fatalf("first run requested %s, want robots.txt and /a", got)
				}
				e.seed(s.url("/b"))
				e.dueNow(s.host)
				if !warm {
					eng = e.engine()
				}
				e.runWith(eng, "owner", 15*time.Second, 0, e.pub.has(2))
				reqs := s.requests()
				if got := strings.Join(s.paths(), " "); got != "/robots.txt /a /robots.txt /b" {
					t.Fatalf("requests %s, want robots.txt read again before /b", got)
				}
				if g := reqs[2].Start.Sub(reqs[1].End); g < crawlDelay-slack {
					t.Errorf("robots.txt read again %v after /a, want >= its Crawl-delay %v", g, crawlDelay)
				}
				if g := reqs[3].Start.Sub(reqs[2].End); g < crawlDelay-slack {
					t.Errorf("/b came %v after robots.txt, want >= %v", g, crawlDelay)
				}
			})
		})
	}
}
