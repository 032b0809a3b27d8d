package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// TestHostileTally: the summary shows, per hostile host, its kind, counts
// by status, the time from acceptance (of the chain's first URL, for the
// loop's second host) to its last result, and whether that is the ending
// its kind documents.
func TestHostileTally(t *testing.T) {
	site, err := demosite.StartHostile(demosite.HostileOptions{Pages: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	accepted := time.Now().Add(-30 * time.Second)
	tally := NewHostileTally(site, func(host string) (time.Time, bool) {
		if _, ok := site.ByHost(host); ok && host != site.Host(demosite.LoopB).Host {
			return accepted, true
		}
		return time.Time{}, false
	})
	refused, loopA, loopB := site.Host(demosite.Refused), site.Host(demosite.LoopA), site.Host(demosite.LoopB)
	nx := site.Host(demosite.NXDomain)

	tally.Add(result.Result{ID: "r1", Host: refused.Host, URL: refused.URLs[0], Status: result.StatusDenied, Error: "robots.txt unreachable for 20s: connection refused"})
	// A wrong ending is called out.
	tally.Add(result.Result{ID: "n1", Host: nx.Host, URL: nx.URLs[0], Status: result.StatusFetchError, Error: "no such host", Attempts: 3})
	// A chain across the loop: loop-b's result belongs to loop-a's URL.
	loc := "http://" + loopB.Host + "/loop/0"
	tally.Add(result.Result{ID: "l1", Host: loopA.Host, URL: loopA.URLs[0], Status: result.StatusRedirect, Location: loc})
	tally.Add(result.Result{ID: urlmsg.MakeID("l1", 0, loc), Host: loopB.Host, URL: loc, Status: result.StatusFetchError, Error: "more than 5 redirects"})
	// Results of other hosts are not the tally's.
	tally.Add(result.Result{ID: "h1", Host: "127.0.0.2:8080", URL: "http://127.0.0.2:8080/page/0", Status: result.StatusFetched})

	var out bytes.Buffer
	tally.Print(&out)
	text := out.String()
	lineOf := func(k demosite.Kind) string {
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, " "+string(k)+" ") && strings.Contains(l, site.Host(k).Host) {
				return l
			}
		}
		t.Fatalf("no summary line for %s in:\n%s", k, text)
		return ""
	}
	for _, c := range []struct {
		kind demosite.Kind
		want []string
	}{
		{demosite.Refused, []string{"denied=1", "after 30s", "requests=0", "as expected"}},
		{demosite.NXDomain, []string{"fetch_error=1", "UNEXPECTED (1)", "took 3 attempts, want at most 1"}},
		{demosite.LoopA, []string{"redirect=1", "as expected"}},
		{demosite.LoopB, []string{"fetch_error=1", "after 30s", "as expected"}},
		{demosite.Reset, []string{"no result yet"}},
	} {
		l := lineOf(c.kind)
		for _, w := range c.want {
			if !strings.Contains(l, w) {
				t.Errorf("%s line %q does not contain %q", c.kind, l, w)
			}
		}
	}
	if !strings.Contains(text, "first error: robots.txt unreachable") {
		t.Errorf("summary does not show refused's first error:\n%s", text)
	}
	if strings.Contains(text, "127.0.0.2:8080") {
		t.Errorf("summary lists a healthy host:\n%s", text)
	}
	if n := tally.Unexpected(); n != 1 {
		t.Errorf("unexpected() = %d, want 1", n)
	}

}
