package storetest

import (
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

func testLeases(t *testing.T, _ Harness, e *env) {
	const vs, other = 3, 4
	at := func(d time.Duration) time.Time { return T0.Add(d) }
	steps := []struct {
		name     string
		store    hostqueue.Leases
		vs       int
		owner    string
		until    time.Time
		now      time.Time
		release  bool // ReleaseShard(vs, owner) instead of acquiring
		acquired bool
	}{
		{"a free shard is taken", e.leases, vs, "o1", at(10 * time.Second), T0, false, true},
		{"a live lease refuses another owner", e.peerLeases, vs, "o2", at(20 * time.Second), at(5 * time.Second), false, false},
		{"the owner renews", e.peerLeases, vs, "o1", at(30 * time.Second), at(5 * time.Second), false, true},
		{"the renewal holds", e.leases, vs, "o2", at(40 * time.Second), at(29 * time.Second), false, false},
		{"a lease is live until its end", e.leases, vs, "o2", at(40 * time.Second), at(30 * time.Second), false, false},
		{"another shard is free", e.leases, other, "o2", at(40 * time.Second), at(30 * time.Second), false, true},
		{"an expired lease is taken", e.peerLeases, vs, "o2", at(60 * time.Second), at(30*time.Second + time.Millisecond), false, true},
		{"the old owner is refused", e.leases, vs, "o1", at(70 * time.Second), at(31 * time.Second), false, false},
		{"only the owner releases", e.leases, vs, "o1", time.Time{}, time.Time{}, true, false},
		{"a non-owner's release changed nothing", e.leases, vs, "o3", at(70 * time.Second), at(31 * time.Second), false, false},
		{"the owner releases", e.peerLeases, vs, "o2", time.Time{}, time.Time{}, true, false},
		{"a released shard is taken at once", e.leases, vs, "o3", at(70 * time.Second), at(31 * time.Second), false, true},
		{"releasing a shard nobody holds", e.leases, 9, "o1", time.Time{}, time.Time{}, true, false},
		{"the other shard is still held", e.peerLeases, other, "o1", at(50 * time.Second), at(32 * time.Second), false, false},
	}
	for _, s := range steps {
		if s.release {
			if err := s.store.ReleaseShard(e.ctx(), s.vs, s.owner); err != nil {
				t.Errorf("%s: ReleaseShard: %v", s.name, err)
			}
			continue
		}
		got, err := s.store.AcquireShard(e.ctx(), s.vs, s.owner, s.until, s.now)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got != s.acquired {
			t.Errorf("%s: AcquireShard(%d, %s) = %v, want %v", s.name, s.vs, s.owner, got, s.acquired)
		}
	}
}
