package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs every part of the benchmark at tiny sizes (the -smoke
// mode), so `make test` keeps `make bench` working.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto and the lambda emulator")
	}
	cfg := SmokeConfig()
	dir := t.TempDir()
	cfg.Out = filepath.Join(dir, "benchmarks.md")
	cfg.PNG = filepath.Join(dir, "plot.png")
	// Only bounds a hang: the smoke run takes about 20 s alone and a few
	// times that beside the rest of make test; its binaries are built
	// before (TestMain).
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var log strings.Builder
	res, err := Run(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("smoke run: %v\nlog:\n%s", err, log.String())
	}
	if len(res.Politeness) != 2 || len(res.Cost) != 4 || res.Lambda == nil || res.Scale == nil || res.Resume == nil {
		t.Fatalf("smoke run is missing parts: %d politeness, %d cost, lambda %v, scale %v, resume %v",
			len(res.Politeness), len(res.Cost), res.Lambda != nil, res.Scale != nil, res.Resume != nil)
	}
	if len(res.Politeness) != 2 || res.Politeness[0].TLS || !res.Politeness[1].TLS {
		t.Fatalf("smoke run: want an HTTP and an HTTPS politeness row, got %d rows", len(res.Politeness))
	}
	p := res.Politeness[0]
	if p.Moto == nil || p.Local == nil {
		t.Fatalf("smoke politeness run lacks a system: moto %v, local mode %v", p.Moto != nil, p.Local != nil)
	}
	for _, s := range []RunStats{*p.Moto, *p.Local} {
		if s.MinGap < p.Delay || s.GapsBelow != 0 {
			t.Errorf("%s: smallest gap %s, %d gaps below the delay %s", s.System, s.MinGap, s.GapsBelow, p.Delay)
		}
		// robots.txt fetched once per host and obeyed.
		if s.Robots != p.Hosts || s.DisallowedRequested != 0 || s.Denied != p.Hosts {
			t.Errorf("%s: %d robots.txt requests, %d disallowed requested, %d denied; want %d, 0, %d", s.System, s.Robots, s.DisallowedRequested, s.Denied, p.Hosts, p.Hosts)
		}
	}
	if pr := p.Local.Process; pr == nil || pr.MaxRSS == 0 || p.Local.StateBytes == 0 {
		t.Errorf("local mode run: process %+v, state %d bytes; want its peak RSS and state size", pr, p.Local.StateBytes)
	}
	// The new columns: every system's connections counted by the site
	// (each host at least one), the kernel's counters read (at least the
	// system's own connects), local mode's and Colly's processes measured,
	// and on HTTPS each host's full handshakes.
	for _, row := range res.Politeness {
		systems := []RunStats{*row.Local, row.Colly}
		if row.Moto != nil {
			systems = append(systems, *row.Moto)
		}
		for _, s := range systems {
			if s.ConnsPerHost < 1 || s.Kernel.ActiveOpens < int64(row.Hosts) {
				t.Errorf("H=%s, %s: %.2f new connections per host, %d active opens; want at least 1 and %d", row.rowLabel(), s.System, s.ConnsPerHost, s.Kernel.ActiveOpens, row.Hosts)
			}
			if s.System == "colly" || s.Process != nil {
				if c, ok := row.cpuPerKURL(s); !ok || c <= 0 || s.Process.MaxRSS == 0 || s.Process.BenchFDs == 0 {
					t.Errorf("H=%s, %s: CPU per 1,000 URLs %v (%v), process %+v; want CPU, peak memory and descriptors", row.rowLabel(), s.System, c, ok, s.Process)
				}
			}
			if row.TLS && s.FullTLS < 1 {
				t.Errorf("H=%s, %s: %.2f full TLS handshakes per host, want at least 1", row.rowLabel(), s.System, s.FullTLS)
			}
			if !row.TLS && s.FullTLS != 0 {
				t.Errorf("H=%s, %s: TLS handshakes on HTTP", row.rowLabel(), s.System)
			}
		}
		if row.Colly.Results["fetched"] != row.Hosts*row.PerHost {
			t.Errorf("H=%s: Colly fetched %v, want %d", row.rowLabel(), row.Colly.Results, row.Hosts*row.PerHost)
		}
	}
	// The efficiency plot needs a row whose hosts were all busy at once,
	// which a loaded machine may not give at this size (TestEfficiencyPlot
	// draws one on figures of its own).
	if len(efficiencySeries(res.Politeness)) > 0 {
		if st, err := os.Stat(efficiencyPNG(cfg.Out)); err != nil || st.Size() == 0 {
			t.Errorf("no efficiency plot: %v", err)
		}
	}
	if sc := res.Scale; sc.Stats.Requests != sc.Hosts*(sc.PerHost+1) || sc.Stats.Process.MaxRSS == 0 {
		t.Errorf("scale run: %d requests, want %d; peak RSS %d", sc.Stats.Requests, sc.Hosts*(sc.PerHost+1), sc.Stats.Process.MaxRSS)
	}
	if rr := res.Resume; len(rr.Outcome.Missing) > 0 || rr.Refetches > rr.RefetchLimit() || len(rr.Exits) < 2 || rr.Exits[0] == 0 {
		t.Errorf("resume: %d runs (exits %v), %d urls without a result, %d re-fetches (limit %d)", len(rr.Exits), rr.Exits, len(rr.Outcome.Missing), rr.Refetches, rr.RefetchLimit())
	}
	if len(res.Memory) != 1 || res.Memory[0].MaxRSS == 0 || res.Memory[0].Results != res.Memory[0].Lines {
		t.Errorf("memory rows: %+v, want one with its peak RSS and a result per line", res.Memory)
	}
	if b := res.BigSite; b == nil || b.Dropped != 0 || b.Span < b.Bound || b.Stats.MinGap < b.Delay {
		t.Errorf("big site: %+v, want nothing dropped, the big host's span at least its bound, gaps at least d", b)
	}
	if m := res.Million; m == nil || !m.Finished || m.Outcome.ByStatus["fetched"] != m.URLs || m.DNSNames != m.Hosts || m.Site.BelowGap != 0 || m.Site.Overlaps != 0 || m.Process.MaxRSS == 0 {
		t.Errorf("million job (smoke size): %+v, want every URL fetched, each name looked up, no gap below d", m)
	}
	// The Zipf list's row first (the page's first cost line), every row
	// priced on demand and provisioned (cheaper for the same units).
	if res.Cost[0].Name != "Zipf" || res.Cost[0].URLs != zipfSmokeURLs {
		t.Errorf("first cost row %s of %d URLs, want Zipf of %d", res.Cost[0].Name, res.Cost[0].URLs, zipfSmokeURLs)
	}
	for _, c := range res.Cost {
		if tot := c.Usage.Total(); tot.WriteUnits == 0 || tot.Requests == 0 {
			t.Errorf("%s: no DynamoDB usage metered: %+v", c.Name, tot)
		}
		if od, pr := c.PerMillion(), c.PerMillionProvisioned(); pr <= 0 || pr >= od {
			t.Errorf("%s: $%.2f a million on demand, $%.2f provisioned; want provisioned cheaper and above zero", c.Name, od, pr)
		}
	}
	doc, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{beginMarker, endMarker, "steady / (H/d)", "local mode", "new connections / host", "SYN retransmissions", "CPU s / 1,000 URLs", "4 (HTTPS)", "Issue 21's targets", "wall / bound", "re-fetches", "write units / URL", "provisioned at 70% use", "bootstrap"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if st, err := os.Stat(cfg.PNG); err != nil || st.Size() == 0 {
		t.Errorf("no plot: %v", err)
	}
	// A second write keeps the text around the generated section.
	if err := os.WriteFile(cfg.Out, []byte("intro\n"+string(doc)+"\nanalysis\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := res.Write(cfg.Out, cfg.PNG); err != nil {
		t.Fatal(err)
	}
	doc2, _ := os.ReadFile(cfg.Out)
	if !strings.HasPrefix(string(doc2), "intro\n") || !strings.HasSuffix(string(doc2), "\nanalysis\n") || strings.Count(string(doc2), beginMarker) != 1 {
		t.Errorf("rewrite lost the hand-written text around the generated section")
	}
}

// zipfSmokeURLs is the smoke Zipf list's size: 10 hosts, host r with
// max(1, round(4/r)) URLs: 4, 2, 1, 1, 1, 1, 1, 1, 1, 1.
const zipfSmokeURLs = 14

// BenchmarkIngest is the ingest CPU per URL figure: go test -bench Ingest ./infra/bench.
func BenchmarkIngest(b *testing.B) { benchmarkIngest(b) }
