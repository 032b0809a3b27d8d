// Command bench measures the downloader against the limits that matter to
// someone choosing it: politeness efficiency against the physical bound H/d
// and against Colly on the same loopback site, the DynamoDB units and SQS
// requests AWS would bill per URL, and the Lambda functions' sizes and
// start-up. It runs the real engine and the real store on moto (see
// infra/emulated), prints one table and writes it, with the machine's details,
// into docs/benchmarks.md between the generated-section markers.
//
//	make bench                      # the full run, under 10 minutes on 2 cores
//	go run ./infra/bench -smoke     # seconds: tiny sizes, writes nothing
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/zipf"
)

// Config sizes one benchmark run.
type Config struct {
	// Hosts lists the H of the politeness rows on moto, LocalHosts those
	// through local mode (`make run` as a child process), TLSHosts those
	// through local mode over HTTPS; Colly runs beside each.
	Hosts, LocalHosts, TLSHosts []int
	// Rows are the politeness rows' U and d by H (rowShape); PerHost and
	// RowDelay, when set, override them in every row (-u, -d).
	Rows     map[int]RowShape
	PerHost  int
	RowDelay time.Duration
	// Delay is the resume job's d.
	Delay time.Duration
	// Latency is the demo site's fixed response time.
	Latency time.Duration
	// PlotHosts is the H whose run is drawn.
	PlotHosts int

	// The local mode job at scale (ScaleHosts x ScalePerHost URLs at
	// ScaleDelay) and the resume job (ResumeHosts x ResumePerHost at Delay,
	// stopped ResumeStops times).
	ScaleHosts, ScalePerHost                int
	ScaleDelay                              time.Duration
	ResumeHosts, ResumePerHost, ResumeStops int
	SkipScale, SkipResume                   bool
	// The memory rows (MemoryLines lines ending at ingest) and the big
	// site (one host of BigSitePerHost URLs among BigSiteSmallHosts of
	// 20, at BigSiteDelay): bigjob.go.
	MemoryLines                       []int
	BigSitePerHost, BigSiteSmallHosts int
	BigSiteDelay                      time.Duration
	SkipMemory, SkipBigSite           bool
	// The million-URL job (millionjob.go): MillionHosts x MillionPerHost
	// URLs at MillionDelay, bounded by MillionTimeout.
	MillionHosts, MillionPerHost int
	MillionDelay, MillionTimeout time.Duration
	SkipMillion                  bool
	// The server gate row (servergate.go): GateNames names on one address,
	// GatePerHost pages each, ServerDelay GateDelay.
	GateNames, GatePerHost int
	GateDelay              time.Duration
	SkipGate               bool

	// The cost scenarios. ZipfHosts and ZipfTop size the Zipf list
	// (internal/zipf; the simulation's is 10,000 and 1,000). CostShapes,
	// when set, names the scenarios to run (burst, trickle, wide, zipf,
	// place);
	// empty: all.
	TrickleHosts int
	BurstURLs    int
	WideHosts    int
	WidePerHost  int
	ZipfHosts    int
	ZipfTop      int
	// PlaceHosts x PlacePerHost is the list of one host per address the
	// place scenario runs twice: hosts placed by name and by address.
	PlaceHosts, PlacePerHost int
	CostShapes               map[string]bool
	CostDelay                time.Duration
	SkipCost, SkipPol        bool

	// Lambda figures.
	SkipLambda bool
	// The resources scenario (resources.go); TestResourcesSmoke runs it
	// in smoke mode.
	Resources     ResourcesConfig
	SkipResources bool
	// Bodies are the sizes of the whole-bodies runs (bodies.go).
	Bodies     []BodySize
	SkipBodies bool
	// Warc sizes the WARC output runs (warc.go).
	Warc     WarcConfig
	SkipWarc bool
	// LambdaBuild runs `make build` for the arm64 sizes.
	LambdaBuild bool
	BenchTime   time.Duration

	// Params are extra runtime parameters for every pipeline (smoke mode
	// shortens CheckHostPeriod so it ends in seconds).
	Params map[string]string
	// Timeout bounds each pipeline run.
	Timeout time.Duration

	// Out is the markdown file to update; PNG is the plot's path. Empty:
	// write nothing.
	Out, PNG string
	Smoke    bool
	// StockMoto runs moto without the patches that remove its O(queue
	// length) SQS and O(table) Query costs (see internal/moto's patches).
	StockMoto bool
}

// FullConfig is what `make bench` runs (issue 5's sizes).
func FullConfig() Config {
	return Config{
		Hosts: []int{50, 200}, LocalHosts: []int{200, 1000, 5000, 10000}, TLSHosts: []int{1000},
		Rows: map[int]RowShape{
			200: {40, 250 * time.Millisecond}, 1000: {40, 250 * time.Millisecond},
			5000: {20, time.Second}, 10000: {5, time.Second},
		},
		Delay: 250 * time.Millisecond, Latency: 5 * time.Millisecond, PlotHosts: 200,
		ScaleHosts: 1000, ScalePerHost: 100, ScaleDelay: time.Second,
		ResumeHosts: 50, ResumePerHost: 40, ResumeStops: 5,
		MemoryLines: []int{2_000_000}, BigSitePerHost: 3000, BigSiteSmallHosts: 100, BigSiteDelay: 10 * time.Millisecond,
		MillionHosts: 100_000, MillionPerHost: 10, MillionDelay: time.Second, MillionTimeout: 10 * time.Minute,
		GateNames: 40, GatePerHost: 5, GateDelay: 200 * time.Millisecond,
		TrickleHosts: 500, BurstURLs: 1000, WideHosts: 2000, WidePerHost: 5, CostDelay: 250 * time.Millisecond,
		// The Zipf list at a fifth of the simulation's (2,000 hosts, 200
		// URLs at the top, 2,970 URLs): moto, one Python process, took
		// 4.5 minutes for it on a loaded machine, and the whole list has
		// five times the hosts. -zipf-hosts 10000 runs it whole.
		ZipfHosts: zipf.Hosts / 5, ZipfTop: zipf.Top / 5,
		PlaceHosts: 500, PlacePerHost: 5,
		LambdaBuild: true, BenchTime: 2 * time.Second,
		Timeout: 4 * time.Minute,
		Out:     "docs/benchmarks.md", PNG: "docs/benchmarks-h200.png",
		Resources: FullResources(),
		Bodies:    FullBodies(),
		Warc:      FullWarc(),
	}
}

// SmokeConfig is a seconds-long run of every part, for `make test`.
func SmokeConfig() Config {
	return Config{
		Hosts: []int{4}, LocalHosts: []int{4}, TLSHosts: []int{4},
		Rows:  map[int]RowShape{4: {6, 100 * time.Millisecond}},
		Delay: 100 * time.Millisecond, Latency: time.Millisecond, PlotHosts: 4,
		ScaleHosts: 20, ScalePerHost: 5, ScaleDelay: 100 * time.Millisecond,
		ResumeHosts: 4, ResumePerHost: 20, ResumeStops: 2,
		MemoryLines: []int{30000}, BigSitePerHost: 1200, BigSiteSmallHosts: 3, BigSiteDelay: time.Millisecond,
		MillionHosts: 20, MillionPerHost: 10, MillionDelay: 100 * time.Millisecond, MillionTimeout: time.Minute,
		GateNames: 4, GatePerHost: 2, GateDelay: 100 * time.Millisecond,
		TrickleHosts: 4, BurstURLs: 12, WideHosts: 6, WidePerHost: 2, CostDelay: 50 * time.Millisecond,
		ZipfHosts: 10, ZipfTop: 4, PlaceHosts: 6, PlacePerHost: 2,
		BenchTime: 50 * time.Millisecond,
		Params:    map[string]string{"CheckHostPeriod": "1100ms"},
		Timeout:   time.Minute,
		Smoke:     true,
		// TestResourcesSmoke runs the resources scenario's smoke.
		SkipResources: true,
		SkipBodies:    true,
		SkipWarc:      true,
	}
}

func main() {
	smoke := flag.Bool("smoke", false, "a seconds-long run of every part with tiny sizes; writes nothing unless -out is given")
	out := flag.String("out", "", "markdown file to update (default docs/benchmarks.md; none in smoke mode)")
	hosts := flag.String("hosts", "", "comma-separated H values for the politeness rows on moto (default 50,200; when any of -hosts, -local-hosts, -tls-hosts is given, the others default to none)")
	localHosts := flag.String("local-hosts", "", "comma-separated H values for the politeness rows through local mode (default 200,1000,5000,10000; 0: none)")
	tlsHosts := flag.String("tls-hosts", "", "comma-separated H values for the politeness rows through local mode over HTTPS (default 1000; 0: none)")
	perHost := flag.Int("u", 0, "URLs per host in every politeness row (default: the row's: 40 at H<5000, 20 at 5000, 5 at 10000)")
	rowDelay := flag.Duration("d", 0, "fetch delay in every politeness row (default: the row's: 250ms at H<5000, 1s from 5000)")
	only := flag.String("only", "", "run only these parts: politeness,scale,resume,memory,bigsite,million,servergate,cost,lambda,resources,bodies,warc")
	memory20m := flag.Bool("memory-20m", false, "add a 20-million-line row to the memory rows (many minutes)")
	noBuild := flag.Bool("no-build", false, "skip `make build` (bootstrap sizes)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the benchmark process to this file")
	checkMemory := flag.String("check-memory", "", "comma-separated MemorySize values (MB) for the check function's requests-a-second row on the SQLite store, in place of the template's (default 512,1024; 0: the template's alone)")
	costShapes := flag.String("cost-shapes", "", "the cost scenarios to run: burst,trickle,wide,zipf,place,refresh (default all)")
	zipfHosts := flag.Int("zipf-hosts", 0, "hosts of the Zipf cost list, the busiest with a tenth as many URLs (default 2000; 10000 is the simulation's list)")
	stockMoto := flag.Bool("stock-moto", false, "run moto without the patches for its quadratic SQS queues and table-sorting queries (slow: for comparison)")
	var setParams paramFlags
	flag.Var(&setParams, "param", "Name=value: a runtime parameter for every part's runs (repeatable), e.g. -param ServerDelay=0 to measure a row without the server gate")
	flag.Parse()

	cfg := FullConfig()
	if *smoke {
		cfg = SmokeConfig()
	}
	for k, v := range setParams {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[k] = v
	}
	if *out != "" {
		cfg.Out = *out
		cfg.PNG = strings.TrimSuffix(*out, filepath.Ext(*out)) + "-h" + strconv.Itoa(cfg.PlotHosts) + ".png"
	}
	lists := []struct {
		name, val string
		to        *[]int
	}{{"hosts", *hosts, &cfg.Hosts}, {"local-hosts", *localHosts, &cfg.LocalHosts}, {"tls-hosts", *tlsHosts, &cfg.TLSHosts}}
	// Naming some rows' H runs those rows alone: the lists not given are
	// empty then.
	if *hosts != "" || *localHosts != "" || *tlsHosts != "" {
		for _, l := range lists {
			*l.to = nil
		}
	}
	for _, l := range lists {
		if l.val == "" {
			continue
		}
		for _, f := range strings.Split(l.val, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 0 {
				fmt.Fprintf(os.Stderr, "bench: -%s %q: want positive integers (0: none)\n", l.name, l.val)
				os.Exit(2)
			}
			if n > 0 {
				*l.to = append(*l.to, n)
			}
		}
	}
	if *perHost > 0 {
		cfg.PerHost = *perHost
	}
	if *rowDelay > 0 {
		cfg.RowDelay = *rowDelay
	}
	if *only != "" {
		parts := map[string]bool{}
		for _, p := range strings.Split(*only, ",") {
			parts[strings.TrimSpace(p)] = true
		}
		cfg.SkipPol, cfg.SkipCost, cfg.SkipLambda = !parts["politeness"], !parts["cost"], !parts["lambda"]
		cfg.SkipScale, cfg.SkipResume = !parts["scale"], !parts["resume"]
		cfg.SkipMemory, cfg.SkipBigSite = !parts["memory"], !parts["bigsite"]
		cfg.SkipResources = !parts["resources"]
		cfg.SkipBodies = !parts["bodies"]
		cfg.SkipWarc = !parts["warc"]
		cfg.SkipMillion = !parts["million"]
		cfg.SkipGate = !parts["servergate"]
	}
	if *checkMemory != "" {
		cfg.Resources.CheckMemory = nil
		for _, f := range strings.Split(*checkMemory, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			// Lambda's range: 128 MB to 10,240 MB.
			if err != nil || n != 0 && (n < 128 || n > 10240) {
				fmt.Fprintf(os.Stderr, "bench: -check-memory %q: want MemorySize values in MB, 128 to 10240 (0: the template's)\n", *checkMemory)
				os.Exit(2)
			}
			if n > 0 {
				cfg.Resources.CheckMemory = append(cfg.Resources.CheckMemory, n)
			}
		}
	}
	if *costShapes != "" {
		cfg.CostShapes = map[string]bool{}
		for _, p := range strings.Split(*costShapes, ",") {
			p = strings.ToLower(strings.TrimSpace(p))
			if !slices.Contains(costShapeNames, p) {
				fmt.Fprintf(os.Stderr, "bench: -cost-shapes %q: want some of %s\n", *costShapes, strings.Join(costShapeNames, ","))
				os.Exit(2)
			}
			cfg.CostShapes[p] = true
		}
	}
	if *zipfHosts > 0 {
		cfg.ZipfHosts, cfg.ZipfTop = *zipfHosts, max(1, *zipfHosts*zipf.Top/zipf.Hosts)
	}
	if *memory20m {
		cfg.MemoryLines = append(cfg.MemoryLines, 20_000_000)
	}
	if *noBuild {
		cfg.LambdaBuild = false
	}
	cfg.StockMoto = *stockMoto
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: cpu profile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := Run(ctx, cfg, os.Stderr)
	if res != nil {
		fmt.Println(res.Table())
		if len(res.Bodies) > 0 {
			fmt.Println(bodiesTable(res.Bodies))
		}
		if res.Warc != nil {
			fmt.Println(warcTable(res.Warc))
		}
		if len(res.Memory) > 0 || res.BigSite != nil {
			fmt.Println(bigJobsTable(res.Memory, res.BigSite))
		}
		if res.Million != nil {
			fmt.Println(millionTable(res.Million))
		}
		if res.Gate != nil {
			fmt.Println(gateTable(res.Gate))
		}
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// Run performs the benchmark, logging progress to logw, and writes the
// report when cfg.Out is set.
func Run(ctx context.Context, cfg Config, logw io.Writer) (*Results, error) {
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelInfo}))
	start := time.Now()
	root, err := moto.ModuleRoot()
	if err != nil {
		return nil, err
	}
	res := &Results{Config: cfg, Started: start}
	res.Machine = describeMachine(ctx, root)
	srv, err := moto.StartWith(ctx, moto.Options{Stock: cfg.StockMoto})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	env := &benchEnv{cfg: cfg, moto: srv, log: log, root: root, motoPID: srv.PID()}
	defer func() { env.local.Close() }()

	if !cfg.SkipPol {
		for _, row := range politenessRows(cfg) {
			pr, err := env.politeness(ctx, row)
			if err != nil {
				return res, fmt.Errorf("politeness H=%d (https %v): %w", row.Hosts, row.TLS, err)
			}
			res.Politeness = append(res.Politeness, pr)
		}
	}
	if !cfg.SkipCost || !cfg.SkipLambda {
		if err := env.costAndLambda(ctx, res); err != nil {
			return res, err
		}
	} else if err := env.localJobs(ctx, res); err != nil {
		return res, err
	}
	if !cfg.SkipResources {
		if res.Resources, err = env.resources(ctx, cfg.Resources); err != nil {
			return res, fmt.Errorf("resources: %w", err)
		}
	}
	if !cfg.SkipBodies {
		if res.Bodies, err = env.bodies(ctx, cfg.Bodies); err != nil {
			return res, err
		}
		if cfg.Out != "" {
			if err := writeBodies(inRoot(root, cfg.Out), res.Bodies, res.Machine); err != nil {
				return res, err
			}
			log.Info("wrote bodies section", "file", cfg.Out)
		}
	}
	if !cfg.SkipWarc {
		if res.Warc, err = env.warc(ctx, cfg.Warc); err != nil {
			return res, fmt.Errorf("warc: %w", err)
		}
		if cfg.Out != "" {
			if err := writeWarc(inRoot(root, cfg.Out), res.Warc, res.Machine); err != nil {
				return res, err
			}
			log.Info("wrote warc section", "file", cfg.Out)
		}
	}
	if !cfg.SkipMillion {
		if res.Million, err = env.million(ctx); err != nil {
			return res, err
		}
		if cfg.Out != "" {
			if err := writeMillion(inRoot(root, cfg.Out), res.Million, res.Machine); err != nil {
				return res, err
			}
			log.Info("wrote million section", "file", cfg.Out)
		}
	}
	if !cfg.SkipGate {
		if res.Gate, err = env.serverGate(ctx); err != nil {
			return res, err
		}
		if cfg.Out != "" {
			if err := writeGate(inRoot(root, cfg.Out), res.Gate, res.Machine); err != nil {
				return res, err
			}
			log.Info("wrote server gate section", "file", cfg.Out)
		}
	}
	if cfg.Out != "" && (len(res.Memory) > 0 || res.BigSite != nil) {
		if err := writeBigJobs(inRoot(root, cfg.Out), res.Memory, res.BigSite, res.Machine); err != nil {
			return res, err
		}
		log.Info("wrote big jobs section", "file", cfg.Out)
	}
	res.Elapsed = time.Since(start)
	res.Machine.LoadAfter = loadAverage()
	// A run of parts with sections of their own (bodies, the big jobs)
	// leaves the main section as it was.
	onlyOwn := cfg.SkipPol && cfg.SkipCost && cfg.SkipLambda && cfg.SkipScale && cfg.SkipResume && cfg.SkipResources
	if cfg.Out != "" && !onlyOwn {
		if err := res.Write(inRoot(root, cfg.Out), inRoot(root, cfg.PNG)); err != nil {
			return res, err
		}
		log.Info("wrote report", "file", cfg.Out, "plot", cfg.PNG)
	}
	return res, nil
}

// politenessHosts is every H of a politeness run, in order.
func politenessHosts(cfg Config) []int {
	hs := slices.Concat(cfg.Hosts, cfg.LocalHosts)
	slices.Sort(hs)
	return slices.Compact(hs)
}

// inRoot resolves a relative path against the module root.
func inRoot(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// paramFlags collects -param Name=value flags.
type paramFlags map[string]string

func (p *paramFlags) String() string { return fmt.Sprint(map[string]string(*p)) }

func (p *paramFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("-param %q: want Name=value", s)
	}
	if *p == nil {
		*p = paramFlags{}
	}
	(*p)[k] = v
	return nil
}
