package engine_test

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

func withRules(t *testing.T, p params.Params, text string) params.Params {
	t.Helper()
	r, err := params.ParseHostRules(text)
	if err != nil {
		t.Fatal(err)
	}
	p.HostRules = r
	return p
}

func nameOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// TestHostRuleDelay: a host matching a rule is paced by the rule's delay
// instead of FetchDelay, the first matching rule wins, and a host no rule
// matches keeps FetchDelay.
func TestHostRuleDelay(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		slow, other := newSite(t, page), newSite(t, page)
		p := testParams()
		p.RespectRobots = false
		p.FetchDelay = 100 * time.Millisecond
		// The first rule matches slow exactly; the second, a glob matching
		// every host, would give it 0s were it not first.
		p = withRules(t, p, fmt.Sprintf(`[{"match":%q,"delay":"2s"},{"match":"*","delay":"300ms"}]`, nameOf(slow.host)))
		e := newEnv(t, p)
		var urls []string
		for i := range 3 {
			urls = append(urls, slow.url(fmt.Sprintf("/s%d", i)), other.url(fmt.Sprintf("/o%d", i)))
		}
		e.seed(urls...)
		e.runUntil(len(urls), time.Minute)
		for _, tc := range []struct {
			s    *site
			want time.Duration
		}{{slow, 2 * time.Second}, {other, 300 * time.Millisecond}} {
			reqs := tc.s.requests()
			if len(reqs) != 3 {
				t.Fatalf("%s: %d requests, want 3", tc.s.host, len(reqs))
			}
			for i, g := range gaps(reqs) {
				if g < tc.want-slack || g > tc.want+time.Second {
					t.Errorf("%s gap %d = %v, want about %v", tc.s.host, i, g, tc.want)
				}
			}
		}
		for _, u := range urls {
			if res := e.pub.one(t, u); res.Status != result.StatusFetched {
				t.Errorf("%s: %s %q", u, res.Status, res.Error)
			}
		}
	})
}

// TestHostRuleChangeReachesSession: a rule set while a host's session runs
// (as an SSM change reaches the params cache) paces its next rounds.
func TestHostRuleChangeReachesSession(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		s := newSite(t, page)
		p := testParams()
		p.RespectRobots = false
		p.FetchDelay = 100 * time.Millisecond
		e := newEnv(t, p)
		var urls []string
		for i := range 40 {
			urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
		}
		e.seed(urls...)
		changed := false
		e.runUntilSeen(func() bool {
			if !changed && len(s.requests()) >= 5 {
				e.setParams(withRules(t, p, fmt.Sprintf(`[{"match":%q,"delay":"1s"}]`, nameOf(s.host))))
				changed = true
			}
			return len(e.pub.all()) >= len(urls)
		}, 2*time.Minute)
		reqs := s.requests()
		if len(reqs) != len(urls) {
			t.Fatalf("%d requests, want %d", len(reqs), len(urls))
		}
		g := gaps(reqs)
		if first := g[0]; first > 500*time.Millisecond {
			t.Errorf("first gap %v, want FetchDelay's 100ms before the change", first)
		}
		// A round is HeadBatch (10) URLs: within two rounds of the
		// change every gap is the rule's.
		for i, d := range g[25:] {
			if d < time.Second-slack {
				t.Errorf("gap %d after the change = %v, want >= 1s", 25+i, d)
			}
		}
	})
}

// TestHostRuleCrawlDelayRaises: a rule's delay of 0 does not undercut the
// site's own robots.txt Crawl-delay.
func TestHostRuleCrawlDelayRaises(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		s := newSite(t, withRobots(200, "User-agent: *\nCrawl-delay: 1\n", page))
		p := withRules(t, testParams(), fmt.Sprintf(`[{"match":%q,"delay":"0s","connections":8}]`, nameOf(s.host)))
		e := newEnv(t, p)
		urls := []string{s.url("/a"), s.url("/b"), s.url("/c")}
		e.seed(urls...)
		e.runUntil(len(urls), time.Minute)
		reqs := s.requests()
		if len(reqs) != 4 {
			t.Fatalf("requests %v, want robots.txt and 3 pages", s.paths())
		}
		for i, g := range gaps(reqs) {
			if g < time.Second-slack {
				t.Errorf("gap %d = %v, want >= the 1s Crawl-delay", i, g)
			}
		}
	})
}
