package engine

import (
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// The lease and long-delay rules as pure functions of their inputs, so the
// worker and the engine call them and so does the scale simulation
// (infra/sim), which cannot run the engine itself on its virtual clock.

// WaitsInPlace reports whether a worker waits at now for its host's next
// request at next (the last fetch plus the host's delay): only when that is
// at most waitInPlace away. A host whose delay leaves it idle longer is
// released and found again by the due index then (see waitInPlace).
func WaitsInPlace(next, now time.Time) bool { return next.Sub(now) <= waitInPlace }

// LeaseFences reports whether a shard lease with left to live lets a
// request to a host with this delay start: it must outlive the request
// (fetchTimeout), the delay after it up to fenceDelay, and the commit
// margin (see fenceDelay).
func LeaseFences(left, fetchTimeout, delay time.Duration) bool {
	return left > fetchTimeout+min(delay, fenceDelay)+CommitMargin
}

// LeaseTTL is the lease duration for the parameters p: base
// (DefaultLeaseTTL when zero), or more when needed so that the lease is at
// least twice the longest request a worker may start (timeout, the largest
// delay the lease fences, commit), and after a renewal every fetch can
// still pass LeaseFences. It does not grow with MaxCrawlDelay: delays
// beyond fenceDelay are kept by the store instead (see recordStart).
func LeaseTTL(p params.Params, base time.Duration) time.Duration {
	if base <= 0 {
		base = DefaultLeaseTTL
	}
	need := p.FetchTimeout + min(max(p.FetchDelay, p.MaxCrawlDelay, p.HostRules.LongestDelay()), fenceDelay) + CommitMargin
	return max(base, 2*need)
}
