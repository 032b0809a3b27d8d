package main

// The resources scenario's function process: the bench binary (or its test
// binary) started again with resChildEnv set runs one invocation of the
// check or the ingest function, wired as the function's main.go wires it
// (services, the handler) on moto, in a process of its own so that its
// memory and descriptors are its own: Lambda's 1,024 descriptors
// (RLIMIT_NOFILE), AWS_LAMBDA_FUNCTION_MEMORY_SIZE as the template says,
// GOMEMLIMIT and the worker budget derived from it. It samples its open
// descriptors and heap while it runs and writes a resChildReport.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/aws/config"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/runtime/wiring"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// The child's environment, besides the function's own.
const (
	// resChildEnv selects the child and its function: "check" or "ingest".
	resChildEnv = "BENCH_RESOURCES_CHILD"
	// resReportEnv is the file the child writes its report to.
	resReportEnv = "BENCH_RESOURCES_REPORT"
	// resInputEnv is a JSON resChildInput file.
	resInputEnv = "BENCH_RESOURCES_INPUT"
	// lambdaFDs is Lambda's descriptor limit per execution environment.
	lambdaFDs = 1024
)

// resChildInput is what the parent hands the child besides the function's
// environment.
type resChildInput struct {
	// Timeout is the function's timeout (the invocation's deadline).
	Timeout time.Duration
	// Check: the shards of the wake-up batch, the sink standing in for
	// the output queue, and the name table of the loopback sites.
	Shards  []int
	SinkURL string
	Resolve map[string][]netip.Addr
	// Ingest: the SQS event, as Lambda would deliver it.
	Event json.RawMessage
	// SQLite, when set, is a file for a SQLite store (shared/embedded/sqlite) that
	// stands in for DynamoDB: the child queues Queue in it and the check
	// engine works it, so the store's speed (moto's) does not bind.
	SQLite string
	Queue  []urlmsg.Message
}

// resChildReport is what the child measured.
type resChildReport struct {
	MemoryMiB  int
	GOMEMLIMIT int64
	// Budget is the check engine's; Workers its worker bound at the
	// parameters in force.
	Budget  engine.Budget
	Workers int
	// BaseFDs are open once the function is wired, before the
	// invocation; PeakFDs the most open while it ran.
	BaseFDs, PeakFDs int
	// PeakRSS is the kernel's high-water mark (VmHWM); PeakHeap the most
	// heap in objects seen by the sampler.
	PeakRSS, PeakHeap int64
	NumGC             uint32
	Elapsed           time.Duration
	// Check: the merged summary, the most workers and fetch
	// connections at once.
	Summary     engine.Summary
	PeakWorkers int
	PeakConns   int
	// Ingest: the answer.
	Records, FailedRecords int
	URLs, URLsInOKRecords  int
	Appended               int
	Deadline               time.Duration
	// DynamoDB is the store's calls (moto here) as the SDK client timed
	// them; CPU the child's user and system time (set by the parent).
	DynamoDB Latency
	CPU      time.Duration
	Err      string
}

func init() {
	// A child does its one invocation and exits before main (or the
	// tests) run.
	if mode := os.Getenv(resChildEnv); mode != "" {
		os.Exit(resChildMain(mode))
	}
}

func resChildMain(mode string) int {
	rep, err := resChild(mode)
	if err != nil {
		rep.Err = err.Error()
	}
	b, _ := json.Marshal(rep)
	if werr := os.WriteFile(os.Getenv(resReportEnv), b, 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, "resources child: write report:", werr)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "resources child:", err)
		return 1
	}
	return 0
}

// resChild runs the invocation; rep is named so that the deferred
// sampler's peaks reach the caller.
func resChild(mode string) (rep resChildReport, err error) {
	// Lambda's limit, soft and hard: the Go runtime raises the soft limit
	// to the hard one at start, so both must be lowered.
	lim := syscall.Rlimit{Cur: lambdaFDs, Max: lambdaFDs}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return rep, fmt.Errorf("limit descriptors to %d: %w", lambdaFDs, err)
	}
	var in resChildInput
	var b []byte
	b, err = os.ReadFile(os.Getenv(resInputEnv))
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil {
		return rep, fmt.Errorf("read the input: %w", err)
	}
	ctx := context.Background()
	cfg, err := config.FromEnv(nil)
	if err != nil {
		return rep, err
	}
	log := cfg.Logger()
	// moto's configuration (its retryer, its atomic conditional writes),
	// but the services' own capped connection pools, as deployed.
	awsCfg, err := moto.AWSConfig(ctx, os.Getenv("AWS_ENDPOINT_URL"))
	if err != nil {
		return rep, err
	}
	awsCfg.HTTPClient = nil
	rep.MemoryMiB, _ = strconv.Atoi(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))
	rep.GOMEMLIMIT = wiring.LimitMemory(os.Getenv)
	ddbLat := &latencies{}
	opts := wiring.Options{Log: log, Budget: wiring.BudgetFor(rep.MemoryMiB), DynamoOptions: []func(*dynamodb.Options){ddbLat.dynamo}}
	samp := startResSampler(5 * time.Millisecond)
	defer func() {
		rep.PeakFDs, rep.PeakHeap, rep.PeakWorkers, rep.PeakConns = samp.stop()
		rep.PeakRSS = vmHWM()
		rep.DynamoDB = ddbLat.summary()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		rep.NumGC = ms.NumGC
	}()
	switch mode {
	case "check":
		redirect := &queueRedirect{endpoint: mustURL(in.SinkURL)}
		redirect.queue.Store(cfg.OutputQueueURL)
		opts.SQSOptions = []func(*sqs.Options){redirect.option}
		opts.Resolve = in.Resolve
		s := wiring.New(awsCfg, cfg, opts)
		defer s.Publisher.Close()
		if in.SQLite != "" {
			st, err := sqlite.New(in.SQLite, time.Now)
			if err != nil {
				return rep, err
			}
			defer st.Close()
			ing := *s.Ingester
			ing.Store = st
			if ir := ing.Ingest(ctx, hostqueue.IngestParams{PersistLimit: 1000}, in.Queue); len(ir.Failed) > 0 {
				return rep, fmt.Errorf("queue %d urls in the SQLite store: %d failed", len(in.Queue), len(ir.Failed))
			}
			s.Engine.Store = st
		}
		// As functions/check/main.go wires it.
		s.Params.LimitFetchTimeout(engine.FetchTimeoutLimit(checkhandler.RunWindow(cfg.CheckRun)))
		s.Engine.ParamsReady = s.Params.WaitLoaded
		h := &checkhandler.Handler{Runner: s.Engine, ShardCount: cfg.ShardCount, Run: cfg.CheckRun, Now: time.Now, Log: log}
		rep.Budget = s.Engine.Budget
		samp.watch(s.Engine, func() int {
			if f, ok := s.Engine.Fetcher(s.Params.Get(ctx)).(*fetch.Fetcher); ok {
				return f.OpenConns()
			}
			return 0
		})
		rep.BaseFDs = openFDs()
		ev := checkhandler.Event{}
		for _, sh := range in.Shards {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprint("wake-", sh), Body: fmt.Sprintf(`{"shard":%d}`, sh), EventSource: "aws:sqs"})
		}
		start := time.Now()
		ictx, cancel := context.WithTimeout(ctx, in.Timeout)
		defer cancel()
		rep.Summary, err = h.Handle(ictx, ev)
		rep.Elapsed = time.Since(start)
		rep.Workers = s.Engine.WorkerLimit(s.Params.Get(ctx))
		return rep, err
	case "ingest":
		s := wiring.New(awsCfg, cfg, opts)
		defer s.Publisher.Close()
		counted := &countingIngester{next: s.Ingester}
		// As functions/ingest/main.go wires it.
		h := &ingesthandler.Handler{Ingester: counted, Params: s.Params.Get, ParamsReady: s.Params.WaitLoaded, Log: log}
		if s.Waker != nil {
			h.Waker = s.Waker
		}
		rep.BaseFDs = openFDs()
		start := time.Now()
		ictx, cancel := context.WithTimeout(ctx, in.Timeout)
		defer cancel()
		out, err := h.Handle(ictx, in.Event)
		rep.Elapsed = time.Since(start)
		rep.Deadline = in.Timeout
		if err != nil {
			return rep, err
		}
		resp, ok := out.(events.SQSEventResponse)
		if !ok {
			return rep, fmt.Errorf("ingest answered %T, want an SQS batch response", out)
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(in.Event, &ev); err != nil {
			return rep, err
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		rep.Records, rep.FailedRecords = len(ev.Records), len(failed)
		for _, r := range ev.Records {
			ms, _, _ := urlmsg.Parse(r.MessageId, []byte(r.Body))
			rep.URLs += len(ms)
			if !failed[r.MessageId] {
				rep.URLsInOKRecords += len(ms)
			}
		}
		rep.Appended = counted.appended()
		return rep, nil
	}
	return rep, fmt.Errorf("unknown child %q", mode)
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// countingIngester counts what the real Ingester appended.
type countingIngester struct {
	next *hostqueue.Ingester
	mu   sync.Mutex
	n    int
}

func (c *countingIngester) Ingest(ctx context.Context, p hostqueue.IngestParams, msgs []urlmsg.Message) hostqueue.IngestResult {
	res := c.next.Ingest(ctx, p, msgs)
	c.mu.Lock()
	c.n += res.Appended
	c.mu.Unlock()
	return res
}

func (c *countingIngester) appended() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// openFDs counts this process's open descriptors (less the one reading
// the directory).
func openFDs() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(es) - 1
}

// vmHWM is the process's peak resident set, in bytes.
func vmHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return -1
}

// resSampler tracks peaks while the invocation runs.
type resSampler struct {
	mu                  sync.Mutex
	fds, workers, conns int
	heap                int64
	engine              *engine.Engine
	openConns           func() int
	done                chan struct{}
	stopped             chan struct{}
}

func startResSampler(every time.Duration) *resSampler {
	s := &resSampler{done: make(chan struct{}), stopped: make(chan struct{})}
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(s.stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			metrics.Read(heap)
			fds := openFDs()
			s.mu.Lock()
			s.fds = max(s.fds, fds)
			s.heap = max(s.heap, int64(heap[0].Value.Uint64()))
			if s.engine != nil {
				_, peak := s.engine.Workers()
				s.workers = peak
				s.conns = max(s.conns, s.openConns())
			}
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *resSampler) watch(e *engine.Engine, openConns func() int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engine, s.openConns = e, openConns
}

func (s *resSampler) stop() (fds int, heap int64, workers, conns int) {
	close(s.done)
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fds, s.heap, s.workers, s.conns
}
