package engine

import (
	"sync"
	"time"
)

// Admission bounds the request rate the process's host workers may ask for
// together, and finds that rate by watching how late their requests start.
//
// A host worker asks for one request per delay; a process admits as many as
// its budget (memory, descriptors) allows, which on a small machine is more
// than its CPU can serve. The CPU, not the delays, then paces the requests:
// each starts late, and the workers of hosts waiting for CPU hold their
// goroutines, connections and buffers for the whole job. Admitting only the
// rate the process keeps up with fetches as fast, in less memory
// (docs/benchmarks.md, section 1).
//
// The signal is lateness: how long after its planned start (the host's
// delay, Retry-After, spread) a request really starts. Every Period the
// mean lateness of the requests started in it decides:
//
//   - above Late, the allowance drops to the highest rate requests really
//     started at lately, and at least a tenth below what is in use (no host
//     is admitted until enough finish): dropping less at a time leaves the
//     process behind for seconds. It never drops below Min, and a process
//     with nothing admitted always admits a host, so work goes on.
//   - above Late but a quarter or more below the period before's, it holds:
//     that is the backlog of a slow period draining, and cutting on it
//     starves the hosts admitted next.
//   - at most Late, it is never below what is in use: each host that ends
//     may be replaced.
//   - below a quarter of Late, with the bound reached, it doubles until the
//     first cut (a slow start, as TCP's: Start is a guess for any machine
//     and mix of hosts) and grows by half from then. A worker whose request
//     ends a period in which it grew wakes the runs left waiting for it
//     (observe's result) instead of their next tick.
type Admission struct {
	// Start is the request rate (requests per second) admitted at first.
	Start float64
	// Min is the lowest rate the allowance drops to.
	Min float64
	// Late is the mean lateness above which the process is behind.
	Late time.Duration
	// Period is how often the allowance is adjusted.
	Period time.Duration

	mu   sync.Mutex
	rate float64 // allowed; zero until the first adjustment (allowed)
	used float64 // the admitted hosts' rates
	// peak is the most used since the last adjustment.
	peak  float64
	since time.Time
	late  time.Duration
	n     int
	best  float64
	// prev is the mean lateness of the period before.
	prev time.Duration
	// cut: the allowance has been cut once; it grows by half from then.
	cut bool
}

// minHostDelay is the delay a host's rate is reckoned at when its own is
// shorter (FetchDelay 0): it is then paced by its responses, a few a second.
const minHostDelay = 100 * time.Millisecond

// HostRate is the request rate a host with delay d asks for.
func HostRate(d time.Duration) float64 {
	return float64(time.Second) / float64(max(d, minHostDelay))
}

// take admits a host asking for rate r, if the allowance has room.
func (a *Admission) take(r float64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used > 0 && a.used+r > a.allowed() {
		return false
	}
	a.used += r
	a.peak = max(a.peak, a.used)
	return true
}

// give returns a host's rate when its worker ends.
func (a *Admission) give(r float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.used = max(0, a.used-r)
}

// observe records a request that started late after its planned start, at
// now, and adjusts the allowance at the end of each Period. It reports an
// allowance that grew: hosts left waiting may be admitted now.
func (a *Admission) observe(now time.Time, late time.Duration) (grew bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.since.IsZero() {
		a.since = now
	}
	a.late += max(0, late)
	a.n++
	if now.Sub(a.since) < a.Period {
		return false
	}
	before := a.allowed()
	mean := a.late / time.Duration(a.n)
	// best is the highest rate the process started requests at lately,
	// each period's figure weighing a fifth less the next: what it can
	// serve. The last period's alone would be what the admitted hosts
	// asked for, low while a wave of them ends together, and a cut to it
	// left the process idle for seconds.
	a.best = max(float64(a.n)/now.Sub(a.since).Seconds(), 0.8*a.best)
	a.rate = a.allowed()
	draining := mean <= a.prev*3/4
	switch {
	case mean > a.Late && !draining:
		a.rate = max(a.Min, min(0.9*a.used, a.best))
		a.cut = true
	case mean > a.Late:
		// Held: the backlog drains.
	case mean < a.Late/4 && a.peak >= 0.8*a.rate:
		growth := 2.0
		if a.cut {
			growth = 1.5
		}
		a.rate = max(a.rate, a.used) * growth
	default:
		a.rate = max(a.rate, a.used)
	}
	a.since, a.late, a.n, a.peak, a.prev = now, 0, 0, a.used, mean
	return a.rate > before
}

// Allowed is the request rate admitted now (requests per second).
func (a *Admission) Allowed() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allowed()
}

// allowed is the allowance, Start until the first adjustment; a.mu is held.
func (a *Admission) allowed() float64 {
	if a.rate == 0 {
		return max(a.Start, a.Min)
	}
	return a.rate
}
