// Package localmode runs the whole downloader in one process on one
// machine: local mode, the default of `make run`. It composes the code that
// is deployed (the ingest and check handlers, the ingester, the check
// engine) with local stand-ins for the AWS services around it:
//
//	DynamoDB table          the embedded SQLite store (shared/embedded/sqlite), in a file
//	SQS output queue        JSON lines appended to a file (or stdout), synced
//	                        before the engine commits the URL as done
//	SQS input queue + ESM   an input file or stdin, read into ingest batches,
//	                        its progress kept in the state file (input.go)
//	EventBridge schedule    one loop per shard (scheduler.go)
//	wake queue              an in-process signal to the shard's loop
//	SSM Parameter Store     --param values, validated as params.Parse does
//	API Gateway             POST /urls on a local listener (serve.go)
//
// Leases, politeness state, robots.txt and the at-least-once order (publish,
// then commit) are the engine's and the store's own code paths, so a second
// process on the same state file cannot work a host at the same time.
package localmode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/embedded/dirbody"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
	"github.com/urldownloader/urldownloader/shared/runtime/wiring"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// Defaults of Options.
const (
	// DefaultShardCount runs one check loop per virtual shard: locally a
	// loop costs nothing while idle, and each loop's run works at most
	// MaxConcurrentHosts hosts, so more loops keep a thousand hosts from
	// waiting for a worker slot.
	DefaultShardCount = hostqueue.VirtualShards
	// DefaultCheckRun is how long a local check invocation starts
	// requests. On Lambda a run ends after 55 s (CHECK_RUN_SECONDS; the
	// function's timeout is 120 s) and the hosts it stopped are due again
	// at their staggered next check, one to two CheckHostPeriods later: a
	// pause of 5-10 s per host and run, which a host with a 1 s delay feels
	// as 10-15% of its rate. Locally no timeout forces it, so runs are long
	// and hosts move from run to run rarely.
	DefaultCheckRun = 10 * time.Minute
	// checkSlack is what an invocation's deadline leaves after its run, as
	// the template's timeout leaves 65 s after a 55 s run.
	checkSlack = 65 * time.Second
	// DefaultIngestBatch and DefaultIngestWindow shape ingest batches:
	// records up to the input reader's batch bytes (8 MiB), closed by a
	// short pause of the input: a local file is read at once, and a
	// trickle on stdin should not wait the event source mapping's 5 s. Ten times the mapping's
	// 10,000 records: a shuffled list of 100,000 URLs over 5,000 hosts then
	// reaches every host's queue in one append each, not ten, and each host
	// works it in full rounds instead of lingering for the next batch (half
	// the CPU per URL went into the appends, commits and lingers of
	// two-URL sessions; batches that grew from 1,024 lines, so the first
	// hosts started at once, queued the last of 105,000 lines 11 s after
	// the start against the fetching, where one batch had it by 5 s).
	DefaultIngestBatch  = 100000
	DefaultIngestWindow = 200 * time.Millisecond
	// idlePoll is how often an idle shard's loop looks again for hosts that
	// fall due without an ingest (held back by Retry-After or back-off).
	idlePoll = time.Second
)

// Options shape a runtime.
type Options struct {
	// State is the SQLite file that keeps the host queues, their politeness
	// state and how far each input was read; created when missing. Empty
	// keeps everything in memory, lost at Close.
	State string
	// Bodies is the folder where bodies larger than InlineBodyBytes are
	// kept, content-addressed (shared/embedded/dirbody), the result pointing at the
	// file. Empty: <the state file's folder>/bodies; with no State either,
	// no folder, and every body stays inline (a JSON line has no size
	// limit).
	Bodies string
	// Out receives one JSON line per result (default os.Stdout). A regular
	// file is synced before Publish returns, so a result is on disk before
	// the store forgets its URL.
	Out io.Writer
	// OutPath, instead of Out, names the results file, which the state
	// records (outfile.go): the same job appends to it; a non-empty file
	// the state does not record is refused unless Overwrite empties it.
	OutPath   string
	Overwrite bool
	// Warc, when set, names the WARC output ("out.warc.gz" writes
	// out-00000.warc.gz, out-00001.warc.gz, ...; see shared/web/warc): every
	// request made is kept there as transferred, and each result that came
	// from an answer names its record (result.Result.Warc). A record is
	// written whole before its result is published, and synced before the
	// results file is. WarcMaxBytes is where a file rolls over (default
	// warc.DefaultMaxFileBytes).
	Warc         string
	WarcMaxBytes int64
	// SharedState skips the state's OS lock and the takeover of leases
	// found in it (lock.go): several runtimes then work one state at once,
	// kept apart by the shard leases alone, as Lambda invocations are.
	// Tests of that use it; a runner should not.
	SharedState bool
	// Params are runtime parameters, name to value, as --param gives them;
	// an invalid one fails Open.
	Params map[string]string
	// Addresses is the address policy of the fetcher and of ingest's
	// guard (fetch.AddressPolicy): local mode's --allow-net and
	// --allow-private. The zero value allows public addresses only.
	Addresses fetch.AddressPolicy
	// Resolve, when set, resolves host names from this table instead of
	// DNS (fetch.Options.Resolve).
	Resolve map[string][]netip.Addr
	// DNSServers, when set, are the nameservers ("ip:port") the fetchers'
	// DNS cache asks instead of /etc/resolv.conf's (--dns-server).
	DNSServers []string
	// ShardCount is the number of check loops (1..16; default 16).
	ShardCount int
	// CheckRun is how long one check invocation starts requests (default
	// DefaultCheckRun); loops run invocations back to back.
	CheckRun time.Duration
	// IngestBatch and IngestWindow bound an ingest batch: this many input
	// records, or what came until the input paused this long (see
	// collect).
	IngestBatch  int
	IngestWindow time.Duration
	// LeaseTTL overrides the engine's shard lease duration (tests).
	LeaseTTL time.Duration
	// Budget, when set, replaces the process's budget of host workers and
	// connections (wiring.MachineBudget of its descriptor limit and the
	// machine's memory): tests of admission.
	Budget *engine.Budget
	// OnResult, when set, sees every result once it is written to Out.
	OnResult func(result.Result)
	// OnReject, when set, is told of every input line refused as invalid.
	OnReject func(Rejected)
	// Log receives the functions' logs (default: discarded).
	Log *slog.Logger
	// Metrics receives the functions' metrics, as on AWS (one Recorder
	// for the process; each invocation flushes it as EMF lines to its
	// writer, and Run flushes it once more at the end). Nil: none.
	Metrics *metrics.Recorder
}

// Store is the host-queue store the runtime runs on.
type Store interface {
	hostqueue.Store
	// IdempotencyStore remembers POST /urls answers by Idempotency-Key,
	// so serve mode replays a retried request as API Gateway's does.
	hostqueue.IdempotencyStore
	// QueuedRequests counts the distinct requests in a queue (copies of
	// a URL cost one fetch): the progress line's ETA.
	QueuedRequests(ctx context.Context, key string) (int, error)
	// Refreshing counts the refreshing URLs kept and says when the first
	// is due (docs/refresh.md): a job holding any runs until stopped.
	Refreshing(ctx context.Context) (int, time.Time, error)
	Close() error
}

// Runtime is the downloader composed for one machine. Open it, Run it
// (and serve Handler if wanted), then Close it.
type Runtime struct {
	opts   Options
	params params.Params
	log    *slog.Logger

	store  Store
	ledger *ledger
	over   *overflow
	files  stateFiles // the state's lock, the results file (outfile.go)
	// retried maps the ids of retried URLs to the ids they retry
	// (retry.go).
	retried retries
	waits   waits // why hosts wait, for Progress (waiting.go)
	out     *lineWriter
	faults  *faults      // the run's first disk fault (faults.go)
	warc    *warc.Writer // nil without Options.Warc
	tally   *tally
	// inputBudget, when set, replaces the input reader's byte budget
	// (tests: batches the budget cuts short without a 40 MiB list).
	inputBudget int64
	clock       *stopClock
	// gate is the process's gate per server address (engine.Gate).
	gate    *server.Gate
	ingest  *ingesthandler.Handler
	checks  []*checkhandler.Handler // by shard
	engines []*engine.Engine        // by shard, for Progress
	// requests and inFlight count this process's requests, for Progress.
	requests, inFlight atomic.Int64
	// refreshLag is the latest refetch's lag (engine.Engine.OnRefetch),
	// in nanoseconds, for Progress.
	refreshLag atomic.Int64
	// inputEnded: the run's input is read and queued, and no serve mode
	// takes more (engine.Engine.Finished).
	inputEnded atomic.Bool
	wakes      []chan struct{}
	// budget bounds the host workers and connections of every loop.
	budget engine.Budget
	// lastFetch is when this process last started a request (Unix
	// nanoseconds).
	lastFetch atomic.Int64
	// crawl keeps the robots.txt Crawl-delays seen, for HostDelay.
	crawl *crawlDelays

	// Resumed counts the URLs found queued or held back in the state at
	// Open: accepted by an earlier run and still without a result there.
	Resumed int

	// results keeps result lines by id for serve mode (results.go).
	results atomic.Pointer[resultStore]
}

// Open validates the options, opens the state and wires the handlers. It
// makes no network call.
func Open(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.ShardCount == 0 {
		opts.ShardCount = DefaultShardCount
	}
	if opts.ShardCount < 1 || opts.ShardCount > hostqueue.VirtualShards {
		return nil, fmt.Errorf("shard count %d: want 1 to %d", opts.ShardCount, hostqueue.VirtualShards)
	}
	if opts.CheckRun <= 0 {
		opts.CheckRun = DefaultCheckRun
	}
	if opts.IngestBatch <= 0 {
		opts.IngestBatch = DefaultIngestBatch
	}
	if opts.IngestWindow <= 0 {
		opts.IngestWindow = DefaultIngestWindow
	}
	if opts.Out == nil && opts.OutPath == "" {
		opts.Out = os.Stdout
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// MaxConcurrentHosts caps a Lambda invocation's hosts, whose memory
	// it is sized for; here the process's budget bounds the workers of all
	// loops together, so a loop's own cap is only the parameter's limit
	// unless --param sets one.
	defaults := params.Defaults()
	defaults.MaxConcurrentHosts = params.MaxMaxConcurrentHosts
	p, err := params.Parse(opts.Params, defaults)
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	// The check function refuses such a timeout too (its parameter cache's
	// LimitFetchTimeout): no run could ever start a request.
	if limit := engine.FetchTimeoutLimit(checkhandler.RunWindow(opts.CheckRun)); p.FetchTimeout >= limit {
		return nil, fmt.Errorf("parameters: FetchTimeout %s must be below %s for %s check runs", p.FetchTimeout, limit, opts.CheckRun)
	}

	// The state and the results file are checked before either is created.
	fresh, lock, outLock, err := prepareState(opts)
	if err != nil {
		return nil, err
	}
	rt := &Runtime{opts: opts, params: p, log: opts.Log, clock: newStopClock(), faults: newFaults()}
	rt.files.lock, rt.files.outLock = lock, outLock
	rt.over = newOverflow(rt)
	if opts.State == "" {
		var s *sqlite.Store
		if s, err = sqlite.NewMemory(time.Now); err == nil {
			s.ExclusiveHosts() // an in-memory store has no other connection
			rt.store = s
		}
	} else {
		var s *sqlite.Store
		if s, err = sqlite.New(opts.State, time.Now); err == nil {
			rt.store = s
			if !opts.SharedState {
				// The state's lock keeps every other process off it.
				s.ExclusiveHosts()
				err = rt.recover(ctx, s)
			}
		}
	}
	if err == nil {
		// Without a state file, the ledger and the overflow live in a
		// scratch database on disk, gone at Close.
		rt.ledger, err = openLedger(opts.State)
	}
	if err == nil {
		err = rt.loadRetries(ctx)
	}
	if err == nil {
		err = rt.openOut(ctx, fresh)
	}
	if err != nil {
		rt.files.outLock.discard()
		rt.Close()
		var conflict *OutConflictError
		if errors.As(err, &conflict) {
			return nil, err
		}
		if d := damaged(opts.State, err); d != err {
			return nil, d
		}
		return nil, fmt.Errorf("open state: %w", err)
	}
	if rt.files.out != nil {
		opts.Out = rt.files.out
	}
	if rt.tally, err = newTally(p.FollowCrossHostRedirects); err != nil {
		rt.Close()
		return nil, err
	}

	var bodies *dirbody.Store
	if dir := bodyFolder(opts); dir != "" {
		if bodies, err = dirbody.New(dir, time.Now); err != nil {
			rt.Close()
			return nil, err
		}
	}

	rt.out = newLineWriter(opts.Out, func(rs []result.Result) {
		rt.files.wrote(len(rs))
		rt.tally.seen(rs)
		if opts.OnResult != nil {
			for _, r := range rs {
				opts.OnResult(r)
			}
		}
	})
	rt.out.retryOf = rt.retried.get
	rt.out.written, rt.out.writtenFrom = rt.files.tail, rt.files.tailFrom
	rt.out.unsettled = newUnsettled(rt.clock.Now)
	if path := rt.files.outInfo.Path; path != "" {
		rt.out.fault = func(err error) error { return rt.faults.note("results file "+path, path, err) }
	}
	rt.files.mu.Lock()
	rt.files.synced, rt.files.unsettled = rt.out.Synced, rt.out.unsettled
	rt.files.mu.Unlock()
	if err := rt.attachResults(); err != nil {
		rt.Close()
		return nil, err
	}
	rt.wakes = make([]chan struct{}, opts.ShardCount)
	for i := range rt.wakes {
		rt.wakes[i] = make(chan struct{}, 1)
	}
	// The deployed functions' parts, on the embedded store. Results are
	// counted where they are published, as on AWS.
	parts := wiring.Parts{
		Store: rt.store, Idempotency: rt.store,
		Publisher: &metrics.CountResults{Publisher: rt.out, Metrics: opts.Metrics},
		Params:    func(context.Context) params.Params { return p },
		Guard:     wiring.Guard(opts.Addresses), Waker: waker{rt},
		ShardCount: opts.ShardCount, Clock: rt.clock, Log: opts.Log, Metrics: opts.Metrics,
	}
	if bodies != nil {
		parts.Bodies = faultBodies{Store: bodies, f: rt.faults, path: bodyFolder(opts)}
	}
	// One engine and one fetcher for every check loop: the budget of host
	// workers and connections is the process's (wiring.MachineBudget, from
	// its descriptor limit and the machine's memory), shared by the loops as
	// a Lambda function's is by the shards of one wake-up, and the
	// fetcher's pool keeps one connection per active host whichever loop
	// works it.
	budget := wiring.MachineBudget(wiring.ProcessLimits())
	if opts.Budget != nil {
		budget = *opts.Budget
	}
	fetchOpts := wiring.FetchOptions(p, opts.Addresses, opts.Resolve, budget.Conns)
	if opts.DNSServers != nil {
		// --dns-server: a cache of its own asking those servers; otherwise
		// the process-wide one on /etc/resolv.conf's.
		fetchOpts.DNS = fetch.NewDNSCache(fetch.DNSCacheOptions{Servers: opts.DNSServers})
	}
	if opts.Warc != "" {
		if rt.warc, err = openWarc(opts, p, rt.clock.Now); err != nil {
			rt.Close()
			return nil, err
		}
		fetchOpts.Archive = faultArchive{archive: rt.warc, f: rt.faults, path: opts.Warc}
		// The records results point at are durable before the results
		// are: the results file's sync waits for the WARC file's.
		rt.out.before = func() error {
			return rt.faults.note("WARC files "+opts.Warc, opts.Warc, rt.warc.Sync())
		}
	}
	// One gate per server address for the process, met by the engine
	// before a request and by the fetcher where its connection is known.
	rt.gate = engine.NewGate(rt.clock, opts.Metrics)
	fetchOpts.Gate = engine.FetchGate(rt.gate)
	fetcher := &activeFetcher{f: fetch.New(fetchOpts, rt.clock.Now),
		last: &rt.lastFetch, requests: &rt.requests, inFlight: &rt.inFlight}
	parts.Budget, rt.budget = budget, budget
	parts.Gate = rt.gate
	parts.Fetcher = func(params.Params) engine.Fetcher { return fetcher }
	appends := &engine.Appends{}
	parts.Store = wakeOnAppend(appends.Telling(rt.store), waker{rt})
	eng := parts.Engine()
	eng.Publisher = settling{Publisher: eng.Publisher, u: rt.out.unsettled, synced: rt.out.Synced}
	// A commit frees room in its host's queue: URLs held back are
	// queued again (holdback.go).
	eng.Store = committed{Store: faultStore{Store: rt.store, f: rt.faults, path: opts.State}, over: rt.over, settle: rt.out.unsettled}
	eng.LeaseTTL = opts.LeaseTTL
	// The process is the run: a host whose failure run outlasted
	// GiveUpAfter while no process ran is asked again before it is given
	// up (shared/engine giveup.go).
	eng.RunStart = rt.clock.Now()
	eng.Admission = wiring.MachineAdmission(runtime.NumCPU())
	// A lingering host learns of its new URLs from ingest, in this
	// process, instead of polling its queue (which cost more CPU than the
	// fetching at 5,000 hosts): a shuffled input then reuses the session
	// and its connection, as one grouped by host does.
	eng.Appends = appends
	// A host is finished once the input is queued whole and none of its
	// URLs wait in the overflow: its emptied queue gets nothing more.
	eng.Finished = func(key string) bool { return rt.inputEnded.Load() && !rt.over.held(key) }
	eng.OnRefetch = func(lag time.Duration) { rt.refreshLag.Store(int64(lag)) }
	rt.engines = []*engine.Engine{eng}
	rt.checks = make([]*checkhandler.Handler, opts.ShardCount)
	for i := range rt.checks {
		rt.checks[i] = parts.CheckHandler(eng, opts.CheckRun)
	}
	ingester := parts.Ingester()
	// A full queue holds URLs back, never evicts them (holdback.go).
	ingester.Overflow = hostqueue.HoldBack
	ingester.Concurrency = sqlite.GroupSize
	rt.ingest = parts.IngestHandler(&counted{inner: ingester, rt: rt})

	err = eachQueued(ctx, rt.store, func(queued map[string]string) error {
		rt.Resumed += rt.tally.expect(queued)
		return rt.tally.Err()
	})
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("read queued urls from the state: %w", err)
	}
	held, err := rt.over.load(ctx)
	if err == nil {
		err = rt.tally.Err()
	}
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("read held urls from the state: %w", err)
	}
	rt.Resumed += held
	rt.watchCrawlDelays()
	return rt, nil
}

// bodyFolder is where the runtime keeps large bodies (see Options.Bodies).
func bodyFolder(opts Options) string {
	switch {
	case opts.Bodies != "":
		return opts.Bodies
	case opts.State != "":
		return filepath.Join(filepath.Dir(opts.State), "bodies")
	}
	return ""
}

// Params returns the parameters in force.
func (rt *Runtime) Params() params.Params { return rt.params }

// Close releases the state. Results are already on Out.
func (rt *Runtime) Close() error {
	// The results file's record is written through the ledger's
	// connection, and the state's lock is dropped last.
	errs := []error{rt.closeResults(), rt.files.close()}
	if rt.warc != nil {
		errs = append(errs, rt.warc.Close())
	}
	if rt.tally != nil {
		errs = append(errs, rt.tally.close())
	}
	if rt.ledger != nil {
		errs = append(errs, rt.ledger.close())
	}
	if rt.store != nil {
		errs = append(errs, rt.store.Close())
	}
	errs = append(errs, rt.files.lock.release(), rt.files.outLock.release())
	return errors.Join(errs...)
}

// AcceptedAt is when ingest first accepted a URL of host in this process.
func (rt *Runtime) AcceptedAt(host string) (time.Time, bool) {
	return rt.tally.acceptedAt(host)
}

// counted is the ingester with the runtime's bookkeeping around it: the
// URLs of a batch it accepted are expected (owed a result), and so are
// those a full queue did not take when the caller holds them back
// (holding). A result that comes out during the call (a denied URL's, or a
// fast fetch's) makes its URL expected and done at once (tally.seen); the
// run cannot end meanwhile, since its input is not read yet.
type counted struct {
	inner ingesthandler.Ingester
	rt    *Runtime
}

func (c *counted) Ingest(ctx context.Context, p hostqueue.IngestParams, msgs []urlmsg.Message) hostqueue.IngestResult {
	res := c.inner.Ingest(ctx, p, msgs)
	keep := isHolding(ctx)
	want := make(map[string]string, len(msgs))
	hosts := map[string]bool{}
	for i, m := range msgs {
		err, failed := res.Failed[i]
		if !failed {
			hosts[m.Host] = true
		}
		if m.RefreshStop {
			// Answered under its own id during the ingest (before this
			// count) or, with no schedule to stop, by the engine: the
			// tally meets it as new. The schedule's last result comes
			// under the schedule's id.
			continue
		}
		if !failed || keep && errors.Is(err, hostqueue.ErrQueueFull) {
			want[m.ID] = m.URL
		}
	}
	c.rt.tally.expect(want)
	c.rt.tally.accept(hosts, time.Now())
	return res
}

// waker is the wake queue: ingest's wake-up reaches the shard's loop at
// once (a loop that is running takes it after its run).
type waker struct{ rt *Runtime }

func (w waker) Wake(_ context.Context, vshards []int) error {
	for _, v := range vshards {
		select {
		case w.rt.wakes[v%len(w.rt.wakes)] <- struct{}{}:
		default: // a wake-up is already waiting
		}
	}
	// A shard's loop that is in a run now hears of its new hosts there.
	if len(vshards) > 0 {
		for _, e := range w.rt.engines {
			e.Arrived()
		}
	}
	return nil
}

// wakeOnAppend wakes the shards of a batch's hosts as their appends land,
// up to appendWakeChunk of them at a time, instead of once the whole batch is in
// (ingest's wake-up): the first hosts of a 60,000-line list were worked
// only after the idle poll, a second after the start, while the rest of
// the list was still being queued.
func wakeOnAppend(s hostqueue.Store, w waker) hostqueue.Store {
	if b, ok := s.(hostqueue.BatchAppender); ok {
		return wakingBatch{Store: s, batch: b, w: w}
	}
	return s
}

// appendWakeChunk is how many of a batch's appends wakingBatch hands the
// store before it wakes their shards: SQLite's turn of appends.
const appendWakeChunk = sqlite.AppendChunk

type wakingBatch struct {
	hostqueue.Store
	batch hostqueue.BatchAppender
	w     waker
}

func (s wakingBatch) AppendBatch(ctx context.Context, reqs []hostqueue.AppendRequest) []hostqueue.AppendOutcome {
	out := make([]hostqueue.AppendOutcome, 0, len(reqs))
	// The first chunks are small and double up to appendWakeChunk: the
	// first hosts are due a few milliseconds into the batch instead of
	// after a whole turn of 4,096 appends (0.3 s of a 100,000-line list,
	// every host then waiting for it before its robots.txt).
	size := min(sqlite.GroupSize, appendWakeChunk)
	for lo := 0; lo < len(reqs); lo, size = lo+size, min(2*size, appendWakeChunk) {
		chunk := reqs[lo:min(lo+size, len(reqs))]
		res := s.batch.AppendBatch(ctx, chunk)
		var vs []int
		for i, o := range res {
			if o.Err == nil && o.Result.Activated {
				vs = append(vs, hostqueue.VirtualShard(chunk[i].Key))
			}
		}
		_ = s.w.Wake(ctx, vs)
		out = append(out, res...)
	}
	return out
}

// eachQueued hands f the URLs queued in the store, by id, a host's at a
// time: the work an earlier run left. Every host with queued URLs is in
// the due index.
func eachQueued(ctx context.Context, s hostqueue.Store, f func(map[string]string) error) error {
	far := time.Now().AddDate(100, 0, 0)
	for v := range hostqueue.VirtualShards {
		keys, err := s.DueHosts(ctx, v, far, math.MaxInt32)
		if err != nil {
			return fmt.Errorf("due hosts of virtual shard %d: %w", v, err)
		}
		for _, key := range keys {
			h, err := s.Load(ctx, key, 0)
			if errors.Is(err, hostqueue.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("load %s: %w", key, err)
			}
			if h.Pending == 0 && h.Refreshing == 0 {
				continue
			}
			if h, err = s.Load(ctx, key, max(h.Pending, h.Refreshing)); err != nil {
				return fmt.Errorf("load %s: %w", key, err)
			}
			out := make(map[string]string, len(h.Head))
			for _, e := range h.Head {
				out[e.ID] = e.URL
			}
			// A refreshing URL not fetched yet is owed its first result.
			for _, r := range h.Refreshes {
				if r.Seq == 0 && !r.Stop {
					out[r.ID] = r.URL
				}
			}
			if err := f(out); err != nil {
				return err
			}
		}
	}
	return nil
}

// queuedEntries lists the URLs queued in the store, by id (tests).
func queuedEntries(ctx context.Context, s hostqueue.Store) (map[string]string, error) {
	all := map[string]string{}
	err := eachQueued(ctx, s, func(m map[string]string) error {
		maps.Copy(all, m)
		return nil
	})
	return all, err
}

// Budget is the process's budget of host workers and connections.
func (rt *Runtime) Budget() engine.Budget { return rt.budget }

// HostsAtOnce is how many hosts the runtime works at most at once: its
// budget's workers at the bodies' cap (MaxBodyBytes), or the loops'
// MaxConcurrentHosts when lower.
func (rt *Runtime) HostsAtOnce() int {
	n := rt.engines[0].WorkerLimit(rt.params)
	if all := rt.params.MaxConcurrentHosts * rt.opts.ShardCount; n == 0 || all < n {
		n = all
	}
	return n
}

// activeFetcher notes when requests start, so a run can tell that this
// process is not working any host.
type activeFetcher struct {
	f                  engine.Fetcher
	last               *atomic.Int64
	requests, inFlight *atomic.Int64
}

func (a *activeFetcher) Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	a.last.Store(time.Now().UnixNano())
	a.requests.Add(1)
	a.inFlight.Add(1)
	defer a.inFlight.Add(-1)
	return a.f.Fetch(ctx, req)
}

func (a *activeFetcher) CloseHost(host string) { closeHost(a.f, host) }

// ServerAddr is the fetcher's (engine.ServerAddresser).
func (a *activeFetcher) ServerAddr(ctx context.Context, host string, cachedOnly bool) (netip.Addr, bool) {
	return serverAddr(ctx, a.f, host, cachedOnly)
}
