package localmode

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestPipeline runs a loopback site through local mode: every URL ends in
// one result with the right page, robots.txt is fetched once per host and
// obeyed, no two requests to a host come closer than FetchDelay, bad lines
// are refused and reported, and the run ends by itself.
func TestPipeline(t *testing.T) {
	t.Parallel()
	const delay = 150 * time.Millisecond
	site := startSite(t, demosite.Options{Hosts: 6, Robots: "User-agent: *\nDisallow: /private\n"})
	var lines []string
	var want []string
	for _, h := range site.Hosts() {
		for i := range 6 {
			want = append(want, site.URL(h, i))
		}
		want = append(want, "http://"+h+"/private/secret")
	}
	lines = append(lines, jsonLines(want[:20])...)
	// Bare URLs, comments, blank lines and an invalid line mix in.
	lines = append(lines, "# a comment", "", want[20], "ftp://example.com/x", "{not json")
	lines = append(lines, jsonLines(want[21:])...)
	in := writeLines(t, lines)

	dir := t.TempDir()
	outPath := filepath.Join(dir, "out.jsonl")
	var rejected []Rejected
	rt := open(t, Options{
		State: filepath.Join(dir, "state.db"), Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": delay.String()}, IngestBatch: 10,
		OnReject: func(r Rejected) { rejected = append(rejected, r) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped || len(rep.Missing) > 0 {
		t.Fatalf("run stopped=%v with %d missing", rep.Stopped, len(rep.Missing))
	}

	// Results: one per accepted URL, the right body, private pages denied.
	results := readResults(t, outPath)
	if len(results) != len(want) {
		t.Errorf("%d results, want %d", len(results), len(want))
	}
	byURL := map[string]result.Result{}
	for _, r := range results {
		if _, dup := byURL[r.URL]; dup {
			t.Errorf("two results for %s", r.URL)
		}
		byURL[r.URL] = r
	}
	for _, u := range want {
		r, ok := byURL[u]
		switch {
		case !ok:
			t.Errorf("no result for %s", u)
		case strings.Contains(u, "/private"):
			if r.Status != result.StatusDenied || !strings.Contains(r.Error, "robots.txt") {
				t.Errorf("%s: status %s (%s), want denied by robots.txt", u, r.Status, r.Error)
			}
		case r.Status != result.StatusFetched || r.Data != demosite.Body(hostOfURL(u), pathOfURL(u)):
			t.Errorf("%s: status %s body %q, want fetched %q", u, r.Status, r.Data, demosite.Body(hostOfURL(u), pathOfURL(u)))
		}
	}

	// The server's side: robots.txt once per host, never a private path,
	// every page once, the delay kept.
	reqs := site.Requests()
	for _, h := range site.Hosts() {
		n := count(reqs, func(r demosite.Request) bool { return r.Host == h && r.Path == "/robots.txt" })
		if n != 1 {
			t.Errorf("host %s: robots.txt requested %d times, want 1", h, n)
		}
	}
	if n := count(reqs, func(r demosite.Request) bool { return strings.HasPrefix(r.Path, "/private") }); n > 0 {
		t.Errorf("%d requests to disallowed paths", n)
	}
	if pages := len(want) - len(site.Hosts()); len(reqs) != pages+len(site.Hosts()) {
		t.Errorf("site saw %d requests, want %d pages and %d robots.txt", len(reqs), pages, len(site.Hosts()))
	}
	checkPolite(t, reqs, delay)

	// The two bad lines are refused, by line number, and counted.
	if len(rejected) != 2 || rejected[0].Line != 24 || rejected[1].Line != 25 {
		t.Errorf("rejected %+v, want lines 24 and 25", rejected)
	}
	if rep.Input.Rejected != 2 || rep.Input.URLs != int64(len(want)) || !rep.Input.EOF {
		t.Errorf("input report %+v, want %d urls, 2 rejected, EOF", rep.Input, len(want))
	}
	if rep.Expected != len(want) || rep.ByStatus[result.StatusFetched] != len(want)-len(site.Hosts()) || rep.Requests != int64(len(reqs)) {
		t.Errorf("report %+v does not match %d urls and %d requests", rep, len(want), len(reqs))
	}
	// Ids derive from the input's name and line, so a later run computes
	// the same ones.
	if r := byURL[want[0]]; r.ID != urlmsg.MakeID(in+":1", 0, want[0]) {
		t.Errorf("id of line 1 is %s, want it derived from %s:1", r.ID, in)
	}
}

// TestRunEmptyInput ends at once when there is nothing to do.
func TestRunEmptyInput(t *testing.T) {
	rt := open(t, Options{Out: openOut(t, filepath.Join(t.TempDir(), "out"))})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := rt.Run(ctx, RunOptions{Input: &Input{Name: "empty", R: strings.NewReader("\n# nothing\n")}})
	if err != nil || rep.Stopped || rep.Expected != 0 || !rep.Input.EOF {
		t.Fatalf("Run = %+v, %v; want a finished run with nothing expected", rep, err)
	}
}

// TestOpenRefusesBadParameters: --param values are validated as SSM's are,
// and a FetchTimeout no run could use is refused.
func TestOpenRefusesBadParameters(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]string
		run    time.Duration
		want   string
	}{
		{"unknown", map[string]string{"FetchDelai": "1s"}, 0, "FetchDelai"},
		{"invalid", map[string]string{"FetchDelay": "soon"}, 0, "FetchDelay"},
		{"rule", map[string]string{"FetchDelay": "20m"}, 0, "MaxBackoff"},
		{"timeout beyond the run", map[string]string{"FetchTimeout": "30s"}, 5 * time.Second, "FetchTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := Open(context.Background(), Options{Params: tc.params, CheckRun: tc.run, Log: testLog(t)})
			if err == nil {
				rt.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}

// TestDeadHostEnds: URLs of a host that refuses connections end (robots.txt
// unreachable: denied) once GiveUpAfter has passed, beside a healthy host
// fetched as usual, and the run then ends by itself. The give-up reads a
// host's whole queue at once.
func TestDeadHostEnds(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	urls := []string{site.URL(site.Hosts()[0], 0), site.URL(site.Hosts()[0], 1), "http://" + dead + "/a", "http://" + dead + "/b"}
	outPath := filepath.Join(t.TempDir(), "out.jsonl")
	rt := open(t, Options{
		Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": "100ms", "GiveUpAfter": "3s", "MaxBackoff": "1s", "CheckHostPeriod": "1500ms"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := rt.Run(ctx, RunOptions{Input: &Input{Name: "t", R: strings.NewReader(strings.Join(urls, "\n"))}})
	if err != nil || rep.Stopped || len(rep.Missing) > 0 {
		t.Fatalf("Run = %+v, %v; want every url ended", rep, err)
	}
	got := map[string]result.Status{}
	for _, r := range readResults(t, outPath) {
		got[r.URL] = r.Status
	}
	want := map[string]result.Status{urls[0]: result.StatusFetched, urls[1]: result.StatusFetched, urls[2]: result.StatusDenied, urls[3]: result.StatusDenied}
	for u, s := range want {
		if got[u] != s {
			t.Errorf("%s ended %q, want %q", u, got[u], s)
		}
	}
}
