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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log strings.Builder
	res, err := Run(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("smoke run: %v\nlog:\n%s", err, log.String())
	}
	if len(res.Politeness) != 1 || len(res.Cost) != 3 || res.Lambda == nil {
		t.Fatalf("smoke run is missing parts: %d politeness, %d cost, lambda %v", len(res.Politeness), len(res.Cost), res.Lambda != nil)
	}
	p := res.Politeness[0]
	if p.Ours.MinGap < p.Delay {
		t.Errorf("our smallest gap %s is below the delay %s", p.Ours.MinGap, p.Delay)
	}
	for _, c := range res.Cost {
		if tot := c.Usage.Total(); tot.WriteUnits == 0 || tot.Requests == 0 {
			t.Errorf("%s: no DynamoDB usage metered: %+v", c.Name, tot)
		}
	}
	doc, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{beginMarker, endMarker, "steady / (H/d)", "write units / URL", "bootstrap"} {
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

// BenchmarkIngest is the ingest CPU per URL figure: go test -bench Ingest ./infra/bench.
func BenchmarkIngest(b *testing.B) { benchmarkIngest(b) }
