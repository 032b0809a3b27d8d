// Command sim is a discrete-event simulation of one urldownloader
// deployment at scale: 10 and 100 million URLs a day over a million hosts,
// a million URLs to one host, a producer's dump, and a live change of the
// number of virtual shards. It runs on a virtual clock, deterministic from
// its seed, in seconds to a minute, and drives the product's own scheduling
// code where it can (see doc.go for what is the real code and what is a
// model of it).
//
//	make sim                        # every scenario, tables on stdout
//	go run ./infra/sim -write       # and rewrite the page's generated part and plot
//	go run ./infra/sim -only 100M   # scenarios whose name contains 100M
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Scenarios are the runs `make sim` makes, in the page's order.
func Scenarios() []Config {
	base := Defaults()
	var out []Config
	add := func(name string, f func(*Config)) {
		c := base
		c.Name = name
		f(&c)
		out = append(out, c)
	}
	add("10M/day", func(c *Config) {
		c.PerDay, c.Window = 10e6, 20*time.Minute
	})
	add("100M/day, template defaults", func(c *Config) {
		c.PerDay, c.Window = 100e6, 10*time.Minute
	})
	add("100M/day", func(c *Config) {
		c.PerDay, c.Window = 100e6, 10*time.Minute
		c.ShardCount = 16
	})
	add("200M/day (100M at a 2x peak)", func(c *Config) {
		c.PerDay, c.Window = 200e6, 10*time.Minute
		c.ShardCount = 16
	})
	add("200M/day, proposal", func(c *Config) {
		c.PerDay, c.Window = 200e6, 10*time.Minute
		c.ShardCount, c.VirtualShards = 32, 64
	})
	add("1M URLs to one host", func(c *Config) {
		c.SingleHost, c.Burst = true, 1_000_000
		c.URLsPerMessage = 100
		c.MaxTime = 2 * time.Hour
	})
	add("dump of 2M URLs", func(c *Config) {
		c.Burst = 2_000_000
		c.ShardCount = 16
		c.MaxTime = 3 * time.Hour
	})
	add("dump of 2M URLs, proposal", func(c *Config) {
		c.Burst = 2_000_000
		c.ShardCount, c.VirtualShards = 32, 64
		c.IngestMaxConc = 10
		c.MaxTime = 3 * time.Hour
	})
	add("100M/day, 16 -> 64 vshards live", func(c *Config) {
		c.PerDay, c.Window = 100e6, 10*time.Minute
		c.ShardCount = 16
		c.Migrate = &Migration{At: 4 * time.Minute, Overlap: 2 * time.Minute, VirtualShards: 64, ShardCount: 32}
	})
	return out
}

func main() {
	only := flag.String("only", "", "run only scenarios whose name contains this")
	write := flag.Bool("write", false, "rewrite the generated part of docs/benchmarks.md and docs/sim.svg")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	var reps []*Report
	start := time.Now()
	bad := 0
	for _, c := range Scenarios() {
		if *only != "" && !strings.Contains(c.Name, *only) {
			continue
		}
		c.Seed = *seed
		fmt.Fprintf(os.Stderr, "sim: %s ...", c.Name)
		r := New(c).Run()
		fmt.Fprintf(os.Stderr, " %s (%s events)\n", dur(r.WallTime), num(float64(r.Events)))
		if v := r.Check(); len(v) > 0 {
			bad++
			fmt.Fprintf(os.Stderr, "sim: %s: %d invariants broken, first: %s\n", c.Name, len(v), v[0])
		}
		reps = append(reps, r)
	}
	fmt.Println(Table(reps))
	fmt.Println(Details(reps))
	fmt.Fprintf(os.Stderr, "sim: %d scenarios in %s\n", len(reps), dur(time.Since(start)))
	if *write {
		if err := writeDocs(reps, *seed, time.Since(start)); err != nil {
			fmt.Fprintln(os.Stderr, "sim:", err)
			os.Exit(1)
		}
	}
	if bad > 0 {
		os.Exit(1)
	}
}

// repoRoot finds the module root from the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
