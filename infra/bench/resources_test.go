package main

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/moto"
)

// TestResourcesSmoke runs the resources scenario at tiny sizes, so `make
// test` keeps `make bench -only resources` working: both functions run in
// children of their own with the template's memory and Lambda's descriptor
// limit, and meet the targets.
func TestResourcesSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto and two function processes")
	}
	// Only bounds a hang (the scenario takes about 20 s alone).
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	srv, err := moto.StartWith(ctx, moto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	root, err := moto.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	e := &benchEnv{cfg: SmokeConfig(), moto: srv, root: root, log: slog.New(slog.NewTextHandler(&log, nil))}
	rc := SmokeResources()
	res, err := e.resources(ctx, rc)
	if err != nil {
		t.Fatalf("resources: %v\nlog:\n%s", err, log.String())
	}
	t.Logf("\n%s", res.Table())
	if m := res.Misses(); len(m) > 0 {
		t.Errorf("targets missed: %v", m)
	}
	if res.Fetched != res.SlowURLs {
		t.Errorf("%d of %d slow URLs fetched, want all: %v", res.Fetched, res.SlowURLs, res.ByStatus)
	}
	c := res.Check
	if c.Budget.Memory == 0 || c.Workers == 0 || c.GOMEMLIMIT <= 0 || c.GOMEMLIMIT >= int64(res.CheckMemoryMiB)<<20 {
		t.Errorf("check ran without the function's budget or memory limit: %+v", c)
	}
	if hosts := rc.SlowHosts + rc.HangHosts; c.PeakWorkers != min(hosts, c.Workers) {
		t.Errorf("check worked %d hosts at once, want %d", c.PeakWorkers, min(hosts, c.Workers))
	}
	if c.BaseFDs <= 0 || c.PeakFDs < c.BaseFDs+c.PeakWorkers {
		t.Errorf("descriptors: %d wired, %d peak with %d workers: the sampler missed the connections", c.BaseFDs, c.PeakFDs, c.PeakWorkers)
	}
	if len(res.Rate) != len(rc.Rate)+len(rc.CheckMemory)-1 {
		t.Errorf("%d requests-per-second rows, want %d", len(res.Rate), len(rc.Rate)+len(rc.CheckMemory)-1)
	}
	// The SQLite row ran at each -check-memory size, not the template's:
	// the child had that MemorySize, its budget and GOMEMLIMIT follow it,
	// and the memory table prices each.
	var sizes []int
	for _, r := range res.Rate {
		if r.Config.SQLite {
			sizes = append(sizes, r.Check.MemoryMiB)
			if r.GBSecondsPerKURL() <= 0 || r.Cores() <= 0 {
				t.Errorf("rate row at %d MB: %.3f GB-s per 1,000 URLs, %.2f cores", r.Check.MemoryMiB, r.GBSecondsPerKURL(), r.Cores())
			}
		}
	}
	if !slices.Equal(sizes, rc.CheckMemory) {
		t.Errorf("SQLite rate rows at %v MB, want %v", sizes, rc.CheckMemory)
	} else if a, b := res.Rate[0].Check, res.Rate[1].Check; b.Workers <= a.Workers || b.GOMEMLIMIT <= a.GOMEMLIMIT || b.Budget.Memory <= a.Budget.Memory {
		t.Errorf("at %d MB %d workers, GOMEMLIMIT %d; at %d MB %d, %d: want more at the larger size", a.MemoryMiB, a.Workers, a.GOMEMLIMIT, b.MemoryMiB, b.Workers, b.GOMEMLIMIT)
	}
	if tab := res.Table(); !strings.Contains(tab, "| 1024 MB |") || !strings.Contains(tab, "billed GB-s per 1,000 URLs") {
		t.Errorf("resources table lacks the memory table:\n%s", tab)
	}
	for _, r := range res.Rate {
		// Every host was asked, robots.txt once each, and the row's
		// figure is a rate. The run is a fixed window: on a loaded machine
		// (moto's calls taking a second each) it may end before the farm's
		// last pages, so the pages are bounded, not counted.
		want := r.Config.Hosts * (r.Config.PerHost + 1)
		if r.Site.Hosts != r.Config.Hosts || r.Site.Requests > want || r.Site.Requests < 2*r.Config.Hosts || r.Site.Robots != r.Config.Hosts {
			t.Errorf("rate row, %s: the farm saw %+v, want %d hosts, between %d and %d requests", r.Config.store(), r.Site, r.Config.Hosts, 2*r.Config.Hosts, want)
		}
		if r.RPS() <= 0 || r.Check.PeakWorkers == 0 || r.ConnsPerHost() < 1 || r.Check.CPU <= 0 {
			t.Errorf("rate row, %s: %.1f requests/s, %d workers peak, %.2f connections a host, CPU %s", r.Config.store(), r.RPS(), r.Check.PeakWorkers, r.ConnsPerHost(), r.Check.CPU)
		}
	}
	in := res.Ingest
	if in.Records != rc.IngestRecords || in.URLs != rc.IngestHosts || in.Appended == 0 {
		t.Errorf("ingest: %d records, %d urls, %d appended; want %d, %d and some", in.Records, in.URLs, in.Appended, rc.IngestRecords, rc.IngestHosts)
	}
}
