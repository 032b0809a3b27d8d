package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/nginxtest"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestNginxRateLimit: Debian's nginx with limit_req at 1 request/s (no
// burst, so it answers 429 to any request less than a second after the
// last one it served), fetched with FetchDelay 500ms, refuses at most 2
// requests of the host: the first 429 raises its delay for good. Real
// time and a real server; the bounds only stop a hang.
func TestNginxRateLimit(t *testing.T) {
	t.Parallel()
	ng := nginxtest.Start(t,
		"limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s;",
		`location / { limit_req zone=one; limit_req_status 429; root {{root}}; try_files /page.txt =404; }`)
	p := testParams()
	p.FetchDelay = 500 * time.Millisecond
	p.RespectRobots = false
	e := newEnv(t, p)
	var urls []string
	for i := range 8 {
		urls = append(urls, fmt.Sprintf("http://%s/p%d", ng.Addr, i))
	}
	e.seed(urls...)
	e.runUntil(len(urls), 2*time.Minute)
	for _, u := range urls {
		if res := e.pub.one(t, u); res.Status != result.StatusFetched {
			t.Errorf("%s: %s %q, want fetched", u, res.Status, res.Error)
		}
	}
	log := ng.Statuses(t)
	refused := 0
	for _, l := range log {
		if strings.HasSuffix(l, " 429") {
			refused++
		}
	}
	t.Logf("nginx saw %d requests, %d refused: %v", len(log), refused, log)
	if h := e.load(ng.Addr); h != nil {
		t.Logf("host delay learned %v", h.RateDelay)
	}
	if refused > 2 {
		t.Errorf("nginx refused %d requests, want at most 2", refused)
	}
}
