package main

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

func TestProgressLine(t *testing.T) {
	p := localmode.Progress{Expected: 100, Results: 25, Backlog: 75, Requests: 40, Hosts: 7}
	// The ETA is the politeness bound of the hosts left: 40 URLs 1 s apart
	// on the slowest, whatever the pace so far.
	eta, _ := localmode.Bound([]localmode.HostLoad{
		{Key: "a.test", URLs: 35, Delay: time.Second},
		{Key: "b.test", URLs: 10, Delay: 4 * time.Second}, // a Crawl-delay
	})
	got := progressLine(p, 30, 2*time.Second, eta, true)
	want := "urldownloader: 25/100 urls  5.0 req/s  7 hosts active  backlog 75  ETA 40s"
	if got != want {
		t.Errorf("progress line\n got %q\nwant %q", got, want)
	}
	if got := progressLine(p, 30, 2*time.Second, 0, false); !strings.HasSuffix(got, "ETA -") {
		t.Errorf("bound not known yet: %q, want ETA -", got)
	}
	// Hosts waiting on a server's gate are named with its address.
	p.Servers = []server.Waiting{
		{Addr: netip.MustParseAddr("127.0.0.2"), Hosts: 12, Delay: 200 * time.Millisecond},
		{Addr: netip.MustParseAddr("127.0.0.3"), Hosts: 1, Delay: 250 * time.Millisecond},
		{Addr: netip.MustParseAddr("127.0.0.4"), Hosts: 1, Delay: 250 * time.Millisecond},
	}
	if got := progressLine(p, 30, 2*time.Second, eta, true); !strings.HasSuffix(got, "ETA 40s  12 hosts waiting on 127.0.0.2 (ServerDelay 200ms), 1 host waiting on 127.0.0.3 (ServerDelay 250ms), 1 more address") {
		t.Errorf("progress line with server waits: %q", got)
	}
	p.Servers = nil
	done := localmode.Progress{Expected: 100, Results: 100}
	if got := progressLine(done, 30, 2*time.Second, 0, true); !strings.HasSuffix(got, "ETA 0s") {
		t.Errorf("nothing left: %q, want ETA 0s", got)
	}
}

func TestProgressLineShowsRefreshes(t *testing.T) {
	p := localmode.Progress{Expected: 3, Results: 3, Refreshing: 3, NextRefresh: time.Now().Add(90*time.Second + 400*time.Millisecond)}
	got := progressLine(p, 0, 2*time.Second, 0, true)
	if !strings.Contains(got, "refreshing 3, next due in 1m30s") {
		t.Errorf("progress line %q, want the refreshing URLs and when the next is due", got)
	}
	if strings.Contains(got, "lag") {
		t.Errorf("progress line %q shows a lag under a second", got)
	}
	p.NextRefresh = time.Now().Add(-time.Minute)
	p.RefreshLag = 42*time.Second + 300*time.Millisecond
	if got := progressLine(p, 0, 2*time.Second, 0, true); !strings.Contains(got, "next due now, lag 42s") {
		t.Errorf("progress line %q, want a late refresh due now and the latest refetch's lag", got)
	}
}

func TestPrintMetrics(t *testing.T) {
	var emf metrics.Buffer
	rec := metrics.New(&emf, "local", nil, nil)
	rec.AddBy(metrics.Results, metrics.DimStatus, "fetched", 3)
	rec.Add(metrics.Requests, 4)
	rec.AddDuration(metrics.FetchLatency, 20*time.Millisecond)
	// An idle shard's backlog and a counter that never moved: rows of 0.
	rec.AddBy(metrics.URLsPending, metrics.DimShard, "3", 0)
	rec.Add(metrics.LeaseTakeovers, 0)
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printMetrics(&out, emf.Bytes(), false); err != nil {
		t.Fatal(err)
	}
	for _, zero := range []string{"URLsPending", "LeaseTakeovers"} {
		if strings.Contains(out.String(), zero) {
			t.Errorf("table shows the zero row %s without -v:\n%s", zero, out.String())
		}
	}
	var all bytes.Buffer
	if err := printMetrics(&all, emf.Bytes(), true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(all.String(), "URLsPending") || !strings.Contains(all.String(), "LeaseTakeovers") {
		t.Errorf("with -v the table lacks the zero rows:\n%s", all.String())
	}
	for _, row := range []string{"Results  -", "Results  Status=fetched  3", "Requests  -", "n=1 p50=20.0"} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), "  "), strings.Join(strings.Fields(row), "  ")) {
			t.Errorf("table lacks %q:\n%s", row, out.String())
		}
	}
}

type fakeSource struct{ left []localmode.HostLoad }

func (f fakeSource) Progress() localmode.Progress {
	return localmode.Progress{Expected: 12, Results: 2, Backlog: 10, Hosts: 1}
}

func (f fakeSource) HostsLeft(context.Context) ([]localmode.HostLoad, error) { return f.left, nil }

// lockedBuffer is written by the progress goroutine and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProgressNotATerminal: when stderr is not a terminal the progress
// comes as whole lines every logEvery (no carriage returns or escape
// codes), its ETA the politeness bound of the hosts left.
func TestProgressNotATerminal(t *testing.T) {
	defer func(d time.Duration) { logEvery = d }(logEvery)
	logEvery = 20 * time.Millisecond
	var out lockedBuffer
	stop := startProgress(&out, fakeSource{left: []localmode.HostLoad{{Key: "slow.test", URLs: 10, Delay: 4 * time.Second}}}, false)
	deadline := time.Now().Add(30 * time.Second) // bounds a hang only
	for strings.Count(out.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	got := out.String()
	if strings.Count(got, "\n") < 2 || strings.ContainsAny(got, "\r\033") {
		t.Fatalf("want whole lines, got %q", got)
	}
	first, _, _ := strings.Cut(got, "\n")
	if !strings.Contains(first, "2/12 urls") || !strings.Contains(first, "ETA 40s") || !strings.Contains(first, "elapsed ") {
		t.Errorf("progress line %q: want 2/12 urls, ETA 40s (10 urls × 4 s) and the elapsed time", first)
	}
}

// countingSource makes 10 more requests every time it is asked.
type countingSource struct {
	fakeSource
	reqs atomic.Int64
}

func (c *countingSource) Progress() localmode.Progress {
	p := c.fakeSource.Progress()
	p.Requests = c.reqs.Add(10)
	return p
}

// TestProgressFirstLineRate: the first line a log gets, logEvery after the
// start, shows the requests made since the start, not "0.0 req/s" (a
// resumed job's first line said 0.0 req/s after 192 urls in 10 s).
func TestProgressFirstLineRate(t *testing.T) {
	defer func(d time.Duration) { logEvery = d }(logEvery)
	logEvery = 20 * time.Millisecond
	var out lockedBuffer
	stop := startProgress(&out, &countingSource{}, false)
	deadline := time.Now().Add(30 * time.Second) // bounds a hang only
	for !strings.Contains(out.String(), "\n") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	first, _, _ := strings.Cut(out.String(), "\n")
	if first == "" || strings.Contains(first, " 0.0 req/s") {
		t.Errorf("first progress line %q: want the rate since the start", first)
	}
}

// TestRateWindow: the rate always has a sample rateSpan old or older to
// measure from, whether lines come every second (a terminal) or every
// logEvery (a log), and never keeps more than it needs.
func TestRateWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, every := range []time.Duration{time.Second, logEvery} {
		var w []sample
		for i := 0; i < 30; i++ {
			now := t0.Add(time.Duration(i) * every)
			w = rateWindow(append(w, sample{now, int64(i) * 100}), now)
			if i == 0 {
				continue
			}
			span := now.Sub(w[0].at)
			if span < min(rateSpan, time.Duration(i)*every) {
				t.Fatalf("every %v, line %d: the rate spans %v, want at least %v", every, i, span, min(rateSpan, time.Duration(i)*every))
			}
			if len(w) > 2 && now.Sub(w[1].at) >= rateSpan {
				t.Fatalf("every %v, line %d: keeps %d samples, the second already %v old", every, i, len(w), now.Sub(w[1].at))
			}
			if got := progressLine(localmode.Progress{Requests: int64(i) * 100}, w[0].reqs, span, 0, false); strings.Contains(got, " 0.0 req/s") {
				t.Fatalf("every %v, line %d: %q shows no rate at 100 requests a line", every, i, got)
			}
		}
	}
}
