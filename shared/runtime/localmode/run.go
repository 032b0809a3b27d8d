package localmode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
)

// RunOptions say what a run works on and when it ends.
type RunOptions struct {
	// Input, when set, is read into the downloader (see Input).
	Input *Input
	// Serve keeps the run going after every URL has its result, for URLs
	// that come through Handler, until ctx ends.
	Serve bool
}

// Report is the outcome of a run.
type Report struct {
	Input InputReport `json:"input"`
	// Resumed counts the URLs an earlier run left queued in the state.
	Resumed int `json:"resumed"`
	// Expected counts the URLs owed a result in this run: resumed, newly
	// accepted, and the targets of cross-host redirects.
	Expected   int                   `json:"expected"`
	Results    int                   `json:"results"`
	ByStatus   map[result.Status]int `json:"byStatus"`
	Duplicates int                   `json:"duplicates"`
	// Missing are the URLs still owed a result when the run stopped, by
	// id (the first maxMissing of MissingCount); they are still queued or
	// held back in the state for the next run.
	Missing      map[string]string `json:"missing,omitempty"`
	MissingCount int               `json:"missingCount,omitempty"`
	// DoneElsewhere counts the URLs owed a result here that another
	// process on the same state finished (their results are in its output).
	DoneElsewhere int `json:"doneElsewhere,omitempty"`
	// Requests counts the HTTP requests the check runs made; CheckRuns the
	// check invocations.
	Requests  int64         `json:"requests"`
	CheckRuns int           `json:"checkRuns"`
	Elapsed   time.Duration `json:"elapsed"`
	// Stopped is set when the run ended because ctx did (Ctrl-C, a
	// timeout), not because every URL had its result.
	Stopped bool `json:"stopped"`
}

// Run works until every URL owed a result has one (and, with an input,
// the input is read to its end), or until ctx ends: then it stops cleanly
// (no new request; requests in flight finish, and their results are
// written and committed, within FetchTimeout and a margin), leaving the
// rest queued in the state for the next run. Run may be called once.
func (rt *Runtime) Run(ctx context.Context, ro RunOptions) (Report, error) {
	start := time.Now()
	rt.lastFetch.Store(start.UnixNano())
	// The engine's context ends only when a clean stop overruns its grace:
	// stopping is the stop clock's job.
	ectx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()

	var loops sync.WaitGroup
	var cmu sync.Mutex
	var requests int64
	var runs int
	for s := range rt.opts.ShardCount {
		loops.Go(func() {
			n, reqs := rt.shardLoop(ectx, s)
			cmu.Lock()
			runs += n
			requests += reqs
			cmu.Unlock()
		})
	}

	var inRep InputReport
	inDone := make(chan error, 1)
	if ro.Input != nil {
		go func() {
			var err error
			inRep, err = rt.feed(ectx, *ro.Input, rt.clock.stop)
			inDone <- err
		}()
	}
	fed := ro.Input == nil
	rt.inputEnded.Store(fed && !ro.Serve)
	// The overflow loop queues held-back URLs as their hosts drain, for
	// this run's input and for what an earlier run held back.
	overDone := make(chan error, 1)
	go func() { overDone <- rt.over.run(ectx, rt.clock.stop) }()

	var runErr error
	stopped := false
	quiet := time.NewTicker(quietAfter)
	defer quiet.Stop()
	var nextSettle time.Time
	settleEvery := quietAfter
wait:
	for {
		if fed && !ro.Serve && rt.tally.outstanding() == 0 {
			// Anything queued that no result has been written for (it came
			// in some way the tally did not see) is owed one too.
			added := 0
			err := eachQueued(ectx, rt.store, func(queued map[string]string) error {
				added += rt.tally.expect(queued)
				return rt.tally.Err()
			})
			if err != nil {
				runErr = fmt.Errorf("read queued urls: %w", err)
				break
			}
			if added == 0 {
				// Refreshing URLs keep a job going until it is stopped
				// (or --timeout ends it): the next run goes on with them.
				n, _, err := rt.store.Refreshing(ectx)
				if err != nil {
					runErr = err
					break
				}
				if n == 0 {
					break
				}
			}
		}
		select {
		case <-quiet.C:
			// This process works no host while URLs are owed a result:
			// another process on the same state may hold their shards
			// and have done them.
			if fed && !ro.Serve && rt.tally.outstanding() > 0 && time.Since(time.Unix(0, rt.lastFetch.Load())) >= quietAfter && !time.Now().Before(nextSettle) {
				n, err := rt.settleElsewhere(ectx)
				if err != nil {
					runErr = err
					break wait
				}
				// Hosts held back (Retry-After, back-off) also make a
				// process quiet: look less often while nothing settles.
				if settleEvery = min(2*settleEvery, time.Minute); n > 0 {
					settleEvery = quietAfter
				}
				nextSettle = time.Now().Add(settleEvery)
			}
		case <-ctx.Done():
			stopped = true
			break wait
		case err := <-inDone:
			fed = true
			if err != nil {
				runErr = err
				break wait
			}
			rt.inputEnded.Store(!ro.Serve)
			if !ro.Serve {
				for _, e := range rt.engines {
					e.CloseFinished()
				}
			}
		case <-rt.out.Failed():
			runErr = rt.out.Err()
			break wait
		case <-rt.faults.stopped():
			runErr = rt.faults.err()
			break wait
		case err := <-overDone:
			runErr = err
			overDone <- nil // read again below
			break wait
		case <-rt.tally.broken:
			runErr = rt.tally.Err()
			break wait
		case <-rt.tally.empty:
		}
	}

	rt.clock.Stop()
	grace := rt.params.FetchTimeout + 10*time.Second
	timer := time.AfterFunc(grace, hardStop)
	loops.Wait()
	timer.Stop()
	if ro.Input != nil && !fed {
		if err := <-inDone; err != nil && runErr == nil {
			runErr = err
		}
	}
	// A refill under way is finished: its URLs are queued and out of the
	// overflow, or still in it.
	if err := <-overDone; err != nil && runErr == nil {
		runErr = err
	}

	// Values recorded after an invocation's flush (ingest's last batch,
	// a check run ended by the stop) are written now.
	if err := rt.opts.Metrics.Flush(); err != nil {
		rt.log.Error("write metrics", "error", err)
	}

	rep := Report{Input: inRep, Resumed: rt.Resumed, DoneElsewhere: rt.tally.elsewhere(), Requests: requests, CheckRuns: runs, Elapsed: time.Since(start), Stopped: stopped}
	t := rt.tally
	t.mu.Lock()
	rep.Expected, rep.Results, rep.Duplicates = t.expected, t.results, t.duplicates
	rep.ByStatus = make(map[result.Status]int, len(t.byStatus))
	for k, v := range t.byStatus {
		rep.ByStatus[k] = v
	}
	t.mu.Unlock()
	rep.MissingCount = t.outstanding()
	if m := t.missing(maxMissing); len(m) > 0 {
		rep.Missing = m
	}
	return rep, damaged(rt.opts.State, rt.faultOf(runErr))
}

// faultOf is the run's error as a disk fault when one stopped it: the
// first one noted, or runErr when a write of ingest, the ledger or the
// tally to the state met one.
func (rt *Runtime) faultOf(runErr error) error {
	if err := rt.faults.err(); err != nil {
		return err
	}
	var fault *DiskFaultError
	if IsDiskFault(runErr) && !errors.As(runErr, &fault) {
		where := "state " + rt.opts.State
		if rt.opts.State == "" {
			where = "scratch state in " + os.TempDir()
		}
		return &DiskFaultError{Where: where, Path: rt.opts.State, Err: runErr}
	}
	return runErr
}

// maxMissing bounds Report.Missing: a stopped job of millions of lines
// would otherwise list them all in memory.
const maxMissing = 1000

// quietAfter is how long without a request of its own makes a run with
// URLs still owed a result look whether another process finished them.
const quietAfter = 2 * time.Second

// settleElsewhere drops from the URLs owed a result those no longer queued
// in the state: another process on the same state published their results
// and committed them. Only once the input is read: a URL being ingested is
// owed a result before it is queued.
// It returns how many it dropped.
func (rt *Runtime) settleElsewhere(ctx context.Context) (int, error) {
	n, err := rt.tally.settle(ctx, func(add func([]string) error) error {
		return eachQueued(ctx, rt.store, func(queued map[string]string) error {
			return add(slices.Collect(maps.Keys(queued)))
		})
	})
	if err != nil {
		return 0, fmt.Errorf("read queued urls: %w", err)
	}
	return n, nil
}

// shardLoop is the schedule of one shard: check invocations back to back
// while the shard has work, the next one at once when ingest wakes it, and
// otherwise every idlePoll for hosts falling due after a pause (on AWS the
// schedule's rate(1 minute)). It returns when the run stops.
func (rt *Runtime) shardLoop(ctx context.Context, shard int) (runs int, requests int64) {
	for !rt.clock.Stopping() {
		ictx, cancel := context.WithTimeout(ctx, rt.opts.CheckRun+checkSlack)
		sum, err := rt.checks[shard].Handle(ictx, checkhandler.Event{Shard: &shard})
		cancel()
		runs++
		requests += sum.Requests
		if err != nil && !rt.clock.Stopping() && ctx.Err() == nil {
			rt.log.Error("check invocation failed", "shard", shard, "error", err)
		}
		if sum.Hosts > 0 && err == nil {
			continue
		}
		poll := time.NewTimer(idlePoll)
		select {
		case <-rt.clock.stop:
		case <-rt.wakes[shard]:
		case <-poll.C:
		}
		poll.Stop()
	}
	return runs, requests
}

// stopClock is the wall clock with an off switch for a clean stop. Once
// stopped, every Sleep returns at once with an error, and the engine sleeps
// before every request (pace), while lingering and between its ticks: so
// no request starts any more, lingering workers let go, and runs end, while
// requests in flight finish and their rounds are published and committed.
type stopClock struct {
	stop chan struct{}
	once sync.Once
}

var (
	_ engine.Clock     = (*stopClock)(nil)
	_ engine.WakeClock = (*stopClock)(nil)
)

var errStopping = errors.New("local run stopping")

func newStopClock() *stopClock { return &stopClock{stop: make(chan struct{})} }

func (c *stopClock) Now() time.Time { return time.Now() }

func (c *stopClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.Stopping() {
		return errStopping
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return errStopping
	case <-t.C:
		return nil
	}
}

// SleepOrWake is Sleep that also ends, without an error, when wake or also
// closes (engine.WakeClock).
func (c *stopClock) SleepOrWake(ctx context.Context, d time.Duration, wake, also <-chan struct{}) (bool, error) {
	if c.Stopping() {
		return false, errStopping
	}
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-c.stop:
		return false, errStopping
	case <-wake:
		return true, nil
	case <-also:
		return true, nil
	case <-t.C:
		return false, nil
	}
}

// Stop starts the clean stop.
func (c *stopClock) Stop() { c.once.Do(func() { close(c.stop) }) }

// Stopping tells whether the clean stop has begun.
func (c *stopClock) Stopping() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}
