// Package engine is the check function's domain: one invocation owns some
// virtual shards (by lease), finds their due hosts, and works each host
// politely: one request at a time (or, for a host whose HostRules rule
// gives it several connections, one per connection: lanes.go), the next
// starting no sooner than the host's delay after the previous response
// ended, also across invocations.
// Results are published before the processed URLs leave the store, so a crash
// means a re-fetch, never a loss.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/backoff"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// Fetcher performs one GET (see package fetch).
type Fetcher interface {
	Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error)
}

// HostCloser is a Fetcher that closes the connections it keeps alive to a
// host name (fetch.Fetcher.CloseHost); a worker calls it when its session
// ends, so the idle pool holds the connections of active hosts only.
type HostCloser interface {
	CloseHost(host string)
}

// Clock is the engine's time source; tests may speed it up.
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx is done.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error { return backoff.Sleep(ctx, d) }

// SleepOrWake waits d, or less when wake or also closes first (woke), or
// until ctx is done.
func (RealClock) SleepOrWake(ctx context.Context, d time.Duration, wake, also <-chan struct{}) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-wake:
		return true, nil
	case <-also:
		return true, nil
	case <-t.C:
		return false, nil
	}
}

// WakeClock is a Clock whose sleep can also end when a channel closes: a
// lingering worker sleeps on it until it is told of new URLs (Appends) or
// a run wants its slot (a nil channel never closes). A Clock
// without it gets the same from Sleep on a goroutine of its own, which
// costs a goroutine and a context per sleep.
type WakeClock interface {
	SleepOrWake(ctx context.Context, d time.Duration, wake, also <-chan struct{}) (woke bool, err error)
}

const (
	// HeadBatch is how many URLs a host worker takes per round: its results
	// go out as one SQS batch and its progress as one store write.
	HeadBatch = 10
	// DefaultLeaseTTL is how long a shard lease lives without renewal.
	// Workers start a request only if the lease outlives it by the host's
	// delay (see pace), so a successor that takes over a crashed holder's
	// shard after expiry cannot come sooner than the delay.
	DefaultLeaseTTL = 45 * time.Second
	// idleTTL keeps an idle host's politeness state (last fetch) this long.
	idleTTL = 24 * time.Hour
	// CommitMargin is the time kept after the last fetch for publishing and
	// committing before the run ends.
	CommitMargin = 2 * time.Second
	// DefaultTick is RunRequest.Tick when it is not set.
	DefaultTick = time.Second
)

// Engine runs check invocations.
type Engine struct {
	Store     hostqueue.Store
	Publisher hostqueue.Publisher
	// Fetcher returns the fetcher for the parameters in force (its user
	// agent, timeout and body cap follow live parameter changes).
	Fetcher func(params.Params) Fetcher
	Params  func(ctx context.Context) params.Params
	// ParamsReady, when set, is called before a run does anything and
	// returns nil once the parameters have been read from where the
	// operator sets them (params.Cache.WaitLoaded), or an error when they
	// could not be by the time its context ends: the run then fails
	// instead of fetching with built-in defaults that may be less polite
	// than the operator's values (a shorter delay, a larger concurrency).
	ParamsReady func(ctx context.Context) error
	Clock       Clock
	Log         *slog.Logger
	// LeaseTTL overrides DefaultLeaseTTL (local runs with injected crashes
	// use a short one so takeovers are quick); leases are renewed every
	// quarter of it.
	LeaseTTL time.Duration
	// LingerPoll, when positive, is how often a lingering worker reads its
	// host's queue size, so URLs appended meanwhile are taken up at once
	// instead of when the linger ends (a period or two later). Zero reads
	// nothing: on DynamoDB each look is a billed read, and the linger
	// exists to save writes. An embedded store, whose reads cost nothing,
	// sets it (local mode).
	LingerPoll time.Duration
	// Appends, when set, tells lingering workers that URLs were appended
	// to their host's queue, so they take them up at once without reading
	// the store: for a process whose ingest runs beside its checks (local
	// mode), where a poll per lingering host would cost more CPU than the
	// fetching (see Appends).
	Appends *Appends
	// Finished, when set, tells that no URL will be queued for key any
	// more (local mode once its input is read and queued, and nothing of
	// key's is held back). A session that emptied such a host's queue
	// closes its connections at its end: kept idle, they would only hold a
	// descriptor, two goroutines and their buffers each until they timed
	// out, which adds up with thousands of hosts.
	// Nil: no host is ever finished (a queue on AWS takes URLs any time).
	Finished func(key string) bool
	// OnRefetch, when set, is told each refreshing URL's lag as it is
	// fetched (fetch time minus due time): local mode's progress line.
	// It must not block.
	OnRefetch func(lag time.Duration)
	// Spread, when set, is how long a host new to the run (no last fetch
	// stored or remembered) waits before its first request, given its
	// first delay: hosts that become due together then start spread over
	// that delay instead of in one burst of connects, and each keeps its
	// own phase from then on. Nil: the engine's startPacer. It may only
	// add time.
	Spread func(delay time.Duration) time.Duration
	// Budget bounds the host workers of all the engine's runs together
	// (one process: a wake-up's shards share it); each run is also capped
	// by MaxConcurrentHosts. The zero Budget bounds nothing more.
	Budget Budget
	// Admission, when set, also bounds the request rate the workers of
	// every run ask for together, found from how late requests start
	// (admission.go): local mode's, whose budget is a whole machine's.
	Admission *Admission
	// Bodies, when set, keeps page bodies larger than the inline limit
	// (InlineBodyBytes, capped by InlineLimit) out of the results: they are
	// streamed into it and the result points at them (see bodies.go).
	Bodies body.Store
	// InlineLimit, when positive, caps InlineBodyBytes: the largest body
	// whose result fits the output queue's message.
	InlineLimit int64
	// RunStart, when set, is when the run a give-up counts from began: a
	// failing host is given up only after a request made since then failed
	// (giveup.go). Local mode sets the process's start, so a failure run
	// that outlasted GiveUpAfter while nothing ran gets one probe first;
	// zero counts from each check invocation's start (AWS).
	RunStart time.Time
	// Placement, when set, keeps hosts in the shard of their server's
	// address (place.go): on AWS, where ingest placed them so; nil leaves
	// every host where it is stored (local mode: one process works every
	// shard).
	Placement *Placement
	// Gate, when set, spaces requests per server address (package server):
	// the process's one gate, shared by its runs and given to the fetcher
	// too (FetchGate), which meets it where a request's connection is
	// known. Each run opens it (server.Gate.Open) at RunStart when set,
	// else at the run's own start. Nil: politeness per host only.
	Gate *server.Gate
	// Metrics receives the run's metrics (requests, bytes, fetch latency,
	// politeness wait, robots denials, give-ups, hosts worked); nil
	// records nothing. Results are counted where they are published (see
	// wiring.CountResults), not here.
	Metrics *metrics.Recorder
	robots  robotsCache
	slots   slots
	// wanted is up while some run has due hosts waiting for a worker
	// slot: lingering workers sleep on it (level.go).
	wanted level
	// room is signalled when a worker gives back its slot or its admitted
	// rate: runs with due hosts waiting for one look again (run.sleep).
	room pulse
	// arrivals is signalled by Arrived: hosts became due in the store
	// (local mode's ingest appended to them); runs look again (run.sleep).
	arrivals pulse
	requests requestSlots
	starts   startPacer
}

// Arrived tells the engine's runs that hosts have just become due (local
// mode's ingest calls it as each chunk of a batch's appends lands). A run
// of a process with an Admission looks again at once (roomPause apart)
// instead of at its next tick: appends land over a second or more of a
// large list, and its hosts queued after a run's look waited out that
// run's tick, the median host of a 100,000-line list starting its first
// request 2.2 s after the process did (Colly's, 0.5 s).
func (e *Engine) Arrived() { e.arrivals.signal() }

// FetchTimeoutLimit is the FetchTimeout at and above which a run with
// window between its start and its deadline (RunRequest.Deadline) can never
// start a request: pace keeps CommitMargin after every request's timeout.
// A parameter cache bounds FetchTimeout below it
// (params.Cache.LimitFetchTimeout), so such a value is refused as invalid
// instead of silently making every run idle.
func FetchTimeoutLimit(window time.Duration) time.Duration {
	return window - CommitMargin
}

// leaseTTL is the lease duration for the parameters in force (see
// LeaseTTL), from Engine.LeaseTTL.
func (e *Engine) leaseTTL(p params.Params) time.Duration { return LeaseTTL(p, e.LeaseTTL) }

// RunRequest describes one invocation.
type RunRequest struct {
	Shard, ShardCount int
	// Owner identifies the invocation in leases (the request id).
	Owner string
	// Until is when the run stops starting requests; in-flight work is then
	// published and committed.
	Until time.Time
	// Deadline is when the invocation is killed: a request starts only if
	// it can time out and be committed before then. Zero means Until plus
	// the fetch timeout and a margin.
	Deadline time.Time
	// LeaseWait is how long to keep trying for a shard whose lease another
	// invocation holds (a predecessor finishing its in-flight requests).
	LeaseWait time.Duration
	// Tick is how often due hosts are looked up; zero means 1s.
	Tick time.Duration
	// Wake marks a run started because an ingest gave the shard new work
	// (not by the schedule): it ends at once when another run holds the
	// shard's leases (that run finds the work itself), and does not wait
	// for leases it could not take.
	Wake bool
}

// Summary reports what a run did.
type Summary struct {
	Shard         int                   `json:"shard"`
	VirtualShards []int                 `json:"virtualShards"`
	Leased        []int                 `json:"leased"`
	Hosts         int                   `json:"hosts"`
	Requests      int64                 `json:"requests"`
	Results       map[result.Status]int `json:"results"`
	Errors        int64                 `json:"errors"`
	// LocalErrors counts requests this process could not make for want of
	// its own resources (descriptors, the connection cap: fetch.KindLocal).
	// Their URLs stay queued, unharmed; any is a sign the Budget is wrong.
	LocalErrors int64 `json:"localErrors,omitempty"`
}

type run struct {
	engine *Engine
	req    RunRequest
	// owned are the virtual shards of the run's shard; leased those it
	// has held at some point (the Summary's).
	owned, leased []int
	start         time.Time
	// lastRenew is when the leases were last renewed in full (or the
	// LeaseWait ran out); zero asks for a renewal at the next turn.
	lastRenew time.Time
	// rechecked is set once the run let its leases go when idle and then
	// took them again because a host fell due meanwhile.
	rechecked bool
	mu        sync.Mutex
	active    map[string]bool
	held      map[int]time.Time // lease expiry by virtual shard; zero: not held
	crashed   atomic.Bool
	crashFn   CrashFunc
	// lastFetch remembers, per host, when this run's last response ended,
	// in case the store could not record it.
	lastFetch map[string]time.Time
	// unrecorded is set when a host's last fetch could not be stored: the
	// run then keeps its leases until they expire instead of handing them
	// over early, so nobody can come back to that host before the delay.
	unrecorded atomic.Bool
	// starved is set while the dispatcher has due hosts and no free worker
	// slot for them: lingering workers then give theirs up.
	starved atomic.Bool
	// arrived is closed by the first Arrived after the current turn began.
	arrived <-chan struct{}
	// budgetStarved is starved because the process's Budget had no slot;
	// it is counted in the engine's slots.starved.
	budgetStarved bool
	hosts         int
	// pending is each worked host's queue length as last read: the
	// URLsPending sample.
	pending map[string]int
	results map[result.Status]int
	reqs    atomic.Int64
	errs    atomic.Int64
	local   atomic.Int64
	wg      sync.WaitGroup
}

// turnEnd is what one turn of a run's loop decided.
type turnEnd int

const (
	// turnNext: wait a tick, then take the next turn.
	turnNext turnEnd = iota
	// turnAgain: take the next turn at once (the run let its leases go
	// when idle and found a host due meanwhile).
	turnAgain
	// turnOver: the run is over.
	turnOver
)

// Run performs one invocation of a shard's check. It returns when Until has
// passed and every host worker has committed.
func (e *Engine) Run(ctx context.Context, req RunRequest) (Summary, error) {
	if req.ShardCount < 1 || req.ShardCount > hostqueue.VirtualShards || req.Shard < 0 || req.Shard >= req.ShardCount {
		return Summary{}, fmt.Errorf("shard %d of %d: shard must be in [0, shardCount) and shardCount in [1, %d]", req.Shard, req.ShardCount, hostqueue.VirtualShards)
	}
	if req.Tick <= 0 {
		req.Tick = DefaultTick
	}
	if e.ParamsReady != nil {
		// Waiting is bounded by the run: it could not fetch anyway.
		wctx, cancel := context.WithDeadline(ctx, req.Until)
		err := e.ParamsReady(wctx)
		cancel()
		if err != nil {
			return Summary{Shard: req.Shard}, fmt.Errorf("shard %d: not fetching with built-in parameters: %w", req.Shard, err)
		}
	}
	r := &run{
		engine: e, req: req, owned: hostqueue.OwnedShards(req.Shard, req.ShardCount), start: e.Clock.Now(),
		active: map[string]bool{}, held: map[int]time.Time{}, results: map[result.Status]int{},
		lastFetch: map[string]time.Time{}, pending: map[string]int{},
	}
	r.crashFn, _ = ctx.Value(crashKey{}).(CrashFunc)
	if e.Gate != nil {
		// What a run before this one (another process, an earlier
		// invocation) sent to an address is unknown: its gate starts
		// closed for a delay.
		if e.RunStart.IsZero() {
			e.Gate.Open(r.start)
		} else {
			e.Gate.Open(e.RunStart)
		}
	}
	for {
		now := e.Clock.Now()
		if !now.Before(req.Until) || ctx.Err() != nil || r.crashed.Load() {
			break
		}
		p := e.Params(ctx)
		// Taken before the turn's look: hosts that arrive during it count.
		r.arrived = e.arrivals.wait()
		end := r.turn(ctx, now, p)
		if end == turnOver {
			break
		}
		if end == turnAgain {
			continue
		}
		if err := r.sleep(ctx, now, p); err != nil {
			break
		}
	}
	return r.finish(ctx)
}

// turn is one look at the run's shards: keep the leases, start workers for
// their due hosts, and end the run when it has nothing left to do.
func (r *run) turn(ctx context.Context, now time.Time, p params.Params) turnEnd {
	r.keepLeases(ctx, now, r.engine.leaseTTL(p))
	// A wake-up that finds the shard held, or races another run for it and
	// gets only part, hands back what it got: the other run works the
	// shard.
	if r.req.Wake && len(r.leased) == 0 && r.heldCount() < len(r.owned) {
		r.release(ctx)
		return turnOver
	}
	r.dispatchAll(ctx, p, now)
	// A wake-up, or a run that let its shard go when idle and found another
	// run holding it on coming back, leaves the work to that run instead
	// of waiting for it.
	if (r.req.Wake || r.rechecked) && r.heldCount() == 0 {
		return turnOver
	}
	if r.idle(ctx) {
		return r.letGo(ctx)
	}
	return turnNext
}

// keepLeases renews the leases every quarter of their TTL, and retries
// those it lacks at every turn while the LeaseWait lasts.
func (r *run) keepLeases(ctx context.Context, now time.Time, ttl time.Duration) {
	waiting := r.heldCount() < len(r.owned) && now.Sub(r.start) < r.req.LeaseWait
	if now.Sub(r.lastRenew) < ttl/4 && !waiting {
		return
	}
	r.renew(ctx, r.owned, now, ttl)
	if r.heldCount() == len(r.owned) || now.Sub(r.start) >= r.req.LeaseWait {
		r.lastRenew = now
	}
}

// dispatchAll starts workers for the due hosts of every held shard, and
// records whether some had to wait for a worker slot.
func (r *run) dispatchAll(ctx context.Context, p params.Params, now time.Time) {
	// The shards' due hosts are looked up side by side: on a loaded table
	// one query after another would hold back the first requests of a run.
	var starved, budget atomic.Bool
	var dispatched sync.WaitGroup
	for _, v := range r.owned {
		if !r.holding(v) {
			continue
		}
		r.leased = appendOnce(r.leased, v)
		dispatched.Go(func() {
			s, b := r.dispatch(ctx, v, p, now)
			if s {
				starved.Store(true)
			}
			if b {
				budget.Store(true)
			}
		})
	}
	dispatched.Wait()
	r.setStarved(starved.Load())
	r.setBudgetStarved(budget.Load())
}

// idle reports whether the run has nothing to do before its end: once
// every shard is leased (or for a wake-up, or after a recheck), no worker
// is busy and no host falls due before Until. Idle costs nothing: an
// ingest that gives the shard new work wakes it (or the next scheduled
// invocation comes).
func (r *run) idle(ctx context.Context) bool {
	return (r.heldCount() == len(r.owned) || r.req.Wake || r.rechecked) &&
		r.activeCount() == 0 && !r.dueBefore(ctx, r.owned, r.req.Until)
}

// letGo ends an idle run: it hands its leases back and looks once more. A
// host activated just before the leases go back woke the shard while this
// run still held them, and that wake-up gave way: the run then takes the
// shard again at once (turnAgain). A run that could not store a last fetch
// keeps its leases until they expire (see finish).
func (r *run) letGo(ctx context.Context) turnEnd {
	if r.unrecorded.Load() {
		return turnOver
	}
	r.release(ctx)
	if r.rechecked || !r.dueBefore(ctx, r.owned, r.req.Until) {
		return turnOver
	}
	r.rechecked, r.lastRenew = true, time.Time{}
	return turnAgain
}

// tick is the wait before the next turn: shorter while leases are still
// being waited for, never past Until.
func (r *run) tick(now time.Time, p params.Params) time.Duration {
	tick := min(r.req.Tick, p.CheckHostPeriod/2)
	if r.heldCount() < len(r.owned) && now.Sub(r.start) < r.req.LeaseWait {
		tick = min(tick, 250*time.Millisecond)
	}
	return min(tick, r.req.Until.Sub(now))
}

// roomPause is the least a run whose due hosts wait for room sleeps
// between looks: hosts admitted together end together, and a look for
// each of a thousand was a thousand reads of the store in a second.
const roomPause = 100 * time.Millisecond

// sleep waits for the run's next turn: its tick, or, in a process with an
// Admission (local mode), while its latest dispatch left due hosts waiting
// for a worker slot or the admission, until a worker makes room, and
// otherwise until hosts arrive (Arrived); roomPause passes first. Waiting out the tick instead, the hosts of a wave
// that ended together were replaced up to a second late, and at 10,000
// hosts of a few URLs each such wave left the process half idle for that
// second. Without an Admission (a Lambda function, a budget of a few
// hundred workers) the tick stays: each look is a query of the due index,
// paid for, and up to ten a second per starved run would cost more than
// the fraction of a second it saves.
func (r *run) sleep(ctx context.Context, now time.Time, p params.Params) error {
	d := r.tick(now, p)
	if r.engine.Admission == nil || d <= roomPause {
		return r.engine.Clock.Sleep(ctx, d)
	}
	// A run left with due hosts waiting for room looks again when room is
	// made; one that admitted all it found, when more arrive (Arrived).
	// Taken first: room made during the pause counts.
	wake := r.arrived
	if r.starved.Load() {
		wake = r.engine.room.wait()
	}
	if err := r.engine.Clock.Sleep(ctx, roomPause); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-wake:
			cancel()
		case <-wctx.Done():
		}
	}()
	if err := r.engine.Clock.Sleep(wctx, d-roomPause); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// finish waits for the run's workers and hands its leases back, unless a
// host's last fetch could not be stored (the leases then run out, so
// nobody comes back to that host before its delay) or a crash was
// injected (a dead process releases nothing).
func (r *run) finish(ctx context.Context) (Summary, error) {
	r.setStarved(false)
	r.setBudgetStarved(false)
	r.wg.Wait()
	r.samplePending()
	if r.crashed.Load() {
		return r.summary(), ErrCrashed
	}
	if r.unrecorded.Load() {
		r.engine.Log.WarnContext(ctx, "keeping shard leases until they expire: a host's last fetch could not be stored", "shard", r.req.Shard)
		return r.summary(), nil
	}
	r.release(ctx)
	return r.summary(), nil
}

// release hands back every lease the run holds, so the next run starts at
// once.
func (r *run) release(ctx context.Context) {
	r.mu.Lock()
	var held []int
	now := r.engine.Clock.Now()
	for v, until := range r.held {
		if until.After(now) {
			held = append(held, v)
		}
	}
	clear(r.held)
	r.mu.Unlock()
	for _, v := range held {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := r.engine.Store.ReleaseShard(rctx, v, r.req.Owner); err != nil {
			r.engine.Log.WarnContext(ctx, "release shard lease", "vshard", v, "error", err)
		}
		cancel()
	}
}

// ErrCrashed is returned by Run when an injected crash stopped it.
var ErrCrashed = errors.New("check run crashed (injected fault)")

func (r *run) summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Summary{
		Shard: r.req.Shard, VirtualShards: r.owned, Leased: r.leased, Hosts: r.hosts,
		Requests: r.reqs.Load(), Results: r.results, Errors: r.errs.Load(), LocalErrors: r.local.Load(),
	}
}

// setStarved records whether the run's latest dispatch left a due host
// waiting for a worker slot, and counts the run in the engine's wanted
// level while it did, which wakes lingering workers.
func (r *run) setStarved(b bool) {
	if r.starved.Swap(b) == b {
		return
	}
	if b {
		r.engine.wanted.add(1)
	} else {
		r.engine.wanted.add(-1)
	}
}

// setBudgetStarved records whether the run's latest dispatch found the
// process's Budget full, in the engine's count of such runs, which every
// run's lingering workers read.
func (r *run) setBudgetStarved(b bool) {
	if b == r.budgetStarved {
		return
	}
	r.budgetStarved = b
	if b {
		r.engine.slots.starved.Add(1)
	} else {
		r.engine.slots.starved.Add(-1)
	}
}

// wanted tells a lingering worker to give its slot up: its run, or another
// run of the process, has due hosts and no slot for them.
func (r *run) wanted() bool {
	return r.starved.Load() || r.engine.slots.starved.Load() > 0
}

// CrashPoint names a place where a real invocation can die; fault
// injection (WithCrash) is asked at each.
type CrashPoint string

// The crash points, in the order a round passes them.
const (
	// CrashFetched is after a fetch, mid-batch: results not yet published.
	CrashFetched CrashPoint = "fetched"
	// CrashBeforePublish is before results are handed to the publisher.
	CrashBeforePublish CrashPoint = "before-publish"
	// CrashAfterPublish is after results were sent and before the host's
	// state records them.
	CrashAfterPublish CrashPoint = "after-publish"
)

// CrashFunc is asked at every CrashPoint with the entry id (CrashFetched)
// or the host's queue key. True makes the whole run stop at once, as if the
// process were killed: nothing more is published or committed and leases
// are not released.
type CrashFunc func(point CrashPoint, key string) bool

type crashKey struct{}

// WithCrash returns a context whose check run consults crash: the local
// runner's fault injection. Production contexts carry none.
func WithCrash(ctx context.Context, crash CrashFunc) context.Context {
	return context.WithValue(ctx, crashKey{}, crash)
}

// crash asks the fault injector whether the run dies at this point.
func (r *run) crash(point CrashPoint, key string) bool {
	if r.crashed.Load() {
		return true
	}
	if r.crashFn != nil && r.crashFn(point, key) {
		r.crashed.Store(true)
		return true
	}
	return false
}

func appendOnce(s []int, v int) []int {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func (r *run) heldCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	now := r.engine.Clock.Now()
	for _, until := range r.held {
		if until.After(now) {
			n++
		}
	}
	return n
}

func (r *run) holding(v int) bool {
	return r.leaseLeft(v) > 0
}

// leaseLeft is how long the run's lease on v is still valid.
func (r *run) leaseLeft(v int) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[v].Sub(r.engine.Clock.Now())
}

// renew takes or renews the lease of every owned virtual shard. A lease that
// cannot be renewed is given up at once: its hosts' workers stop before
// their next request.
func (r *run) renew(ctx context.Context, owned []int, now time.Time, ttl time.Duration) {
	// Side by side: the first dispatch waits for these writes.
	var wg sync.WaitGroup
	for _, v := range owned {
		wg.Go(func() {
			until := now.Add(ttl)
			ok, err := r.engine.Store.AcquireShard(ctx, v, r.req.Owner, until, now)
			if err != nil {
				// The lease may or may not have been renewed: keep the
				// expiry known so far, which workers respect anyway.
				r.errs.Add(1)
				r.engine.Log.ErrorContext(ctx, "lease shard", "vshard", v, "error", err)
				return
			}
			r.mu.Lock()
			if ok {
				r.held[v] = until
			} else {
				delete(r.held, v)
			}
			r.mu.Unlock()
		})
	}
	wg.Wait()
}

// dispatch starts a worker for every due host of vshard not already active.
// It reports whether a due host had to wait for a free worker slot, and
// whether that was for want of a slot in the process's Budget.
func (r *run) dispatch(ctx context.Context, v int, p params.Params, now time.Time) (starved, budget bool) {
	// Active hosts may be among the due ones; asking for one more than the
	// cap covers them and still shows a host left waiting. With a budget
	// the cap is also what the process has room for: a large
	// MaxConcurrentHosts then does not read thousands of keys a tick only
	// to find no slot for them.
	workers := r.engine.Budget.Workers(r.engine.keptBody(p))
	want := p.MaxConcurrentHosts
	if workers > 0 {
		want = min(want, r.activeCount()+max(0, workers-r.engine.slots.inUse()))
	}
	// On AWS the names of one server address share a shard
	// (hostqueue.Place). When more of them are due than a look takes, the
	// look is all hosts the gate holds back: it reads on past them (a
	// longer look, up to maxDueLook times the first), so the shard's other
	// hosts do not wait for the whole address.
	d := &dispatching{v: v, p: p, now: now, workers: workers, seen: map[string]bool{}}
	first := want + 1
	for look := first; ; {
		held, more := r.dispatchLook(ctx, d, look)
		if !more || held == 0 || d.starved || look >= maxDueLook*first {
			return d.starved, d.budget
		}
		look = min(look+held, maxDueLook*first)
	}
}

// maxDueLook bounds how far a dispatch reads past held hosts, in first
// looks: each longer look reads the first one's keys again.
const maxDueLook = 8

// dispatching is one dispatch of a shard, over its looks.
type dispatching struct {
	v       int
	p       params.Params
	now     time.Time
	workers int // the Budget's worker limit, 0 for none
	seen    map[string]bool
	// starved: a due host had to wait for a worker slot; budget: for want
	// of one in the process's Budget.
	starved, budget bool
}

// dispatchLook starts a worker for each host of one due look of look keys
// that no earlier look of d named. It returns how many of them the server
// gate held back, and whether the look was full (more may be due).
func (r *run) dispatchLook(ctx context.Context, d *dispatching, look int) (held int, more bool) {
	v, p := d.v, d.p
	keys, err := r.engine.Store.DueHosts(ctx, v, d.now, look)
	if err != nil {
		r.errs.Add(1)
		r.engine.Log.ErrorContext(ctx, "find due hosts", "vshard", v, "error", err)
		return 0, false
	}
	more = len(keys) >= look
	for _, key := range keys {
		if d.seen[key] {
			continue
		}
		d.seen[key] = true
		r.mu.Lock()
		if r.active[key] {
			r.mu.Unlock()
			continue
		}
		if len(r.active) >= p.MaxConcurrentHosts {
			r.mu.Unlock()
			d.starved = true
			continue
		}
		if r.engine.heldForServer(p, key) {
			// Due, but its address is busy for longer than the host
			// waits for itself: a later look takes it up.
			r.mu.Unlock()
			held++
			continue
		}
		rate := hostRate(p, key)
		admission := r.engine.Admission
		if admission != nil && !admission.take(rate) {
			r.mu.Unlock()
			d.starved, d.budget = true, true
			continue
		}
		if !r.engine.slots.take(d.workers) {
			if admission != nil {
				admission.give(rate)
			}
			r.mu.Unlock()
			d.starved, d.budget = true, true
			continue
		}
		r.active[key] = true
		r.hosts++
		r.mu.Unlock()
		r.engine.Metrics.Add(metrics.HostsWorked, 1)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			var gave sync.Once
			give := func() {
				if admission != nil {
					gave.Do(func() {
						admission.give(rate)
						r.engine.room.signal()
					})
				}
			}
			defer func() {
				r.mu.Lock()
				delete(r.active, key)
				r.mu.Unlock()
				r.engine.slots.give()
				give()
				r.engine.room.signal()
			}()
			w := &worker{run: r, key: key, vshard: v, p: p, doneRequesting: give}
			if err := w.work(ctx); err != nil && !errors.Is(err, ErrCrashed) {
				r.errs.Add(1)
				r.engine.Log.ErrorContext(ctx, "work host", "host", key, "error", err)
			}
		}()
	}
	return held, more
}

func (r *run) activeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.active)
}

// dueBefore tells whether any host of the owned shards is due before t. On
// a store error it answers true, so the run keeps going.
//
// A store that can answer from its due index alone (hostqueue.LookAhead)
// does: the hosts due later than now are not read before they are due.
func (r *run) dueBefore(ctx context.Context, owned []int, t time.Time) bool {
	ahead, _ := r.engine.Store.(hostqueue.LookAhead)
	for _, v := range owned {
		if ahead != nil {
			if due, err := ahead.AnyDueBy(ctx, v, t); err != nil || due {
				return true
			}
			continue
		}
		keys, err := r.engine.Store.DueHosts(ctx, v, t, 1)
		if err != nil || len(keys) > 0 {
			return true
		}
	}
	return false
}

// notePending records a worked host's queue length as last read.
func (r *run) notePending(key string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending[key] = n
}

// samplePending records the URLsPending sample of the run's shard: the
// URLs still queued, as last read, in the hosts it worked. Hosts not due
// are never read, so it is a lower bound of the shard's backlog, cheap
// (no read of its own): a growing one means the shard falls behind.
func (r *run) samplePending() {
	if r.engine.Metrics == nil || r.crashed.Load() {
		return
	}
	r.mu.Lock()
	n := 0
	for _, p := range r.pending {
		n += p
	}
	r.mu.Unlock()
	r.engine.Metrics.AddBy(metrics.URLsPending, metrics.DimShard, strconv.Itoa(r.req.Shard), float64(n))
}

// remember records a host's last response end in memory.
func (r *run) remember(key string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.After(r.lastFetch[key]) {
		r.lastFetch[key] = t
	}
}

// remembered returns the last response end this run saw on a host.
func (r *run) remembered(key string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastFetch[key]
}

func (r *run) count(results []result.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, res := range results {
		r.results[res.Status]++
	}
}
