package engine_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// originMap stands in for DNS and the two ports of one host name: a
// request to scheme://name goes to the address to[scheme] (always over
// plain HTTP), and every request is logged with its start and end, so the
// gaps between any two requests to the host can be read, refused ones
// included.
type originMap struct {
	f    engine.Fetcher
	name string
	to   map[string]string // scheme -> ip:port
	log  *originLog
}

type originLog struct {
	mu   sync.Mutex
	reqs []originReq
}

type originReq struct {
	url        string
	start, end time.Time
}

func (m originMap) Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	orig := req.URL
	if u, err := url.Parse(req.URL); err == nil && u.Host == m.name {
		if to, ok := m.to[u.Scheme]; ok {
			u.Scheme, u.Host = "http", to
			req.URL = u.String()
		}
	}
	start := time.Now()
	resp, err := m.f.Fetch(ctx, req)
	m.log.mu.Lock()
	m.log.reqs = append(m.log.reqs, originReq{url: orig, start: start, end: time.Now()})
	m.log.mu.Unlock()
	return resp, err
}

// TestOriginFailureRunsApart is issue 38's case and its mirror, all on one
// host key: http://h/a1..a10 whose origin answers, and https://h URLs
// whose port refuses. The https origin's failure run paces and gives up
// its own URLs only: every http URL is fetched, the https ones end (denied
// for an unreachable robots.txt, else fetch_error) no sooner than
// GiveUpAfter after their origin's first failure, and any two requests to
// the host, of either origin, are still FetchDelay apart.
func TestOriginFailureRunsApart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// robots: RespectRobots; first: the https URLs head the queue
		// (else one, b1, comes after a5).
		robots, first bool
		want          result.Status
	}{
		{name: "issue 38: one https URL after a5, robots.txt", robots: true, want: result.StatusDenied},
		{name: "https URLs first, no robots.txt", first: true, want: result.StatusFetchError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inBothWorlds(t, func(t *testing.T) { originRuns(t, tc.robots, tc.first, tc.want) })
		})
	}
}

func originRuns(t *testing.T, respectRobots, first bool, want result.Status) {
	p := giveUpParams()
	p.MaxAttempts = 100
	p.RespectRobots = respectRobots
	e := newEnv(t, p)
	s := newSite(t, withRobots(404, "", page))
	dead := deadHost(t)
	const name = "h.example"
	log := &originLog{}
	e.wrap = func(f engine.Fetcher) engine.Fetcher {
		return originMap{f: f, name: name, to: map[string]string{"http": s.host, "https": dead}, log: log}
	}
	var urls []string
	if first {
		for i := 1; i <= 3; i++ {
			urls = append(urls, fmt.Sprintf("https://%s/b%d", name, i))
		}
	}
	for i := 1; i <= 10; i++ {
		urls = append(urls, fmt.Sprintf("http://%s/a%d", name, i))
		if i == 5 && !first {
			urls = append(urls, "https://"+name+"/b1")
		}
	}
	e.seed(urls...)
	e.runUntil(len(urls), 30*time.Second)

	for _, u := range urls {
		res := e.pub.one(t, u)
		if strings.HasPrefix(u, "https://") {
			if res.Status != want || !strings.Contains(res.Error, "no usable answer") {
				t.Errorf("%s: %s %q, want %s: its origin gave up", u, res.Status, res.Error, want)
			}
			continue
		}
		if res.Status != result.StatusFetched {
			t.Errorf("%s: %s %q, want fetched: its origin answers", u, res.Status, res.Error)
		}
	}
	log.mu.Lock()
	reqs := append([]originReq(nil), log.reqs...)
	log.mu.Unlock()
	var firstFail, gaveUp time.Time
	for _, r := range reqs {
		if strings.HasPrefix(r.url, "https://") && firstFail.IsZero() {
			firstFail = r.end
		}
	}
	for _, r := range e.pub.all() {
		if strings.HasPrefix(r.URL, "https://") && (gaveUp.IsZero() || r.FetchedAt.Before(gaveUp)) {
			gaveUp = r.FetchedAt
		}
	}
	if firstFail.IsZero() {
		t.Fatalf("the https origin was never asked")
	}
	if d := gaveUp.Sub(firstFail); d < p.GiveUpAfter-slack {
		t.Errorf("https origin given up %v after its first failure, want >= GiveUpAfter %v", d, p.GiveUpAfter)
	}
	for i := 1; i < len(reqs); i++ {
		if g := reqs[i].start.Sub(reqs[i-1].end); g < p.FetchDelay-slack {
			t.Errorf("request %d (%s) started %v after the previous one (%s) ended, want >= FetchDelay %v",
				i, reqs[i].url, g, reqs[i-1].url, p.FetchDelay)
		}
	}
}
