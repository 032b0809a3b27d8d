package engine_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// redirects serves a map of path -> Location (301); other paths get a page.
func redirects(hops map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if to, ok := hops[r.URL.Path]; ok {
			if to == "" {
				w.WriteHeader(http.StatusFound) // no Location at all
				return
			}
			w.Header().Set("Location", to)
			w.WriteHeader(http.StatusMovedPermanently)
			return
		}
		page(w, r)
	}
}

// TestSameHostRedirects checks redirects within a host: followed up to 5
// hops, each hop a request paced like any other, robots.txt applied to every
// hop, and loops, long chains and bad targets ending as fetch_error.
func TestSameHostRedirects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hops map[string]string
		// wantPaths is what the server must see after robots.txt.
		wantPaths  []string
		wantStatus result.Status
		wantErr    string
		wantData   string
	}{
		{
			name:       "chain of 3",
			hops:       map[string]string{"/start": "/r1", "/r1": "/r2", "/r2": "/final"},
			wantPaths:  []string{"/start", "/r1", "/r2", "/final"},
			wantStatus: result.StatusFetched, wantData: "page /final\n",
		},
		{
			name:       "relative and absolute locations",
			hops:       map[string]string{"/start": "r1", "/r1": "HOST/final"},
			wantPaths:  []string{"/start", "/r1", "/final"},
			wantStatus: result.StatusFetched, wantData: "page /final\n",
		},
		{
			name:       "exactly 5 hops",
			hops:       map[string]string{"/start": "/h1", "/h1": "/h2", "/h2": "/h3", "/h3": "/h4", "/h4": "/final"},
			wantPaths:  []string{"/start", "/h1", "/h2", "/h3", "/h4", "/final"},
			wantStatus: result.StatusFetched, wantData: "page /final\n",
		},
		{
			name:       "6 hops",
			hops:       map[string]string{"/start": "/h1", "/h1": "/h2", "/h2": "/h3", "/h3": "/h4", "/h4": "/h5", "/h5": "/final"},
			wantPaths:  []string{"/start", "/h1", "/h2", "/h3", "/h4", "/h5"},
			wantStatus: result.StatusFetchError, wantErr: "more than 5 redirects",
		},
		{
			name:       "loop",
			hops:       map[string]string{"/start": "/l1", "/l1": "/l2", "/l2": "/l1"},
			wantPaths:  []string{"/start", "/l1", "/l2"},
			wantStatus: result.StatusFetchError, wantErr: "redirect loop",
		},
		{
			name:       "to itself",
			hops:       map[string]string{"/start": "/start"},
			wantPaths:  []string{"/start"},
			wantStatus: result.StatusFetchError, wantErr: "redirect loop",
		},
		{
			name:       "no Location",
			hops:       map[string]string{"/start": ""},
			wantPaths:  []string{"/start"},
			wantStatus: result.StatusFetchError, wantErr: "Location",
		},
		{
			name:       "to a non-http scheme",
			hops:       map[string]string{"/start": "ftp://example.com/file"},
			wantPaths:  []string{"/start"},
			wantStatus: result.StatusFetchError, wantErr: "unacceptable url",
		},
		{
			name:       "into a disallowed path",
			hops:       map[string]string{"/start": "/secret/x"},
			wantPaths:  []string{"/start"},
			wantStatus: result.StatusDenied, wantErr: "robots.txt",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				e := newEnv(t, p)
				var s *site
				hops := map[string]string{}
				s = newSite(t, withRobots(200, "User-agent: *\nDisallow: /secret/\n", func(w http.ResponseWriter, r *http.Request) {
					redirects(hops)(w, r)
				}))
				for from, to := range tc.hops {
					hops[from] = strings.ReplaceAll(to, "HOST", "http://"+s.host)
				}
				start := s.url("/start")
				e.seed(start)
				e.runUntil(1, 10*time.Second)

				got := s.paths()
				if len(got) == 0 || got[0] != "/robots.txt" || strings.Join(got[1:], " ") != strings.Join(tc.wantPaths, " ") {
					t.Fatalf("requests %v, want robots.txt then %v", got, tc.wantPaths)
				}
				res := e.pub.one(t, start)
				if res.Status != tc.wantStatus || !strings.Contains(res.Error, tc.wantErr) || res.Data != tc.wantData {
					t.Errorf("result %s err=%q data=%q, want %s err~%q data=%q", res.Status, res.Error, res.Data, tc.wantStatus, tc.wantErr, tc.wantData)
				}
				if res.Status == result.StatusDenied && res.Location != s.url("/secret/x") {
					t.Errorf("denied hop location %q, want the disallowed target", res.Location)
				}
				for i, g := range gaps(s.requests()) {
					if g < p.FetchDelay-slack {
						t.Errorf("hop %d came %v after the previous answer, want >= FetchDelay %v", i, g, p.FetchDelay)
					}
				}
			})
		})
	}
}

// TestCrossHostRedirect checks that a redirect to another host is not
// followed inline: the result is "redirect" with the location, and the
// target is queued on its own host (when FollowCrossHostRedirects is on),
// which then comes due like any host that becomes active and is fetched
// under that host's own robots.txt and delay.
func TestCrossHostRedirect(t *testing.T) {
	t.Parallel()
	for _, follow := range []bool{true, false} {
		name := map[bool]string{true: "follow", false: "do not follow"}[follow]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.FollowCrossHostRedirects = follow
				e := newEnv(t, p)
				target := newSite(t, withRobots(200, "User-agent: *\nDisallow: /no\n", page))
				src := newSite(t, withRobots(404, "", redirects(map[string]string{
					"/go": target.url("/landing?q=1"),
					"/no": target.url("/no/x"),
				})))
				ids := e.seed(src.url("/go"), src.url("/no"))
				if !follow {
					e.runUntil(2, 10*time.Second)
					if got := target.paths(); len(got) != 0 {
						t.Errorf("target host requested although FollowCrossHostRedirects is off: %v", got)
					}
					if h := e.load(target.host); h != nil {
						t.Errorf("target host queued although FollowCrossHostRedirects is off: %+v", h)
					}
				} else {
					e.runUntil(4, 15*time.Second)
				}
				res := e.pub.one(t, src.url("/go"))
				if res.Status != result.StatusRedirect || res.Location != target.url("/landing?q=1") || res.HTTPStatus != http.StatusMovedPermanently || res.Error != "" {
					t.Errorf("result %s http=%d location=%q err=%q, want redirect to the target", res.Status, res.HTTPStatus, res.Location, res.Error)
				}
				if !follow {
					return
				}
				if got := strings.Join(target.paths(), " "); got != "/robots.txt /landing?q=1" {
					t.Errorf("target requests %s, want its robots.txt then /landing?q=1 (never /no/x)", got)
				}
				for i, g := range gaps(target.requests()) {
					if g < p.FetchDelay-slack {
						t.Errorf("target request %d came %v after the previous answer, want >= FetchDelay %v", i+1, g, p.FetchDelay)
					}
				}
				wantID := urlmsg.MakeID(ids[src.url("/go")], 0, target.url("/landing?q=1"))
				if res := e.pub.one(t, target.url("/landing?q=1")); res.Status != result.StatusFetched || res.ID != wantID {
					t.Errorf("target: %s id=%s, want fetched with id %s", res.Status, res.ID, wantID)
				}
				if res := e.pub.one(t, target.url("/no/x")); res.Status != result.StatusDenied {
					t.Errorf("disallowed target: %s, want denied by the target's robots.txt", res.Status)
				}
			})
		})
	}
}

// TestRedirectLoopAcrossHosts checks that the hop count travels with a
// cross-host redirect target: a chain A -> B -> A -> ... ends at its sixth
// hop in all as fetch_error, although no single host sees more than three.
func TestRedirectLoopAcrossHosts(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		var a, b *site
		a = newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, b.url("/x"), http.StatusFound)
		}))
		b = newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, a.url("/x"), http.StatusFound)
		}))
		e.seed(a.url("/x"))
		e.runUntil(6, 30*time.Second)
		// A seventh request would come within a check period, if at all.
		e.runUntilSeen(func() bool { return len(e.pub.all()) > 6 }, 2*p.CheckHostPeriod)

		rs := e.pub.all()
		if len(rs) != 6 {
			t.Fatalf("%d results, want 6 (five redirects, then the sixth hop refused):%s", len(rs), describe(rs))
		}
		redirects := 0
		for _, r := range rs {
			switch {
			case r.Status == result.StatusRedirect:
				redirects++
			case r.Status == result.StatusFetchError && strings.Contains(r.Error, "more than 5 redirects"):
				if r.URL != b.url("/x") {
					t.Errorf("the sixth hop was refused for %s, want B's URL (A, B, A, B, A, B)", r.URL)
				}
			default:
				t.Errorf("unexpected result %s %s %q", r.URL, r.Status, r.Error)
			}
		}
		if redirects != 5 {
			t.Errorf("%d redirect results, want 5:%s", redirects, describe(rs))
		}
		if na, nb := a.count("/x"), b.count("/x"); na != 3 || nb != 3 {
			t.Errorf("A requested %d times and B %d, want 3 each", na, nb)
		}
	})
}
