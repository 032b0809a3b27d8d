package engine_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestRobots runs one site per robots.txt behaviour and checks, from the
// server's log, what was requested, and from the results, what was decided.
func TestRobots(t *testing.T) {
	t.Parallel()
	serve := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if status == http.StatusOK {
				w.Header().Set("Content-Type", "text/plain")
			}
			w.WriteHeader(status)
			_, _ = fmt.Fprint(w, body)
		}
	}
	for _, tc := range []struct {
		name   string
		robots http.HandlerFunc
		// fetch are the paths that must end fetched, deny those that must
		// end denied (and never be requested). With deferred, no path may
		// be requested and none may have a result.
		fetch, deny []string
		deferred    bool
		timeout     time.Duration
	}{
		{
			name:   "allow",
			robots: serve(200, "User-agent: *\nAllow: /\n"),
			fetch:  []string{"/a", "/b"},
		},
		{
			name:   "disallow",
			robots: serve(200, "User-agent: *\nDisallow: /private/\n"),
			fetch:  []string{"/public", "/privateer"},
			deny:   []string{"/private/x", "/private/"},
		},
		{
			name: "wildcards",
			robots: serve(200, "User-agent: *\n"+
				"Disallow: /*.pdf$\n"+
				"Disallow: /tmp*/\n"+
				"Allow: /tmp-ok/\n"),
			fetch: []string{"/doc.pdf?download=1", "/doc.pdfx", "/tmp-ok/a", "/tmpfile"},
			deny:  []string{"/doc.pdf", "/a/b/c.pdf", "/tmp1/x", "/tmp/"},
		},
		{
			name: "our group wins over star",
			robots: serve(200, "User-agent: *\nDisallow: /\n\n"+
				"User-agent: urldownloader\nDisallow: /not-for-us\n"),
			fetch: []string{"/open"},
			deny:  []string{"/not-for-us"},
		},
		{
			name:   "404 allows all",
			robots: serve(404, "nope"),
			fetch:  []string{"/a", "/b"},
		},
		{
			name:   "403 allows all",
			robots: serve(403, "User-agent: *\nDisallow: /\n"),
			fetch:  []string{"/a", "/b"},
		},
		{
			name:   "401 allows all",
			robots: serve(401, ""),
			fetch:  []string{"/a"},
		},
		{
			name: "redirect followed",
			robots: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/real-robots.txt", http.StatusMovedPermanently)
			},
			fetch: []string{"/a"},
			deny:  []string{"/secret"},
		},
		{
			name:     "500 defers the host",
			robots:   serve(500, "oops"),
			fetch:    []string{"/a", "/b"},
			deferred: true,
		},
		{
			name:     "503 defers the host",
			robots:   serve(503, ""),
			fetch:    []string{"/a"},
			deferred: true,
		},
		{
			name:     "429 defers the host",
			robots:   serve(429, ""),
			fetch:    []string{"/a"},
			deferred: true,
		},
		{
			name: "timeout defers the host",
			robots: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(3 * time.Second):
				}
			},
			fetch:    []string{"/a"},
			deferred: true,
			timeout:  300 * time.Millisecond,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				if tc.timeout > 0 {
					p.FetchTimeout = tc.timeout
				}
				e := newEnv(t, p)
				s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
					switch r.URL.Path {
					case "/robots.txt":
						tc.robots(w, r)
					case "/real-robots.txt":
						_, _ = fmt.Fprint(w, "User-agent: *\nDisallow: /secret\n")
					default:
						page(w, r)
					}
				})
				var urls []string
				for _, path := range append(append([]string(nil), tc.fetch...), tc.deny...) {
					urls = append(urls, s.url(path))
				}
				e.seed(urls...)
				if tc.deferred {
					// Until robots.txt has been tried twice: the first
					// back-off is seen, and no page may come in between.
					e.runUntilSeen(s.seen(2), 5*time.Second)
				} else {
					e.runUntil(len(urls), 10*time.Second)
				}

				requested := map[string]int{}
				for _, path := range s.paths() {
					requested[path]++
				}
				if requested["/robots.txt"] == 0 {
					t.Errorf("robots.txt never requested; requests: %v", s.paths())
				}
				if tc.deferred {
					if got := e.pub.all(); len(got) != 0 {
						t.Errorf("deferred host produced results:%s", describe(got))
					}
					for _, path := range tc.fetch {
						if requested[path] != 0 {
							t.Errorf("%s requested although robots.txt was unavailable; requests: %v", path, s.paths())
						}
					}
					h := e.load(s.host)
					if h == nil || h.Pending != len(urls) {
						t.Fatalf("stored host = %+v, want all %d urls still pending", h, len(urls))
					}
					if h.Errors == 0 || !h.PauseUntil.After(h.LastFetch) {
						t.Errorf("stored host errors=%d pauseUntil=%v lastFetch=%v, want a back-off recorded", h.Errors, h.PauseUntil, h.LastFetch)
					}
					if h.Due.IsZero() {
						t.Errorf("deferred host left the due index")
					}
					// Deferral backs off: the robots.txt retries are spaced by
					// growing gaps, never closer than the delay.
					robots := gaps(s.requests())
					for i, g := range robots {
						if g < p.FetchDelay-slack {
							t.Errorf("robots.txt retry %d came %v after the previous answer, want >= %v", i+1, g, p.FetchDelay)
						}
						if i > 0 && g <= robots[i-1] {
							t.Errorf("robots.txt retry gaps %v do not grow", robots)
						}
					}
					return
				}
				if requested["/robots.txt"] != 1 {
					t.Errorf("robots.txt requested %d times in one run, want 1", requested["/robots.txt"])
				}
				for _, path := range tc.fetch {
					res := e.pub.one(t, s.url(path))
					if res.Status != result.StatusFetched || res.HTTPStatus != 200 || res.Data != "page "+strings.SplitN(path, "?", 2)[0]+"\n" {
						t.Errorf("%s: got %s http=%d data=%q err=%q, want fetched", path, res.Status, res.HTTPStatus, res.Data, res.Error)
					}
					if requested[path] != 1 {
						t.Errorf("%s requested %d times, want 1", path, requested[path])
					}
				}
				for _, path := range tc.deny {
					res := e.pub.one(t, s.url(path))
					if res.Status != result.StatusDenied || !strings.Contains(res.Error, "robots.txt") {
						t.Errorf("%s: got %s err=%q, want denied naming robots.txt", path, res.Status, res.Error)
					}
					if requested[path] != 0 {
						t.Errorf("%s is disallowed but was requested %d times", path, requested[path])
					}
				}
				if g := minGap(s.requests()); g >= 0 && g < p.FetchDelay-slack {
					t.Errorf("smallest gap between requests %v, want >= FetchDelay %v; requests %v", g, p.FetchDelay, s.paths())
				}
				if h := e.load(s.host); h != nil && h.Pending != 0 {
					t.Errorf("%d urls still pending after the run", h.Pending)
				}
			})
		})
	}
}

// TestRobotsFetchedOnce checks that robots.txt is read once per RobotsTTL:
// a warm engine uses its memory, a new engine (another function instance)
// the stored copy, and only an expired TTL makes it read again.
func TestRobotsFetchedOnce(t *testing.T) {
	t.Parallel()
	// A small robots.txt rides in the host's state; a large one (comments
	// that do not compress) gets an item of its own, which the host's state
	// points to.
	var large strings.Builder
	large.WriteString("User-agent: *\nDisallow: /no\n")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		fmt.Fprintf(&large, "# %016x%016x\n", rng.Uint64(), rng.Uint64())
	}
	for name, body := range map[string]string{"small": "User-agent: *\nDisallow: /no\n", "large": large.String()} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				robotsFetchedOnce(t, body)
			})
		})
	}
}

func robotsFetchedOnce(t *testing.T, body string) {
	p := testParams()
	e := newEnv(t, p)
	s := newSite(t, withRobots(200, body, page))
	warm := e.engine()

	steps := []struct {
		name string
		// fresh runs a new engine (another function instance, nothing in
		// memory) instead of the warm one.
		fresh      bool
		robotsTTL  time.Duration
		wantRobots int
	}{
		{"first run", false, time.Hour, 1},
		{"same instance", false, time.Hour, 1},
		{"new instance, stored copy", true, time.Hour, 1},
		{"ttl expired", true, time.Second, 2},
	}
	for i, st := range steps {
		p.RobotsTTL = st.robotsTTL
		e.setParams(p)
		if reqs := s.requests(); len(reqs) > 0 && st.robotsTTL < time.Hour {
			// Let the stored robots.txt (the first request) age past the TTL.
			time.Sleep(st.robotsTTL - time.Since(reqs[0].End) + 50*time.Millisecond)
		}
		u := s.url(fmt.Sprintf("/page/%d", i))
		no := s.url(fmt.Sprintf("/no/%d", i))
		e.seed(u, no)
		eng := warm
		if st.fresh {
			eng = e.engine()
		}
		e.runWith(eng, "owner", 10*time.Second, 0, e.pub.has(2*(i+1)))
		if got := s.count("/robots.txt"); got != st.wantRobots {
			t.Fatalf("%s: robots.txt requested %d times in all, want %d; requests %v", st.name, got, st.wantRobots, s.paths())
		}
		if res := e.pub.one(t, u); res.Status != result.StatusFetched {
			t.Errorf("%s: %s ended %s (%s)", st.name, u, res.Status, res.Error)
		}
		if res := e.pub.one(t, no); res.Status != result.StatusDenied {
			t.Errorf("%s: %s ended %s, want denied by the cached robots.txt", st.name, no, res.Status)
		}
	}
	if g := minGap(s.requests()); g < p.FetchDelay-slack {
		t.Errorf("smallest gap %v, want >= %v", g, p.FetchDelay)
	}
}

// TestRobotsRequestIsPaced checks that the robots.txt request counts as a
// request to the host: the first page waits the delay after it.
func TestRobotsRequestIsPaced(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay = 400 * time.Millisecond
		e := newEnv(t, p)
		s := newSite(t, withRobots(200, "User-agent: *\nAllow: /\n", page))
		e.seed(s.url("/a"), s.url("/b"))
		e.runUntil(2, 10*time.Second)
		reqs := s.requests()
		if len(reqs) != 3 || reqs[0].Path != "/robots.txt" {
			t.Fatalf("requests %v, want robots.txt then two pages", s.paths())
		}
		for i, g := range gaps(reqs) {
			if g < p.FetchDelay-slack {
				t.Errorf("gap %d (%s -> %s) = %v, want >= FetchDelay %v", i, reqs[i].Path, reqs[i+1].Path, g, p.FetchDelay)
			}
		}
	})
}

// TestRespectRobotsOff checks that with RespectRobots off robots.txt is
// neither requested nor applied.
func TestRespectRobotsOff(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.RespectRobots = false
		e := newEnv(t, p)
		s := newSite(t, withRobots(200, "User-agent: *\nDisallow: /\nCrawl-delay: 10\n", page))
		e.seed(s.url("/a"), s.url("/b"))
		e.runUntil(2, 10*time.Second)
		if got := strings.Join(s.paths(), " "); got != "/a /b" {
			t.Errorf("requests %s, want /a /b and no robots.txt", got)
		}
		for _, path := range []string{"/a", "/b"} {
			if res := e.pub.one(t, s.url(path)); res.Status != result.StatusFetched {
				t.Errorf("%s: %s %q, want fetched", path, res.Status, res.Error)
			}
		}
	})
}

// TestRobotsRetryAfter checks that a 429 or 503 on robots.txt with
// Retry-After pauses the host as long as the server asked, like the same
// answer on a page: the robots.txt retry must not come sooner.
func TestRobotsRetryAfter(t *testing.T) {
	t.Parallel()
	for _, code := range []int{429, 503} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				e := newEnv(t, p)
				var mu sync.Mutex
				n := 0
				s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/robots.txt" {
						mu.Lock()
						n++
						first := n == 1
						mu.Unlock()
						if first {
							w.Header().Set("Retry-After", "2")
							w.WriteHeader(code)
							return
						}
						w.WriteHeader(http.StatusNotFound)
						return
					}
					page(w, r)
				})
				e.seed(s.url("/a"))
				e.runUntil(1, 10*time.Second)
				reqs := s.requests()
				if got := strings.Join(s.paths(), " "); got != "/robots.txt /robots.txt /a" {
					t.Fatalf("requests %s, want robots.txt twice then /a", got)
				}
				if g := reqs[1].Start.Sub(reqs[0].End); g < 2*time.Second-slack {
					t.Errorf("robots.txt retried %v after its %d with Retry-After: 2, want >= 2s", g, code)
				}
				if res := e.pub.one(t, s.url("/a")); res.Status != result.StatusFetched {
					t.Errorf("/a: %s %q, want fetched", res.Status, res.Error)
				}
			})
		})
	}
}

// TestRobotsProtocolErrorNotCached checks the rule fetchRobots documents
// for a robots.txt that fails without a transient cause (here a malformed
// HTTP answer): "allow" for now, but "Not stored", so the next function
// instance reads robots.txt again instead of ignoring it for RobotsTTL.
func TestRobotsProtocolErrorNotCached(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		var mu sync.Mutex
		broken := true
		s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				mu.Lock()
				b := broken
				broken = false
				mu.Unlock()
				if b {
					if c, buf, err := http.NewResponseController(w).Hijack(); err == nil {
						_, _ = buf.WriteString("this is not HTTP\r\n\r\n")
						_ = buf.Flush()
						_ = c.Close()
					}
					return
				}
				_, _ = fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
				return
			}
			page(w, r)
		})
		e.seed(s.url("/a"))
		e.runUntil(1, 10*time.Second)
		if got, err := e.store.Robots(t.Context(), s.host, "http://"+s.host); err != nil || got != nil {
			t.Errorf("stored robots.txt after a malformed answer: %+v (err %v), want none stored", got, err)
		}
		e.seed(s.url("/private/x"))
		e.runUntil(2, 10*time.Second)
		if n := s.count("/robots.txt"); n != 2 {
			t.Errorf("robots.txt requested %d times, want again by the new instance", n)
		}
		if res := e.pub.one(t, s.url("/private/x")); res.Status != result.StatusDenied || s.count("/private/x") != 0 {
			t.Errorf("/private/x: %s (requested %d times), want denied by the now readable robots.txt", res.Status, s.count("/private/x"))
		}
	})
}
