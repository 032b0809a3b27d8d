package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/standalone"
	"github.com/urldownloader/urldownloader/shared/metrics"
)

func TestProgressLine(t *testing.T) {
	p := standalone.Progress{Expected: 100, Results: 25, Backlog: 75, Requests: 40, Hosts: 7}
	// The ETA is the politeness bound of the hosts left: 40 URLs 1 s apart
	// on the slowest, whatever the pace so far.
	eta, _ := standalone.Bound([]standalone.HostLoad{
		{Key: "a.test", URLs: 35, Delay: time.Second},
		{Key: "b.test", URLs: 10, Delay: 4 * time.Second}, // a Crawl-delay
	})
	got := progressLine(p, 30, 2*time.Second, eta, true)
	want := "localrun: 25/100 urls  5.0 req/s  7 hosts active  backlog 75  ETA 40s"
	if got != want {
		t.Errorf("progress line\n got %q\nwant %q", got, want)
	}
	if got := progressLine(p, 30, 2*time.Second, 0, false); !strings.HasSuffix(got, "ETA -") {
		t.Errorf("bound not known yet: %q, want ETA -", got)
	}
	done := standalone.Progress{Expected: 100, Results: 100}
	if got := progressLine(done, 30, 2*time.Second, 0, true); !strings.HasSuffix(got, "ETA 0s") {
		t.Errorf("nothing left: %q, want ETA 0s", got)
	}
}

func TestPrintMetrics(t *testing.T) {
	var emf metrics.Buffer
	rec := metrics.New(&emf, "local", nil, nil)
	rec.AddBy(metrics.Results, metrics.DimStatus, "fetched", 3)
	rec.Add(metrics.Requests, 4)
	rec.AddDuration(metrics.FetchLatency, 20*time.Millisecond)
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printMetrics(&out, emf.Bytes(), false); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"Results  -", "Results  Status=fetched  3", "Requests  -", "n=1 p50=20.0"} {
		if !strings.Contains(strings.Join(strings.Fields(out.String()), "  "), strings.Join(strings.Fields(row), "  ")) {
			t.Errorf("table lacks %q:\n%s", row, out.String())
		}
	}
}
