package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

func testDueHosts(t *testing.T, _ Harness, e *env) {
	const vsA, vsB = 5, 11
	a := keysInShard(vsA, 6)
	b := keysInShard(vsB, 2)
	for i, k := range a[:5] {
		_, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{
			Key: k, Entries: entries("u", i, 1), Limit: 10, Due: T0.Add(time.Duration(i) * time.Second),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range b {
		e.append(k, entries("v", 0, 1), 10)
	}
	// a[5] had work and was drained and released: not due, ever.
	e.append(a[5], entries("w", 0, 1), 10)
	e.commit(a[5], hostqueue.Commit{Done: []string{"w-00000"}, Release: true, IdleTTL: time.Hour})
	// a[4] was released with work, due again in an hour.
	later := T0.Add(time.Hour)
	e.commit(a[4], hostqueue.Commit{Release: true, NextDue: later})

	cases := []struct {
		name  string
		vs    int
		now   time.Time
		limit int
		want  []string // in due order
	}{
		{"nothing due yet", vsA, T0.Add(-time.Millisecond), 100, nil},
		{"due at or before now", vsA, T0.Add(2 * time.Second), 100, a[:3]},
		{"all due", vsA, T0.Add(10 * time.Second), 100, a[:4]},
		{"limit, earliest first", vsA, T0.Add(10 * time.Second), 2, a[:2]},
		{"NextDue reached", vsA, later, 100, a[:5]},
		{"another shard", vsB, later, 100, b},
		{"an empty shard", (vsB + 1) % hostqueue.VirtualShards, later, 100, nil},
	}
	for _, c := range cases {
		keys, err := e.peer.DueHosts(e.ctx(), c.vs, c.now, c.limit)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := keys
		if c.vs == vsB {
			// Equal due times: any order.
			got = slices.Sorted(slices.Values(keys))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: DueHosts(%d, %v, %d) = %v, want %v", c.name, c.vs, c.now.Sub(T0), c.limit, keys, c.want)
		}
	}
}

func testIdleTTL(t *testing.T, h Harness, e *env) {
	const key, busy = "idle.example", "busy.example"
	lf := T0.Add(-time.Second)
	small := hostqueue.Robots{Status: 404, FetchedAt: T0}
	e.append(key, entries("a", 0, 1), 10)
	e.commit(key, hostqueue.Commit{Done: []string{"a-00000"}, Release: true, IdleTTL: time.Hour,
		Robots: map[string]hostqueue.Robots{"https://idle.example": small},
		State:  politeness.State{LastFetch: lf},
	})
	e.append(busy, entries("b", 0, 1), 10)
	e.commit(busy, hostqueue.Commit{Release: true, NextDue: T0.Add(time.Minute), IdleTTL: time.Hour, State: politeness.State{LastFetch: lf}})

	// Idle state is kept within its TTL.
	e.clock.Advance(59 * time.Minute)
	got := e.load(key, 1)
	if got.Pending != 0 || !got.LastFetch.Equal(lf) || got.Robots["https://idle.example"].Status != 404 {
		t.Errorf("idle host within its TTL = %+v, want its last fetch and robots.txt kept", got)
	}
	if !h.IdleExpiry {
		t.Skip("the store does not hide expired idle state (see Harness.IdleExpiry)")
	}
	e.clock.Advance(2 * time.Minute)
	if _, err := e.peer.Load(e.ctx(), key, 1); !errors.Is(err, hostqueue.ErrNotFound) {
		t.Errorf("Load of expired idle state: err = %v, want ErrNotFound", err)
	}
	if _, err := e.store.Commit(e.ctx(), key, hostqueue.Commit{State: politeness.State{LastFetch: T0}}); !errors.Is(err, hostqueue.ErrNotFound) {
		t.Errorf("Commit to expired idle state: err = %v, want ErrNotFound", err)
	}
	// A host with work never expires.
	if got := e.load(busy, 1); got.Pending != 1 || !got.LastFetch.Equal(lf) {
		t.Errorf("host with work after the idle TTL = %+v, want it kept", got)
	}
	// An append starts the expired host afresh.
	res := e.append(key, entries("c", 0, 1), 10)
	if !res.Activated || res.Pending != 1 {
		t.Errorf("append to an expired host = %+v, want a fresh, activated host", res)
	}
	got = e.load(key, 5)
	if !got.LastFetch.IsZero() || len(got.Robots) != 0 || !slices.Equal(ids(got.Head), []string{"c-00000"}) {
		t.Errorf("host after expiry and a new append = %+v, want fresh state with only c-00000", got)
	}
	// And it is active now: no expiry while it has work.
	e.clock.Advance(48 * time.Hour)
	if got := e.load(key, 1); got.Pending != 1 {
		t.Errorf("active host after 48 h: Pending %d", got.Pending)
	}
}
