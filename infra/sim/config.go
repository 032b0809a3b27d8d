package main

import (
	"math"
	"time"

	"github.com/urldownloader/urldownloader/shared/aws/wake"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
	"github.com/urldownloader/urldownloader/shared/runtime/wiring"
)

// Config is one simulated deployment and its traffic. Durations are in
// simulated time.
type Config struct {
	Name string
	Seed uint64

	// Traffic.
	Hosts int // host population (1 million)
	// ZipfS is the exponent of the host weights w(r) = r^-s (rank r from
	// 1); HeadCap caps a host's share of a day's URLs, and HeadCapPerDay
	// its URLs a day (see workload.go).
	ZipfS         float64
	HeadCap       float64
	HeadCapPerDay float64
	// PerDay is the arrival rate, as URLs a day; the producer sends at that
	// rate for Window. Burst, when set, is a number of URLs that are all on
	// the input queue at time zero instead (a producer's dump).
	PerDay float64
	Window time.Duration
	Burst  int
	// SingleHost sends every URL to one host.
	SingleHost bool
	// Sizes, when set, is a list of the benchmark's kind instead of draws
	// from the Zipf weights: Sizes[r] URLs for host rank r, shuffled, all
	// on the input queue at time zero, or, with Spacing, one message every
	// Spacing (the trickle: one ingest invocation per URL), or in Waves
	// equal parts Spacing apart. See shapes.go.
	Sizes   []int
	Spacing time.Duration
	Waves   int
	// URLsPerMessage packs URLs into one SQS message (an array body).
	URLsPerMessage int
	// MaxTime bounds the simulated time (arrivals plus drain).
	MaxTime time.Duration

	// Runtime parameters (SSM); params.Defaults() unless changed.
	P params.Params

	// Deployment.
	ShardCount    int
	VirtualShards int // hostqueue.VirtualShards today (16)
	// GSIBuckets spreads each virtual shard's due-index entries over this
	// many GSI partition keys ("vs#bucket"), a proposal; 1 is the GSI's layout.
	GSIBuckets      int
	IngestBatchSize int
	IngestWindow    time.Duration
	IngestMaxConc   int // the input mapping's ScalingConfig.MaximumConcurrency; 0: none (1000)
	IngestPollers   int // the mapping's pollers at first (5)
	// ProcessWorkers bounds the host workers of one check invocation across
	// all the shards it runs (a wake-up runs several side by side); 0: each
	// run has MaxConcurrentHosts (the code as committed; issue 11's item 1
	// adds such a budget, engine.Budget).
	ProcessWorkers int
	// InvocationRPS bounds the requests one check invocation starts a
	// second, across all its runs (its CPU, its event loop: what the
	// workers alone do not show); 0: no bound; below 0: the measured
	// figure at CheckMemoryMB (measuredRates).
	InvocationRPS  float64
	IngestLanes    int // hostqueue.Ingester.Concurrency (16)
	CheckRun       time.Duration
	CheckTimeout   time.Duration
	IngestTimeout  time.Duration
	CheckMemoryMB  int
	IngestMemoryMB int
	AccountConc    int // Lambda concurrency of the account: invocations past it are throttled
	// SSMRate is Parameter Store's transactions a second for the account
	// (40 by default, ssm.go).
	SSMRate          float64
	WakeMaxConc      int // the wake queue mapping's MaximumConcurrency (16)
	WakeBatchSize    int // the wake queue mapping's BatchSize (1: one shard an invocation)
	VisibilityTimout time.Duration
	MaxReceiveCount  int

	// DynamoDB.
	KeyWriteLimit float64 // write units a second per partition key
	KeyReadLimit  float64 // read units a second per partition key
	// WarmWrite and WarmRead are the table's (and the GSI's) warm
	// throughput: what an on-demand table serves at once (4,000 and 12,000
	// for a new table); it grows to twice the previous peak.
	WarmWrite, WarmRead float64
	// The template's provisioned-mode defaults (TableTargetUtilization, as
	// a percentage, and TableMin/Max Read/WriteCapacity), which
	// capacity.go prices.
	TableTarget                                int
	TableMinR, TableMaxR, TableMinW, TableMaxW int

	// Latencies (p50, p99) of one request.
	DynamoLatency  Dist
	QueryLatency   Dist
	SQSLatency     Dist
	InvokeOverhead Dist // Lambda invoke and warm start
	ColdStart      time.Duration
	// FixedLatency replaces every latency by its p50 (hand-computable tests).
	FixedLatency bool

	// Hosts' behaviour (see workload.go).
	Web WebModel

	// Migrate, when set, changes the deployment at MigrateAt: new ingest and
	// check instances use To's VirtualShards and ShardCount; old ones keep
	// theirs until MigrateOld later (a rolling deploy).
	Migrate    *Migration
	Politeness bool // record every request's gap (on in every run)
	// GiveWay (a proposal) ends a scheduled run that still lacks leases
	// after LeaseWait, as a woken run ends at once: today it waits out its
	// whole run, renewing every TTL/4, for a woken run's leases.
	GiveWay bool
	// ReleaseOnWait (a proposal): a worker whose next request to its host
	// may start only more than this from now releases the host, due again
	// then, instead of sleeping in its slot; 0: it sleeps (today).
	ReleaseOnWait time.Duration
	// Layout is the due index's layout (layout.go): the store's due lists
	// and buckets (the default), the GSI they replaced, or a proposal
	// priced against it.
	Layout Layout
	// LingerRun (a proposal, "one session per host"): a drained host
	// lingers with its worker until the run ends (unless the dispatcher
	// is starved) instead of until its next staggered check.
	LingerRun bool
	// StarvedTick (a proposal): how soon a starved run queries its due
	// hosts again; 0: the usual tick (1 s).
	StarvedTick time.Duration

	// One gate per server address (gate.go): the design, ServerDelay (the
	// least time between request starts to one address; 0: no gate and
	// nothing measured), ServerConnections (requests in flight to one
	// address, 1 when 0) and which hosts share an address.
	Gate              GateDesign
	ServerDelay       time.Duration
	ServerConnections int
	Addr              AddrModel
	// GateHold, under GatePlace, is the most hosts of one address an
	// invocation works at once: the dispatcher leaves the others in the
	// index and its due query reads on past them (billed), so they do not
	// fill its window. 0: no bound, every one waits at the gate in its
	// worker slot.
	GateHold int
}

// steady reports whether the run is a day's rate for Window (not a dump
// or a list): its costs are the steady part's.
func (c Config) steady() bool { return c.Burst == 0 && len(c.Sizes) == 0 }

// Migration is a live change of VirtualShards and ShardCount.
type Migration struct {
	At            time.Duration
	Overlap       time.Duration
	VirtualShards int
	ShardCount    int
}

// Defaults are template.yaml's and params.Defaults()'s values: the
// deployment's settings are read from the template (fromTemplate), the
// values below stand in only when it cannot be read.
func Defaults() Config {
	c := builtin()
	if err := fromTemplate(&c); err != nil {
		templateErr = err
	}
	return c
}

// templateErr is why the template could not be read, if so.
var templateErr error

func builtin() Config {
	return Config{
		Seed:             1,
		Hosts:            1_000_000,
		ZipfS:            1.0,
		HeadCap:          0.0005,
		HeadCapPerDay:    50_000,
		URLsPerMessage:   1,
		MaxTime:          3 * time.Hour,
		P:                params.Defaults(),
		ShardCount:       4,
		VirtualShards:    hostqueue.VirtualShards,
		GSIBuckets:       1,
		Layout:           LayoutListsBuckets,
		IngestBatchSize:  10000,
		IngestWindow:     5 * time.Second,
		IngestLanes:      16,
		IngestPollers:    5,
		ProcessWorkers:   -1,
		InvocationRPS:    -1,
		CheckRun:         55 * time.Second,
		CheckTimeout:     120 * time.Second,
		IngestTimeout:    60 * time.Second,
		CheckMemoryMB:    512,
		IngestMemoryMB:   256,
		AccountConc:      1000,
		SSMRate:          40,
		WakeMaxConc:      16,
		WakeBatchSize:    1,
		IngestMaxConc:    10,
		VisibilityTimout: 360 * time.Second,
		MaxReceiveCount:  5,
		KeyWriteLimit:    1000,
		KeyReadLimit:     3000,
		WarmWrite:        4000,
		WarmRead:         12000,
		TableTarget:      70,
		TableMinR:        100,
		TableMaxR:        40000,
		TableMinW:        100,
		TableMaxW:        40000,
		DynamoLatency:    Dist{P50: 5 * time.Millisecond, P99: 20 * time.Millisecond},
		QueryLatency:     Dist{P50: 8 * time.Millisecond, P99: 30 * time.Millisecond},
		SQSLatency:       Dist{P50: 15 * time.Millisecond, P99: 100 * time.Millisecond},
		InvokeOverhead:   Dist{P50: 20 * time.Millisecond, P99: 80 * time.Millisecond},
		ColdStart:        150 * time.Millisecond,
		Web:              DefaultWeb(),
		Politeness:       true,
	}
}

// measuredRate is one check invocation's requests a second at one
// MemorySize, as the benchmark measured it.
type measuredRate struct {
	MemoryMB int
	RPS      float64
}

// measuredRates are the requests a second one check invocation made, by
// the check function's MemorySize, in the benchmark's table "The check
// function's memory, by measurement" (docs/benchmarks.md, Resources per
// invocation; `make bench ARGS='-only resources -check-memory 512,1024'`,
// infra/bench/resources_rate.go): the real engine, fetcher and publisher
// under the function's budget at that size (workers, GOMEMLIMIT) and
// Lambda's 1,024 descriptors, with the queues in a SQLite store in place
// of DynamoDB, 5,000 hosts of 3 URLs due at once at d = 1 s on a loopback
// farm, one 55 s run. The row with DynamoDB on moto is bound by moto, not
// by the engine; the simulation models DynamoDB's latency itself, so it
// takes the figures without the store. The machine does not impose
// Lambda's CPU share (0.29 of a vCPU at 512 MB, 0.58 at 1,024): the
// benchmark's table shows the cores each used against that share.
//
// A table, not read from a file the bench writes: `make sim` stays
// deterministic and runs without a benchmark run before it, on any
// machine; re-measure with the command above and put its requests/s here.
// Sorted by MemoryMB; invocationRPS interpolates between the sizes. Both
// sizes are bound by their workers (about one request a worker-second at
// d = 1 s); at 512 MB the process used more CPU than Lambda gives, so on
// Lambda its rate may be lower.
var measuredRates = []measuredRate{
	{MemoryMB: 512, RPS: 196},
	{MemoryMB: 1024, RPS: 438},
}

// keptBody is what a check worker holds of a body, as the engine budgets it
// (engine.Engine.WorkerLimit): the deployment always has the body bucket,
// so a body longer than the inline limit streams there and a worker holds
// at most InlineBodyBytes and the byte that shows there is more.
func keptBody(p params.Params) int64 { return min(p.MaxBodyBytes, p.InlineBodyBytes+1) }

// invocationRPS is cfg.InvocationRPS with the measured default applied.
func invocationRPS(cfg Config) float64 {
	if cfg.InvocationRPS >= 0 {
		return cfg.InvocationRPS
	}
	rps := measuredRPS(cfg.CheckMemoryMB, keptBody(cfg.P))
	if cfg.P.ResultBodyEncoding == params.BodyGzip {
		// The measured row spent 1.2 ms of CPU a request, Lambda's whole
		// share at 512 MB: compressing is CPU on top of it, which slows
		// every request of the invocation in proportion (the row's bodies
		// were a few bytes, so its CPU held none of it).
		share := float64(cfg.CheckMemoryMB) / 1769 // vCPUs at that memory
		extra := gzipNsPerByte * 1e-9 * packedBytes(cfg) / share
		rps = 1 / (1/rps + extra)
	}
	return rps
}

// Result bodies compressed (ResultBodyEncoding=gzip), measured by
// shared/domain/result's BenchmarkPack on real HTML found offline
// (internal/htmlcorpus: the Go distribution's doc/*.html and the HTML
// documentation under /usr/share/doc):
//
//	go test -run '^$' -bench Pack -benchtime 5x -count 3 ./shared/domain/result/
//
// gzipTextRatio is what the data field keeps of plain's size, gzip at
// BestSpeed then base64 over the bodies' bytes as text; TestGzipTextRatio
// re-measures it wherever the corpus is installed. gzipNsPerByte is the
// CPU packing adds to plain per byte of body (cpu-ns/B; Lambda's Graviton
// cores are taken as fast). Figures: docs/benchmarks.md, "Cost design",
// the bullet "Results' bodies compressed".
const (
	gzipTextRatio = 0.30
	gzipNsPerByte = 12
)

// packedBytes is the mean body a check request packs: a fetched page's
// body when it stays in memory (at most InlineBodyBytes), over the
// log-normal body sizes, E[X; X <= L] = mean x Phi((ln L - mu - s^2)/s).
// Every request is counted as a fetched page (robots.txt, errors and
// redirects pack none), so the figure errs on the costly side; binary
// bodies are compressed too (result.Pack tries gzip on every body).
func packedBytes(cfg Config) float64 {
	w := cfg.Web
	mu, sg := math.Log(w.BodyMedian), w.BodySigma
	limit := float64(keptBody(cfg.P) - 1)
	mean := math.Exp(mu + sg*sg/2)
	return mean * 0.5 * math.Erfc(-((math.Log(limit)-mu-sg*sg)/sg)/math.Sqrt2)
}

// measuredRPS is an invocation's rate at mb from measuredRates: a
// measured size's figure; between two measured sizes, the line between
// them; above the largest, the largest's (no gain is assumed that was not
// measured); below the smallest, the smallest's scaled down by the worker
// budget (wiring.BudgetFor at maxBody: fewer workers, fewer requests).
func measuredRPS(mb int, maxBody int64) float64 {
	rs := measuredRates
	lo, hi := rs[0], rs[len(rs)-1]
	switch {
	case mb < lo.MemoryMB:
		w := func(mb int) float64 { return float64(wiring.BudgetFor(mb).Workers(maxBody)) }
		return lo.RPS * min(1, w(mb)/w(lo.MemoryMB))
	case mb >= hi.MemoryMB:
		return hi.RPS
	}
	for i := 1; i < len(rs); i++ {
		if a, b := rs[i-1], rs[i]; mb <= b.MemoryMB {
			return a.RPS + (b.RPS-a.RPS)*float64(mb-a.MemoryMB)/float64(b.MemoryMB-a.MemoryMB)
		}
	}
	return hi.RPS
}

// The engine's constants the model follows: the engine's own (shared/engine,
// the check handler, the wake queue), not copies.
const (
	leaseWait    = checkhandler.LeaseWait
	tickMax      = engine.DefaultTick
	lingerStep   = engine.LingerStep
	headBatch    = engine.HeadBatch
	giveUpBatch  = engine.GiveUpBatch
	commitMargin = engine.CommitMargin
	wakeEvery    = wake.DefaultEvery
)

// leaseTTL is Engine.leaseTTL with no override: engine.LeaseTTL.
func leaseTTL(p params.Params) time.Duration { return engine.LeaseTTL(p, 0) }

// runDeadline is the check handler's deadline for a run that starts at t:
// the Lambda deadline less DeadlineMargin/3; Until is the run length or
// DeadlineMargin before the Lambda deadline, whichever is sooner.
func runTimes(cfg Config) (until, deadline time.Duration) {
	until = cfg.CheckRun
	if d := cfg.CheckTimeout - checkhandler.DeadlineMargin; d < until {
		until = d
	}
	return until, cfg.CheckTimeout - checkhandler.DeadlineMargin/3
}
