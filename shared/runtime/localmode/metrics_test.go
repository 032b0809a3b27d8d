package localmode

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestPipelineMetrics runs a site through local mode with the functions'
// metrics on, reads the EMF lines back (metrics.Parse, which validates
// each against the specification) and checks their counts against what
// the run actually produced: results by status, requests, URLs accepted
// and rejected, robots denials.
func TestPipelineMetrics(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 4, Robots: "User-agent: *\nDisallow: /private\n"})
	var want []string
	for _, h := range site.Hosts() {
		for i := range 5 {
			want = append(want, site.URL(h, i))
		}
		want = append(want, "http://"+h+"/private/x")
	}
	lines := append(jsonLines(want), "ftp://example.com/refused")
	in := writeLines(t, lines)
	dir := t.TempDir()
	outPath := filepath.Join(dir, "out.jsonl")
	var emf metrics.Buffer
	rt := open(t, Options{
		Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(), IngestBatch: 7,
		Params:  map[string]string{"FetchDelay": "50ms"},
		Metrics: metrics.New(&emf, "local", nil, map[string]string{"function": "standalone"}),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := rt.Run(ctx, RunOptions{Input: fileInput(t, in)})
	if err != nil || rep.Stopped || len(rep.Missing) > 0 {
		t.Fatalf("run: %v, stopped %v, %d missing", err, rep.Stopped, len(rep.Missing))
	}

	docs, err := metrics.Parse(bytes.NewReader(emf.Bytes()))
	if err != nil {
		t.Fatalf("EMF output: %v", err)
	}
	sums := map[string]float64{}
	counts := map[string]int{}
	byStatus := map[result.Status]float64{}
	var pending []float64 // URLsPending samples, by shard
	for _, tot := range metrics.Totals(docs) {
		switch {
		case tot.Dim == "":
			sums[tot.Name] = tot.Sum()
			counts[tot.Name] = len(tot.Values)
		case tot.Name == metrics.Results.Name && tot.Dim == metrics.DimStatus:
			byStatus[result.Status(tot.DimValue)] = tot.Sum()
		case tot.Name == metrics.URLsPending.Name && tot.Dim == metrics.DimShard:
			pending = append(pending, tot.Values...)
		}
	}

	t.Logf("sums %v by status %v", sums, byStatus)
	// Results: by status as written to the output, and in all.
	produced := map[result.Status]float64{}
	results := readResults(t, outPath)
	for _, r := range results {
		produced[r.Status]++
	}
	if len(byStatus) != len(produced) {
		t.Errorf("results by status %v, produced %v", byStatus, produced)
	}
	for st, n := range produced {
		if byStatus[st] != n || float64(rep.ByStatus[st]) != n {
			t.Errorf("%s results: metric %v, output %v, report %d", st, byStatus[st], n, rep.ByStatus[st])
		}
	}
	if sums[metrics.Results.Name] != float64(len(results)) {
		t.Errorf("Results %v, want %d", sums[metrics.Results.Name], len(results))
	}
	// Requests: as the site saw them and the report counted them, each
	// with its latency.
	seen := len(site.Requests())
	if sums[metrics.Requests.Name] != float64(seen) || rep.Requests != int64(seen) || counts[metrics.FetchLatency.Name] != seen {
		t.Errorf("Requests %v with %d latencies, report %d, site saw %d", sums[metrics.Requests.Name], counts[metrics.FetchLatency.Name], rep.Requests, seen)
	}
	// The live view ends where the report does.
	if p := rt.Progress(); p.Requests != int64(seen) || p.Results != len(results) || p.Backlog != 0 || p.InFlight != 0 || p.Hosts != 0 {
		t.Errorf("progress at the end %+v, want %d requests, %d results, nothing left", p, seen, len(results))
	}
	hosts := float64(len(site.Hosts()))
	for _, c := range []struct {
		m    metrics.Metric
		want float64
	}{
		{metrics.URLsAccepted, float64(len(want))},
		{metrics.URLsRejected, float64(rep.Input.Rejected)},
		{metrics.RobotsDenials, hosts},
		{metrics.PolitenessWait, -1},
		{metrics.BytesFetched, -1},
	} {
		if got := sums[c.m.Name]; c.want >= 0 && got != c.want || c.want < 0 && counts[c.m.Name] == 0 {
			t.Errorf("%s = %v (%d values), want %v", c.m.Name, got, counts[c.m.Name], c.want)
		}
	}
	if rep.Input.Rejected != 1 {
		t.Errorf("%d lines rejected, want 1", rep.Input.Rejected)
	}
	// Every check run samples its backlog; the last ones find it empty.
	if len(pending) == 0 || pending[len(pending)-1] != 0 {
		t.Errorf("URLsPending samples %v, want some, the last 0", pending)
	}
	if sums[metrics.HostsWorked.Name] < hosts {
		t.Errorf("HostsWorked %v, want at least %v", sums[metrics.HostsWorked.Name], hosts)
	}
}
