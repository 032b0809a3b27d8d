package engine

import (
	"math/rand/v2"
	"sync"
	"time"
)

// startRate is the most hosts new to a run that start per second, as
// startPacer spaces them. Hosts that fall due together (a list read at
// once, a check run taking over a shard of new hosts) would otherwise all
// connect in the same milliseconds and then, each waiting exactly its
// delay, go on requesting in waves: thousands of SYNs at once overflow
// listen queues, and the kernel retries a dropped SYN only after a second
// (12,815 retransmissions in one 5,000-host run). Ten per millisecond is
// the density a uniform spread over a 1 s delay gave 10,000 hosts, which
// ran with none.
const startRate = 10000

// startPacer spreads the first requests of hosts new to the engine's runs
// evenly in time, in the order they come: each takes the next free slot,
// 1/startRate after the one before it. A host therefore waits only as long
// as the hosts ahead of it need: 2,000 hosts queued by one append start
// over 0.2 s, where a uniform wait within a 1 s delay held the last of
// them back most of a second, and the hosts of a list whose appends land
// over a second start as they land. When the slots run further ahead than
// the host's first delay, a host waits a uniformly random part of that
// delay instead: the spread is never longer than the delay, and at that
// density random is as even as slots. Each host keeps the phase it starts
// with (its later requests come a delay after its own last response), so
// its requests stay spread as its first ones are.
type startPacer struct {
	mu   sync.Mutex
	next time.Time // the next free slot
}

// wait is how long a host new to the run, due at now with the given first
// delay, waits before its first request.
func (p *startPacer) wait(now time.Time, delay time.Duration) time.Duration {
	if delay <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	slot := p.next
	if slot.Before(now) {
		slot = now
	}
	if slot.Sub(now) >= delay {
		return rand.N(delay)
	}
	p.next = slot.Add(time.Second / startRate)
	return slot.Sub(now)
}
