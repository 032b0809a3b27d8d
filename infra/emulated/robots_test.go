package emulated_test

import (
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestRobotsEndToEnd runs the whole pipeline against a site whose
// robots.txt disallows one path and asks for Crawl-delay: 1. From the
// server's side: the disallowed path is never requested and no two
// requests to a host are closer than one second, although FetchDelay is
// much shorter.
func TestRobotsEndToEnd(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 2, Robots: "User-agent: *\nDisallow: /page/1\nCrawl-delay: 1\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: map[string]string{"FetchDelay": "100ms", "CheckHostPeriod": "2s"}})
	rep, got := runAll(t, p, inputs(site.URLs(3)), 2*time.Minute)
	if rep.ByStatus[result.StatusDenied] != 2 || rep.ByStatus[result.StatusFetched] != 4 {
		t.Errorf("results %v, want 4 fetched and 2 denied (page 1 of each host)", rep.ByStatus)
	}
	for _, r := range got {
		denied := strings.HasSuffix(r.URL, "/page/1")
		if denied != (r.Status == result.StatusDenied) {
			t.Errorf("%s: %s, want denied only for /page/1", r.URL, r.Status)
		}
		if denied && !strings.Contains(r.Error, "robots.txt") {
			t.Errorf("%s: denied without naming robots.txt: %q", r.URL, r.Error)
		}
	}
	for _, rq := range site.Requests() {
		if rq.Path == "/page/1" {
			t.Errorf("the disallowed path was requested on %s", rq.Host)
		}
	}
	if gap, host := demosite.MinGap(site.Requests()); gap < time.Second {
		t.Errorf("requests to %s only %s apart, want >= 1s (Crawl-delay)", host, gap)
	}
}
