package engine_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/robots"
)

// rawSite is a hostile server: it reads each request with the standard
// parser and writes answer(request) as raw bytes, whatever they are, then
// closes the connection. Requests are logged on the site's clock like
// newSite's, so gaps and paths apply. It listens on the test's in-memory
// network in virtual, else on a loopback address of its own.
func rawSite(t *testing.T, answer func(r *http.Request) string) *site {
	t.Helper()
	ip := loopbackIP()
	var ln net.Listener
	if n := networkOf(t); n != nil {
		ln = n.Listen(ip)
	} else {
		var err error
		if ln, err = net.Listen("tcp", ip+":0"); err != nil {
			t.Fatalf("listen on %s: %v", ip, err)
		}
	}
	s := &site{host: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	serve := func(c net.Conn) {
		defer wg.Done()
		defer c.Close()
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		start := time.Now()
		_, _ = c.Write([]byte(answer(r)))
		s.mu.Lock()
		s.reqs = append(s.reqs, demosite.Request{Host: s.host, Path: r.URL.RequestURI(), Start: start, End: time.Now()})
		s.hdrs = append(s.hdrs, r.Header.Clone())
		s.mu.Unlock()
		mu.Lock()
		delete(open, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open[c] = true
			mu.Unlock()
			wg.Add(1)
			go serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

// rawAnswer is a whole HTTP/1.1 answer with a Content-Length.
func rawAnswer(status string, header, body string) string {
	return fmt.Sprintf("HTTP/1.1 %s\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", status, header, len(body), body)
}

// padTo returns comment lines that bring a robots.txt of n octets to want.
func padTo(n, want int) string {
	var b strings.Builder
	for n+b.Len() < want {
		line := "#" + strings.Repeat("-", min(78, want-n-b.Len()-2)) + "\n"
		b.WriteString(line)
	}
	return b.String()
}

// TestRobotsCutAtTheCap serves robots.txt files longer than robots.MaxBytes
// whose cap falls inside a rule: the cut rule must not count. Cut to
// "Allow: /" the first would allow the disallowed /secret; cut to
// "Disallow: /" the second would deny the allowed /open.
func TestRobotsCutAtTheCap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, head, cut string
		fetch, deny     string
	}{
		{"allow cut to allow all", "User-agent: *\nDisallow: /\n", "Allow: /public/\n", "", "/secret"},
		{"disallow cut to deny all", "User-agent: *\nDisallow: /secret\n", "Disallow: /private/\n", "/open", "/secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				// The cap falls after "Allow: /" (or "Disallow: /").
				keep := strings.Index(tc.cut, "/") + 1
				text := tc.head + padTo(len(tc.head), robots.MaxBytes-keep) + tc.cut
				text += strings.Repeat("# more of the file\n", 100)
				if text[robots.MaxBytes-1] != '/' || text[robots.MaxBytes-keep-1] != '\n' {
					t.Fatalf("the cap does not fall after the rule's first /")
				}
				s := rawSite(t, func(r *http.Request) string {
					if r.URL.Path == "/robots.txt" {
						return rawAnswer("200 OK", "Content-Type: text/plain\r\n", text)
					}
					return rawAnswer("200 OK", "", "page "+r.URL.Path+"\n")
				})
				e := newEnv(t, testParams())
				urls := []string{s.url(tc.deny)}
				if tc.fetch != "" {
					urls = append(urls, s.url(tc.fetch))
				}
				e.seed(urls...)
				e.runUntil(len(urls), 10*time.Second)
				if res := e.pub.one(t, s.url(tc.deny)); res.Status != result.StatusDenied || s.count(tc.deny) != 0 {
					t.Errorf("%s: %s %q, requested %d times; want denied by the rules before the cap", tc.deny, res.Status, res.Error, s.count(tc.deny))
				}
				if tc.fetch != "" {
					if res := e.pub.one(t, s.url(tc.fetch)); res.Status != result.StatusFetched {
						t.Errorf("%s: %s %q; want fetched: the cut rule must not deny it", tc.fetch, res.Status, res.Error)
					}
				}
			})
		})
	}
}

// TestRetryAfterNowIsNoRetryAfter serves 429 to every page, with
// "Retry-After: 0", with a date in 1970, and without the header: the
// first two must be spaced at the server exactly like the third (growing
// back-off, the host's delay raised), where they used to come back every
// FetchDelay until each URL had spent its attempts.
func TestRetryAfterNowIsNoRetryAfter(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, header string) []time.Duration {
		var out []time.Duration
		virtual(t, func(t *testing.T) {
			p := testParams()
			p.RespectRobots = false
			e := newEnv(t, p)
			s := rawSite(t, func(r *http.Request) string {
				return rawAnswer("429 Too Many Requests", header, "slow down\n")
			})
			var urls []string
			for i := range 4 {
				urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
			}
			e.seed(urls...)
			e.runUntil(len(urls), 30*time.Minute)
			for _, u := range urls {
				if res := e.pub.one(t, u); res.Status == result.StatusFetched {
					t.Errorf("%s fetched, want it to end refused", u)
				}
			}
			out = gaps(s.requests())
		})
		return out
	}
	without := run(t, "")
	t.Logf("gaps without Retry-After: %v", without)
	if len(without) < 4 || without[3] <= without[0] {
		t.Fatalf("gaps without Retry-After %v, want a back-off that grows", without)
	}
	for _, header := range []string{"Retry-After: 0\r\n", "Retry-After: Thu, 01 Jan 1970 00:00:00 GMT\r\n"} {
		got := run(t, header)
		if len(got) != len(without) {
			t.Errorf("%q: %d requests, want %d as without Retry-After; gaps %v", header, len(got)+1, len(without)+1, got)
			continue
		}
		for i := range got {
			if d := got[i] - without[i]; d < -slack || d > slack {
				t.Errorf("%q: gaps %v, want those without Retry-After %v", header, got, without)
				break
			}
		}
	}
}

// TestCrawlDelayOverTheCap serves Crawl-delays past a day, infinite and
// overflowing ones included, with MaxCrawlDelay at its largest (a day):
// each is over the cap, so the URLs end denied at once as for any
// Crawl-delay over it, and the message quotes the value asked. A day was
// the clamp before: 1e9 and 86401 held each URL a day, inf and 1e400 were
// dropped and the host fetched at FetchDelay.
func TestCrawlDelayOverTheCap(t *testing.T) {
	t.Parallel()
	for _, asked := range []string{"1e9", "86401", "inf", "1e400"} {
		t.Run(asked, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.MaxCrawlDelay = 24 * time.Hour
				s := rawSite(t, func(r *http.Request) string {
					if r.URL.Path == "/robots.txt" {
						return rawAnswer("200 OK", "Content-Type: text/plain\r\n", "User-agent: *\nCrawl-delay: "+asked+"\n")
					}
					return rawAnswer("200 OK", "", "page\n")
				})
				e := newEnv(t, p)
				urls := []string{s.url("/p0"), s.url("/p1")}
				e.seed(urls...)
				e.runUntil(len(urls), 10*time.Second)
				if got := s.paths(); len(got) != 1 || got[0] != "/robots.txt" {
					t.Errorf("requests %v, want robots.txt only", got)
				}
				for _, u := range urls {
					res := e.pub.one(t, u)
					if res.Status != result.StatusDenied || !strings.Contains(res.Error, "Crawl-delay: "+asked+" ") || !strings.Contains(res.Error, "above MaxCrawlDelay 24h0m0s") {
						t.Errorf("%s: %s %q, want denied quoting Crawl-delay: %s above MaxCrawlDelay 24h0m0s", u, res.Status, res.Error, asked)
					}
				}
			})
		})
	}
}
