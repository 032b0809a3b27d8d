package engine

import (
	"testing"
	"time"
)

// TestStartPacer: hosts new to the runs take slots 1/startRate apart in
// the order they come, never waiting their first delay or more; once the
// slots run a delay ahead, a host waits a random part of its delay; slots
// freed by time passing are not saved up for a later burst.
func TestStartPacer(t *testing.T) {
	var p startPacer
	now := time.Unix(1_000_000, 0)
	const delay = time.Second
	slot := time.Second / startRate
	for i := range startRate {
		if got, want := p.wait(now, delay), time.Duration(i)*slot; got != want {
			t.Fatalf("host %d waits %v, want %v (its slot)", i, got, want)
		}
	}
	// Slots are taken up to the delay: the rest wait within the delay,
	// spread (random), not all at one time.
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		got := p.wait(now, delay)
		if got < 0 || got >= delay {
			t.Fatalf("host %d past the slots waits %v, want within [0, %v)", startRate+i, got, delay)
		}
		seen[got] = true
	}
	if len(seen) < 900 {
		t.Errorf("hosts past the slots got %d distinct waits of 1000, want them spread over the delay", len(seen))
	}
	// Time passing frees the slots: a host five seconds later goes at
	// once, and the one after it a slot later, not in the same instant.
	later := now.Add(5 * time.Second)
	if got := p.wait(later, delay); got != 0 {
		t.Errorf("a host arriving when no slot is taken waits %v, want 0", got)
	}
	if got := p.wait(later, delay); got != slot {
		t.Errorf("the next host waits %v, want one slot (%v)", got, slot)
	}
	// A host with a short delay never waits that delay.
	for range 3 * startRate / 100 {
		if got := p.wait(later, 10*time.Millisecond); got >= 10*time.Millisecond {
			t.Fatalf("a host with a 10ms delay waits %v", got)
		}
	}
	if got := p.wait(later, 0); got != 0 {
		t.Errorf("a host without a delay waits %v", got)
	}
}
