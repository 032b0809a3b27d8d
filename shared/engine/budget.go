package engine

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// Budget bounds what one process holds at once across every check run it
// works, the several shards of a wake-up batch included: host workers,
// derived from the memory they may fill and the connections they may open.
// The zero Budget bounds nothing (MaxConcurrentHosts alone caps each run).
type Budget struct {
	// Memory is how many bytes the process's host workers may hold at once
	// (bodies being read, results on their way to the output queue); each
	// worker is counted at WorkerBytes. Zero: no memory bound.
	Memory int64
	// Conns is how many fetch connections the process may hold open, in
	// use and idle. A worker keeps one to its host, in use or idle between
	// requests; now and then one more, to another origin of its queue (a
	// robots.txt redirected elsewhere, http and https of one name):
	// workers are at most seven eighths of Conns. Connections of hosts
	// whose session ended stay idle for their next one only while there is
	// room: at the cap the fetcher closes the one idle longest before it
	// dials. Zero: no connection bound.
	Conns int
	// Requests is how many requests the process has in flight at once;
	// a worker whose host is due waits for a slot before its request
	// starts, so its timeout (FetchTimeout) runs only once the process
	// can serve it. Without it, thousands of hosts due in the same second
	// on a small machine queue for its CPU inside their requests, and some
	// time out against a healthy site. Zero: no bound (a Lambda function's
	// workers are few enough).
	Requests int
}

// Bytes a worker holds besides its bodies: its connection's buffers (4 KiB
// each way, TLS records up to 16 KiB each way), goroutine stacks, the head
// entries and politeness state it loaded.
const workerOverhead = 64 << 10

// handOffBytes is how much of a worker's results it keeps before handing
// them to the publisher: one SQS batch's worth (256 KiB). Results that
// would not share a batch gain nothing by waiting for each other, and a
// round of small ones still goes out as one batch (see handOff).
const handOffBytes = 256 << 10

// WorkerBytes is the memory one host worker may hold at once when bodies
// are cut at maxBody: the body being read, the results it keeps before
// handing them over (at most handOffBytes, or one body when a body is
// larger), the results the publisher is sending for it (as much again) and
// their encoded message (at most one SQS batch, handOffBytes), plus
// workerOverhead. With a body store, bodies are held up to InlineBodyBytes
// (240 KiB by default; Engine.keptBody): 1.05 MiB.
//
// A robots.txt is read up to robots.MaxBytes (500 KiB) whatever maxBody
// says; it is not counted: it is read once per host session, most are a
// few KiB, and GOMEMLIMIT (set from the function's memory) absorbs the
// rare large one.
func WorkerBytes(maxBody int64) int64 {
	held := max(maxBody, handOffBytes)
	return maxBody + 2*held + handOffBytes + workerOverhead
}

// Workers is how many host workers the process may run at once with bodies
// cut at maxBody; zero means no bound. It is never below 1 while bounded: a
// process that can hold no worker would never make progress, and one is
// what any function must afford.
func (b Budget) Workers(maxBody int64) int {
	n := 0
	if b.Memory > 0 {
		n = max(1, int(b.Memory/WorkerBytes(maxBody)))
	}
	if b.Conns > 0 {
		c := max(1, b.Conns-b.Conns/8)
		if n == 0 || c < n {
			n = c
		}
	}
	return n
}

// requestSlots bounds the requests in flight (Budget.Requests).
type requestSlots struct {
	once sync.Once
	ch   chan struct{}
}

// acquire waits for a request slot, or until ctx ends; limit 0 bounds
// nothing.
func (s *requestSlots) acquire(ctx context.Context, limit int) (release func(), err error) {
	if limit <= 0 {
		return func() {}, nil
	}
	s.once.Do(func() { s.ch = make(chan struct{}, limit) })
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// slots counts the host workers of every run of one engine (one process):
// the budget is shared, whatever number of shards the process works.
type slots struct {
	mu   sync.Mutex
	busy int
	peak int
	// starved counts the runs whose latest dispatch had a due host and no
	// slot for it: lingering workers of every run then give theirs up.
	starved atomic.Int32
}

// take claims a worker slot if fewer than limit are busy (limit 0: no
// bound).
func (s *slots) take(limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if limit > 0 && s.busy >= limit {
		return false
	}
	s.busy++
	s.peak = max(s.peak, s.busy)
	return true
}

// inUse is how many slots are busy.
func (s *slots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

func (s *slots) give() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy--
}

// Workers reports how many host workers the engine runs now, across all
// its runs, and the most it ran at once since it was made.
func (e *Engine) Workers() (now, peak int) {
	e.slots.mu.Lock()
	defer e.slots.mu.Unlock()
	return e.slots.busy, e.slots.peak
}

// WorkerLimit is how many host workers the engine's Budget admits at once
// with the parameters p (bodies kept up to MaxBodyBytes, or the inline
// limit with a body store); zero means no bound.
func (e *Engine) WorkerLimit(p params.Params) int { return e.Budget.Workers(e.keptBody(p)) }
