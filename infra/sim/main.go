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
//	go run ./infra/sim -cost        # the cost shapes, layouts and capacity modes (cost.go)
//	go run ./infra/sim -gate        # one gate per server address: the designs compared (gate.go)
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/shared/domain/params"
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
	// recommended is the configuration the README names for 100 million
	// URLs a day, with today's code: 16 check shards whose function has
	// 1,024 MB (the process Budget then allows 338 host workers, so
	// MaxConcurrentHosts, 256, binds: 4,096 in all; at 512 MB it is 155);
	// ingest's concurrency at 5, so a dump on the input queue cannot write
	// the due index near its keys' limit (5 invocations x 16 lanes x ~100
	// appends/s over 16 shards of 4 keys = 125 units/s a key, had every
	// append a bucket add; the template's 10 twice that); the table and
	// its index warmed for the first minutes' bursts (a new on-demand
	// table serves 4,000 writes and 12,000 reads a second at once).
	recommended := func(c *Config) {
		// Results' bodies gzip-compressed: web pages come out at 0.30 of
		// their size (config.go, gzipTextRatio), so the output queue
		// bills fewer 64 KB chunks; the CPU it costs slows each check
		// invocation (invocationRPS).
		c.P.ResultBodyEncoding = params.BodyGzip
		c.ShardCount = 16
		c.CheckMemoryMB = 1024
		c.IngestMaxConc = 5
		c.WarmWrite, c.WarmRead = 10000, 20000
	}
	// improved adds the engine changes the page proposes: a starved run
	// dispatches again within 200 ms instead of a second, and a host whose
	// next request is more than 15 s away goes back to the index instead
	// of sleeping in its worker slot.
	improved := func(c *Config) {
		recommended(c)
		c.StarvedTick = 200 * time.Millisecond
		c.ReleaseOnWait = 15 * time.Second
		c.WarmWrite, c.WarmRead = 20000, 40000
	}
	add("10M/day", func(c *Config) {
		c.PerDay, c.Window = 10e6, 15*time.Minute
	})
	add("100M/day, template defaults", func(c *Config) {
		c.PerDay, c.Window = 100e6, 8*time.Minute
	})
	add("100M/day", func(c *Config) {
		c.PerDay, c.Window = 100e6, 8*time.Minute
		recommended(c)
	})
	// The 100M/day day's peak hour, at three times its mean rate, for
	// as long as the 100M/day runs (DynamoDB's, Parameter Store's and
	// Lambda's limits in force: dynamo.go, ssm.go, lambda.go).
	add("100M/day, peak hour (3x the mean)", func(c *Config) {
		c.PerDay, c.Window = 300e6, 8*time.Minute
		recommended(c)
	})
	// A new account: Lambda's concurrency quota far below the default
	// 1,000 (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html:
	// new accounts get reduced quotas), here 10, under the 16 check shards
	// the recommended deployment runs at once.
	add("100M/day, new account (Lambda concurrency 10)", func(c *Config) {
		c.PerDay, c.Window = 100e6, 8*time.Minute
		recommended(c)
		c.AccountConc = 10
	})
	add("300M/day", func(c *Config) {
		c.PerDay, c.Window = 300e6, 4*time.Minute
		recommended(c)
	})
	add("300M/day, engine changes", func(c *Config) {
		c.PerDay, c.Window = 300e6, 4*time.Minute
		improved(c)
	})
	add("300M/day, engine changes, 64 virtual shards", func(c *Config) {
		c.PerDay, c.Window = 300e6, 4*time.Minute
		improved(c)
		c.VirtualShards, c.ShardCount, c.WakeMaxConc = 64, 32, 32
		c.IngestMaxConc = 20
	})
	add("1M URLs to one host", func(c *Config) {
		c.SingleHost, c.Burst = true, 1_000_000
		c.URLsPerMessage = 100
		c.MaxTime = 2 * time.Hour
	})
	add("dump of 500k URLs, ingest unbounded", func(c *Config) {
		c.Burst = 500_000
		recommended(c)
		c.IngestMaxConc = 1000
	})
	add("dump of 500k URLs", func(c *Config) {
		c.Burst = 500_000
		recommended(c)
	})
	add("100M/day, 16 -> 64 vshards live", func(c *Config) {
		c.PerDay, c.Window = 100e6, 8*time.Minute
		recommended(c)
		c.WakeMaxConc = 32
		c.Migrate = &Migration{At: 3 * time.Minute, Overlap: 2 * time.Minute, VirtualShards: 64, ShardCount: 32}
	})
	return out
}

func main() {
	only := flag.String("only", "", "run only scenarios whose name contains this")
	write := flag.Bool("write", false, "rewrite the generated part of docs/benchmarks.md and docs/sim-scale.png")
	seed := flag.Uint64("seed", 1, "random seed")
	parallel := flag.Int("parallel", 2, "scenarios run at once")
	accountConc := flag.Int("account-concurrency", 0, "the account's Lambda concurrency in every scenario (0: each scenario's, 1,000 unless it says)")
	gate := flag.Bool("gate", false, "compare the designs of one gate per server address on AWS (gate.go) instead of the scenarios")
	cost := flag.Bool("cost", false, "price the cost shapes (burst, wide, trickle, Zipf) under each due-index layout, and the capacity modes over a day, instead of the scenarios")
	refreshReport := flag.Bool("refresh", false, "price keeping a million URLs refreshed hourly (refresh.go) instead of the scenarios")
	flag.Parse()
	if templateErr != nil {
		fmt.Fprintln(os.Stderr, "sim: template.yaml:", templateErr, "(built-in settings used)")
	}
	// The runs allocate millions of small events; collecting less often
	// halves their time.
	debug.SetGCPercent(400)
	start := time.Now()
	if *gate {
		if err := gateMain(*seed, *parallel); err != nil {
			fmt.Fprintln(os.Stderr, "sim:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "sim: gate runs in %s\n", dur(time.Since(start)))
		return
	}
	if *refreshReport {
		var cs []RefreshCost
		for _, m := range RefreshModels() {
			cs = append(cs, PriceRefresh(m))
		}
		fmt.Println(RefreshTable(cs))
		return
	}
	if *cost {
		if err := costMain(*only, *seed, *parallel); err != nil {
			fmt.Fprintln(os.Stderr, "sim:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "sim: cost runs in %s\n", dur(time.Since(start)))
		return
	}
	var cfgs []Config
	for _, c := range Scenarios() {
		if *only == "" || strings.Contains(c.Name, *only) {
			c.Seed = *seed
			if *accountConc > 0 {
				c.AccountConc = *accountConc
			}
			cfgs = append(cfgs, c)
		}
	}
	reps, bad := runAll(cfgs, *parallel)
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

// runAll runs the configurations, parallel at a time (each is
// single-threaded and deterministic), and reports on stderr the runs that
// broke an invariant; bad counts them.
func runAll(cfgs []Config, parallel int) (reps []*Report, bad int) {
	reps = make([]*Report, len(cfgs))
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for i, c := range cfgs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			reps[i] = New(c).Run()
			fmt.Fprintf(os.Stderr, "sim: %s: %s (%s events)\n", c.Name, dur(reps[i].WallTime), num(float64(reps[i].Events)))
		})
	}
	wg.Wait()
	for _, r := range reps {
		if v := r.Check(); len(v) > 0 {
			bad++
			fmt.Fprintf(os.Stderr, "sim: %s: %d invariants broken, first: %s\n", r.Name, len(v), v[0])
		}
	}
	return reps, bad
}

// repoRoot finds the product module's root (go.mod beside template.yaml)
// from the working directory.
func repoRoot() (string, error) { return proc.ModuleRoot() }
