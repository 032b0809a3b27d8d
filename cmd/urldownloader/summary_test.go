package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// TestAdviceLines: each kind of failure gets a line with how many, an
// example and what to change, the most frequent first; the parameters'
// values in force are named.
func TestAdviceLines(t *testing.T) {
	p := params.Defaults()
	p.FetchTimeout = 3 * time.Second
	o := newOutcomes(func(h string) string { return h }, p)
	add := func(n int, r result.Result) {
		for range n {
			o.add(r)
		}
	}
	add(12, result.Result{Host: "127.0.0.2:8080", URL: "http://127.0.0.2:8080/a", Status: result.StatusDenied,
		Error: "check address: address 127.0.0.2 is loopback and private networks are not allowed"})
	add(3, result.Result{Host: "slow.test", URL: "http://slow.test/x", Status: result.StatusFetchError,
		Error: "get http://slow.test/x: read body: no complete answer within 3s: context deadline exceeded"})
	add(2, result.Result{Host: "a.test", URL: "http://a.test/gone", Status: result.StatusFetchError, HTTPStatus: 404, Error: "HTTP 404"})
	add(1, result.Result{Host: "b.test", URL: "http://b.test/p", Status: result.StatusDenied, Error: `disallowed by robots.txt for "urldownloader"`})
	add(1, result.Result{Host: "c.test", URL: "http://c.test/p", Status: result.StatusDropped,
		Error: "evicted: the host's queue exceeded PersistLimit (1000)"})
	add(1, result.Result{Host: "d.test", URL: "http://d.test/p", Status: result.StatusFetchError,
		Error: "host gave no usable answer for 1h (9 attempts); last: connection refused"})
	for i := range 5 {
		o.add(result.Result{Host: "e.test", URL: fmt.Sprintf("http://e.test/p%d", i), Status: result.StatusFetched})
	}
	// A denial that names its remedy points at cli.AddressDenials' list.
	named := newOutcomes(func(h string) string { return h }, p)
	named.add(result.Result{Host: "10.1.2.3", URL: "http://10.1.2.3/", Status: result.StatusDenied,
		Error: "get http://10.1.2.3/: check address: address 10.1.2.3 is private: not allowed (local mode: --allow-net 10.0.0.0/8 or --allow-private)"})
	named.add(result.Result{Host: "1.2.3.4:8080", URL: "http://1.2.3.4:8080/", Status: result.StatusDenied,
		Error: "get http://1.2.3.4:8080/: check address: port 8080 of 1.2.3.4 is not allowed (allowed ports: 80,443)"})
	portLine := named.adviceLines()
	if len(portLine) != 2 || !strings.Contains(strings.Join(portLine, "\n"), "1 denied: port not in AllowedPorts (e.g. http://1.2.3.4:8080/: get http://1.2.3.4:8080/: check address: port 8080 of 1.2.3.4 is not allowed (allowed ports: 80,443)): add the port to --param AllowedPorts=80,443,PORT") {
		t.Errorf("a port denial: %q", portLine)
	}
	named = newOutcomes(func(h string) string { return h }, p)
	named.add(result.Result{Host: "10.1.2.3", URL: "http://10.1.2.3/", Status: result.StatusDenied,
		Error: "get http://10.1.2.3/: check address: address 10.1.2.3 is private: not allowed (local mode: --allow-net 10.0.0.0/8 or --allow-private)"})
	if l := named.adviceLines(); len(l) != 1 || !strings.HasSuffix(l[0], "): the flags that would allow them follow") {
		t.Errorf("a denial naming its remedy: %q", l)
	}

	lines := o.adviceLines()
	want := []string{
		"12 denied by the address policy (e.g. http://127.0.0.2:8080/a: check address: address 127.0.0.2 is loopback and private networks are not allowed): add --allow-net CIDR or --allow-private",
		"3 timed out (e.g. http://slow.test/x: ",
		"): raise --param FetchTimeout (now 3s)",
		"2 answered HTTP 404 (e.g. http://a.test/gone: HTTP 404)",
		"1 disallowed by the site's robots.txt (not a failure) (e.g. http://b.test/p: ",
		"1 dropped: the host's queue exceeded PersistLimit (e.g. http://c.test/p: evicted: the host's queue exceeded PersistLimit (1000)): raise --param PersistLimit (now 1000)",
		"1 given up: the host gave no usable answer for GiveUpAfter (e.g. http://d.test/p: host gave no usable answer for 1h (9 attempts); last: connection refused): these urls have ended, so the same command will not ask again: to try them later, list them in a new job (another --state and --out), or raise --param GiveUpAfter (now 1h)",
	}
	all := strings.Join(lines, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("advice lacks %q:\n%s", w, all)
		}
	}
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "12 ") || !strings.HasPrefix(lines[1], "3 ") {
		t.Errorf("want 6 lines, most frequent first:\n%s", all)
	}
	for _, l := range lines {
		if strings.Contains(l, "robots.txt (not a failure)") && !strings.HasSuffix(l, `for "urldownloader")`) {
			t.Errorf("robots.txt's word is final, there is nothing to change: %s", l)
		}
	}
	// Every failure but the one robots.txt forbids counts for the exit code.
	if got := o.failed(); got != 12+3+2+1+1 {
		t.Errorf("failed() = %d, want 19 (robots.txt's denial is not a failure)", got)
	}

	// The summary: counts by status, elapsed against the bound (denied
	// and dropped URLs cost their host no delay), the advice.
	var out bytes.Buffer
	rep := localmode.Report{Expected: 25, ByStatus: map[result.Status]int{result.StatusDenied: 13, result.StatusFetchError: 6,
		result.StatusDropped: 1, result.StatusFetched: 5}, Elapsed: 6 * time.Second}
	delay := func(k string) time.Duration {
		if k == "e.test" {
			return 1200 * time.Millisecond
		}
		return time.Second
	}
	printLocalSummary(&out, rep, o, delay, nil, false)
	for _, w := range []string{"done: 25 of 25 urls have a result, in 6s; politeness bound 6s (e.test: 5 urls × 1.2s Crawl-delay)",
		"by status: denied 13, fetch_error 6, fetched 5, dropped 1", "12 denied by the address policy"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("summary lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "checkInvocations") {
		t.Errorf("summary shows internal counters without -v:\n%s", out.String())
	}
}
