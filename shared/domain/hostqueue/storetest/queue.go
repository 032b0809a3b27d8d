package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

func testAppendLoadOrder(t *testing.T, _ Harness, e *env) {
	const key = "order.example"
	due := T0.Add(5 * time.Second)
	first := entries("a", 0, 4)
	res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: first, Limit: 100_000, Due: due})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 4, Pending: 4, Activated: true, Shard: hostqueue.VirtualShard(key)}) {
		t.Errorf("first append = %+v, want 4 appended, 4 pending, activated", res)
	}
	h := e.load(key, 10)
	if h.Key != key || h.VirtualShard != hostqueue.VirtualShard(key) || h.Pending != 4 || !h.Due.Equal(due) {
		t.Errorf("host = key %q shard %d pending %d due %v, want %q %d 4 %v",
			h.Key, h.VirtualShard, h.Pending, h.Due, key, hostqueue.VirtualShard(key), due)
	}
	if !h.LastFetch.IsZero() || !h.PauseUntil.IsZero() || h.Errors != 0 || !h.FailingSince.IsZero() ||
		h.LastError != "" || len(h.Attempts) != 0 || len(h.Robots) != 0 || len(h.RobotsItems) != 0 {
		t.Errorf("a new host has politeness state: %+v", h)
	}
	// Every field of an entry comes back as it went in.
	if !slices.Equal(h.Head, first) {
		t.Errorf("head =\n  %+v\nwant\n  %+v", h.Head, first)
	}

	// Appends of every size go to the tail in order, including one large
	// enough to be stored in several pieces.
	b := entries("b", 0, 1)
	c := bulky("c", 0, 1500)
	d := entries("d", 0, 5)
	for _, es := range [][]hostqueue.Entry{b, c, d} {
		if res := e.append(key, es, 100_000); res.Appended != len(es) || res.Evicted != 0 || res.Activated {
			t.Errorf("append of %d = %+v, want all appended, none evicted, not activated", len(es), res)
		}
	}
	all := concat(first, b, c, d)
	for _, want := range []int{0, 1, 4, 5, 6, 1000, len(all) - 1, len(all), len(all) + 50} {
		h := e.load(key, want)
		if h.Pending != len(all) {
			t.Errorf("Load(want %d): Pending = %d, want %d", want, h.Pending, len(all))
		}
		if exp := all[:min(want, len(all))]; !slices.Equal(h.Head, exp) {
			t.Errorf("Load(want %d): head of %d entries (first %v), want %d (first %v)",
				want, len(h.Head), ids(h.Head[:min(3, len(h.Head))]), len(exp), ids(exp[:min(3, len(exp))]))
		}
	}
	if h := e.load(key, 1); !h.Due.Equal(due) {
		t.Errorf("Due after more appends = %v, want it kept at %v", h.Due, due)
	}
}

func testUnknownHost(t *testing.T, _ Harness, e *env) {
	const key = "nobody.example"
	if _, err := e.store.Load(e.ctx(), key, 10); !errors.Is(err, hostqueue.ErrNotFound) {
		t.Errorf("Load of an unknown host: err = %v, want ErrNotFound", err)
	}
	if _, err := e.store.Commit(e.ctx(), key, hostqueue.Commit{Done: []string{"x"}, State: politeness.State{LastFetch: T0}}); !errors.Is(err, hostqueue.ErrNotFound) {
		t.Errorf("Commit to an unknown host: err = %v, want ErrNotFound", err)
	}
	// The failed commit created nothing.
	if _, err := e.peer.Load(e.ctx(), key, 10); !errors.Is(err, hostqueue.ErrNotFound) {
		t.Errorf("Load after a refused commit: err = %v, want ErrNotFound", err)
	}
	if keys := e.due(hostqueue.VirtualShard(key), T0.Add(time.Hour)); len(keys) != 0 {
		t.Errorf("due hosts of an empty store = %v", keys)
	}
}

func testActivated(t *testing.T, _ Harness, e *env) {
	const key = "active.example"
	vs := hostqueue.VirtualShard(key)
	d1, d2, d3 := T0.Add(time.Second), T0.Add(time.Minute), T0.Add(time.Hour)
	app := func(es []hostqueue.Entry, due time.Time) hostqueue.AppendResult {
		t.Helper()
		res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: es, Limit: 100, Due: due})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := app(entries("a", 0, 2), d1); !res.Activated {
		t.Errorf("first append: not activated")
	}
	if res := app(entries("a", 2, 1), d2); res.Activated {
		t.Errorf("append to a host with work: activated")
	}
	if h := e.load(key, 0); !h.Due.Equal(d1) {
		t.Errorf("Due = %v, want the first append's %v", h.Due, d1)
	}
	// Drained and released: out of the due index, and the next append
	// activates it again with that append's due time.
	h := e.commit(key, hostqueue.Commit{Done: ids(entries("a", 0, 3)), Release: true, NextDue: d2, IdleTTL: 24 * time.Hour})
	if h.Pending != 0 || !h.Due.IsZero() {
		t.Errorf("after draining: Pending %d Due %v, want 0 and zero", h.Pending, h.Due)
	}
	if keys := e.due(vs, d3.Add(time.Hour)); slices.Contains(keys, key) {
		t.Errorf("a released empty host is still due: %v", keys)
	}
	if res := app(entries("b", 0, 1), d3); !res.Activated || res.Pending != 1 {
		t.Errorf("append to a released host = %+v, want activated with 1 pending", res)
	}
	if h := e.load(key, 0); !h.Due.Equal(d3) {
		t.Errorf("Due after re-activation = %v, want %v", h.Due, d3)
	}
	// Released with work left: due again at NextDue, and still active.
	if h := e.commit(key, hostqueue.Commit{Release: true, NextDue: d2}); !h.Due.Equal(d2) || h.Pending != 1 {
		t.Errorf("release with work left: Due %v Pending %d, want %v 1", h.Due, h.Pending, d2)
	}
	if res := app(entries("b", 1, 1), d1); res.Activated {
		t.Errorf("append to a host released with work: activated")
	}
}

func testEviction(t *testing.T, _ Harness, e *env) {
	const key = "evict.example"
	rec := &recorder{e: e, key: key, check: true}
	app := func(es []hostqueue.Entry, limit int, onEvict func(context.Context, []hostqueue.Entry) error) hostqueue.AppendResult {
		t.Helper()
		rec.expect(es)
		res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: es, Limit: limit, Due: T0, OnEvict: onEvict})
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.early) > 0 {
			t.Errorf("entries reported after they had left the queue: %v", rec.early)
		}
		return res
	}
	wantReported := func(want []hostqueue.Entry) {
		t.Helper()
		if len(rec.calls) > 1 {
			t.Errorf("OnEvict called %d times for one uncontended append", len(rec.calls))
		}
		if got := rec.all(); !slices.Equal(got, want) {
			t.Errorf("reported =\n  %v\nwant (oldest first)\n  %v", ids(got), ids(want))
		}
	}

	a, b := entries("a", 0, 3), entries("b", 0, 4)
	if res := app(a, 5, rec.onEvict); res.Evicted != 0 || len(rec.calls) != 0 {
		t.Errorf("append under the limit evicted: %+v, reports %v", res, rec.calls)
	}
	// 3 + 4 over a limit of 5: the two oldest go, reported before.
	if res := app(b, 5, rec.onEvict); !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 4, Evicted: 2, Pending: 5, Shard: hostqueue.VirtualShard(key)}) {
		t.Errorf("append over the limit = %+v, want 4 appended, 2 evicted, 5 pending", res)
	}
	wantReported(a[:2])
	e.wantQueue(key, ids(concat(a[2:], b)))

	// More incoming than the limit: the whole queue goes, then the oldest
	// incoming ones.
	c := entries("c", 0, 7)
	if res := app(c, 5, rec.onEvict); !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 5, Evicted: 7, Pending: 5, Shard: hostqueue.VirtualShard(key)}) {
		t.Errorf("append of 7 over a full queue of 5 = %+v, want 5 appended, 7 evicted, 5 pending", res)
	}
	wantReported(concat(a[2:], b, c[:2]))
	e.wantQueue(key, ids(c[2:]))

	// Without OnEvict the eviction still happens.
	if res := app(entries("d", 0, 1), 5, nil); res.Evicted != 1 || res.Pending != 5 {
		t.Errorf("append without OnEvict = %+v, want 1 evicted, 5 pending", res)
	}
	e.wantQueue(key, ids(concat(c[3:], entries("d", 0, 1))))

	// A limit below 1 keeps one entry.
	if res := app(entries("d", 1, 1), 0, rec.onEvict); res.Pending != 1 || res.Evicted != 5 {
		t.Errorf("append with limit 0 = %+v, want 5 evicted, 1 pending", res)
	}
	e.wantQueue(key, ids(entries("d", 1, 1)))

	// A long queue, stored in pieces, evicted across them.
	const bigKey = "evict-big.example"
	rec2 := &recorder{e: e, key: bigKey, check: true}
	var all []hostqueue.Entry
	for i := range 4 {
		es := bulky("e", 300*i, 300)
		all = append(all, es...)
		rec2.expect(es)
		if _, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: bigKey, Entries: es, Limit: 1000, Due: T0, OnEvict: rec2.onEvict}); err != nil {
			t.Fatal(err)
		}
	}
	if got := rec2.all(); !slices.Equal(got, all[:200]) || len(rec2.early) > 0 {
		t.Errorf("big queue: reported %d entries (early %v), want the 200 oldest", len(got), rec2.early)
	}
	e.wantQueue(bigKey, ids(all[200:]))
}

// testHoldBack: a HoldBack append takes only what fits, in order, evicts
// and reports nothing, and takes more once the queue has room again.
func testHoldBack(t *testing.T, _ Harness, e *env) {
	const key = "holdback.example"
	app := func(es []hostqueue.Entry, limit int) hostqueue.AppendResult {
		t.Helper()
		res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: es, Limit: limit, HoldBack: true, Due: T0,
			OnEvict: func(_ context.Context, ev []hostqueue.Entry) error {
				t.Errorf("HoldBack append reported %d evictions", len(ev))
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := entries("a", 0, 3), entries("b", 0, 4)
	if res := app(a, 5); !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 3, Pending: 3, Activated: true, Shard: hostqueue.VirtualShard(key)}) {
		t.Errorf("append under the limit = %+v, want 3 appended, 3 pending, activated", res)
	}
	if res := app(b, 5); !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 2, HeldBack: 2, Pending: 5, Shard: hostqueue.VirtualShard(key)}) {
		t.Errorf("append over the limit = %+v, want 2 appended, 2 held back, 5 pending", res)
	}
	e.wantQueue(key, ids(concat(a, b[:2])))
	if res := app(b[2:], 5); !reflect.DeepEqual(res, hostqueue.AppendResult{HeldBack: 2, Pending: 5, Shard: hostqueue.VirtualShard(key)}) {
		t.Errorf("append to a full queue = %+v, want 2 held back, 5 pending", res)
	}
	e.commit(key, hostqueue.Commit{Done: ids(a[:2])})
	if res := app(b[2:], 5); !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 2, Pending: 5, Shard: hostqueue.VirtualShard(key)}) {
		t.Errorf("append after 2 were done = %+v, want 2 appended, 5 pending", res)
	}
	e.wantQueue(key, ids(concat(a[2:], b)))
}

func testEvictionReportFails(t *testing.T, _ Harness, e *env) {
	const key = "evict-fail.example"
	a := entries("a", 0, 5)
	e.append(key, a, 5)
	boom := errors.New("publish failed")
	_, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{
		Key: key, Entries: entries("b", 0, 2), Limit: 5, Due: T0,
		OnEvict: func(context.Context, []hostqueue.Entry) error { return boom },
	})
	if !errors.Is(err, boom) {
		t.Errorf("append whose report failed: err = %v, want it to wrap the report's error", err)
	}
	// Nothing was written: no entry lost without its report, none added.
	e.wantQueue(key, ids(a))

	rec := &recorder{e: e, key: key, check: true}
	b := entries("b", 0, 2)
	rec.expect(b)
	if _, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: b, Limit: 5, Due: T0, OnEvict: rec.onEvict}); err != nil {
		t.Fatal(err)
	}
	if got := rec.all(); !slices.Equal(got, a[:2]) {
		t.Errorf("retry reported %v, want %v", ids(got), ids(a[:2]))
	}
	e.wantQueue(key, ids(concat(a[2:], b)))
}

// testEvictionRetry makes an append lose a race while it reports: its
// OnEvict appends to the same host first. The append must then report only
// what it had not reported yet, and every entry it evicts must have been
// reported while still queued.
func testEvictionRetry(t *testing.T, _ Harness, e *env) {
	const key = "evict-race.example"
	a := entries("a", 0, 5)
	e.append(key, a, 5)
	b, c := entries("b", 0, 2), entries("c", 0, 1)

	inner := &recorder{e: e, key: key, check: true}
	inner.expect(c)
	outer := &recorder{e: e, key: key, check: true}
	outer.expect(b)
	raced := false
	onEvict := func(ctx context.Context, evicted []hostqueue.Entry) error {
		if err := outer.onEvict(ctx, evicted); err != nil {
			return err
		}
		if raced {
			return nil
		}
		raced = true
		// Another ingest gets in between this report and the write.
		_, err := e.peer.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: c, Limit: 5, Due: T0, OnEvict: inner.onEvict})
		return err
	}
	res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: b, Limit: 5, Due: T0, OnEvict: onEvict})
	if err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("OnEvict was not called")
	}
	// The inner append evicted a0; the outer one, retried on a0..a4 minus
	// a0 plus c0, evicts a1 and a2. It had reported a0 and a1, so it
	// reports a2 alone.
	if got := inner.all(); !slices.Equal(got, a[:1]) {
		t.Errorf("racing append reported %v, want [a-00000]", ids(got))
	}
	if len(outer.calls) < 2 {
		t.Fatalf("outer OnEvict calls = %v, want a first report and one for what the race added", outer.calls)
	}
	if got := ids(outer.calls[0]); !slices.Equal(got, ids(a[:2])) {
		t.Errorf("first report = %v, want %v", got, ids(a[:2]))
	}
	if got := ids(concat(outer.calls[1:]...)); !slices.Equal(got, ids(a[2:3])) {
		t.Errorf("reports after the race = %v, want only the newly evicted %v", got, ids(a[2:3]))
	}
	if len(outer.early)+len(inner.early) > 0 {
		t.Errorf("reported after leaving the queue: %v %v", outer.early, inner.early)
	}
	if res.Appended != 2 || res.Pending != 5 {
		t.Errorf("outer append = %+v, want 2 appended, 5 pending", res)
	}
	e.wantQueue(key, ids(concat(a[3:], c, b)))
}

func testCommitDone(t *testing.T, _ Harness, e *env) {
	const key = "done.example"
	a, big, b := entries("a", 0, 10), bulky("m", 0, 700), entries("b", 0, 5)
	for _, es := range [][]hostqueue.Entry{a[:4], a[4:], big, b} {
		e.append(key, es, 100_000)
	}
	all := concat(a, big, b)
	steps := []struct {
		name string
		done []string
		left []hostqueue.Entry // the queue after the commit
	}{
		{"head ids", ids(a[:3]), all[3:]},
		{"head ids out of order", []string{"a-00004", "a-00003"}, all[5:]},
		{"a gap stops at the first id not done", []string{"a-00005", "a-00007"}, all[6:]},
		{"unknown and already removed ids", []string{"nope", "a-00000", "a-00005"}, all[6:]},
		{"an id not at the head", []string{"b-00000"}, all[6:]},
		{"across appends and pieces", ids(all[6 : 10+650]), all[10+650:]},
		{"the rest", ids(all[10+650:]), nil},
	}
	for _, s := range steps {
		h := e.commit(key, hostqueue.Commit{Done: s.done, Want: 5})
		if h.Pending != len(s.left) {
			t.Errorf("%s: Pending = %d, want %d", s.name, h.Pending, len(s.left))
		}
		if want := s.left[:min(5, len(s.left))]; !slices.Equal(h.Head, want) {
			t.Errorf("%s: returned head %v, want %v", s.name, ids(h.Head), ids(want))
		}
		e.wantQueue(key, ids(s.left))
	}
	// Not released: the drained host is still due until its holder lets
	// it go.
	if h := e.load(key, 1); !h.Due.Equal(T0) {
		t.Errorf("a drained host not released: Due = %v, want %v", h.Due, T0)
	}
}

func testReleaseContinue(t *testing.T, _ Harness, e *env) {
	const key = "release.example"
	vs := hostqueue.VirtualShard(key)
	d0 := T0
	a := entries("a", 0, 3)
	e.append(key, a, 100)
	head := e.load(key, 10).Head
	// URLs arrive while the holder works.
	b := entries("b", 0, 2)
	e.append(key, b, 100)

	h := e.commit(key, hostqueue.Commit{Done: ids(head), Release: true, Continue: true, NextDue: d0.Add(time.Hour), Want: 10})
	if !slices.Equal(h.Head, b) || h.Pending != 2 {
		t.Errorf("Continue: returned head %v pending %d, want %v 2", ids(h.Head), h.Pending, ids(b))
	}
	if !h.Due.Equal(d0) {
		t.Errorf("Continue with work: Due = %v, want it untouched at %v", h.Due, d0)
	}
	if keys := e.due(vs, d0); !slices.Contains(keys, key) {
		t.Errorf("Continue with work: host not due at %v: %v", d0, keys)
	}
	// Continue on an empty queue releases it.
	h = e.commit(key, hostqueue.Commit{Done: ids(b), Release: true, Continue: true, NextDue: d0.Add(time.Hour), IdleTTL: time.Hour})
	if h.Pending != 0 || !h.Due.IsZero() {
		t.Errorf("Continue on an empty queue: Pending %d Due %v, want released", h.Pending, h.Due)
	}
	if keys := e.due(vs, d0.Add(48*time.Hour)); slices.Contains(keys, key) {
		t.Errorf("released empty host still due: %v", keys)
	}

	// Release without Continue, work left: due at NextDue, not before.
	e.append(key, entries("c", 0, 1), 100)
	d3 := T0.Add(3 * time.Minute)
	if h := e.commit(key, hostqueue.Commit{Release: true, NextDue: d3}); !h.Due.Equal(d3) {
		t.Errorf("release with work: Due = %v, want %v", h.Due, d3)
	}
	if keys := e.due(vs, d3.Add(-time.Millisecond)); slices.Contains(keys, key) {
		t.Errorf("due before NextDue: %v", keys)
	}
	if keys := e.due(vs, d3); !slices.Contains(keys, key) {
		t.Errorf("not due at NextDue: %v", keys)
	}
	// A commit without Release leaves the due time alone.
	if h := e.commit(key, hostqueue.Commit{NextDue: T0.Add(time.Hour), State: politeness.State{LastFetch: T0}}); !h.Due.Equal(d3) {
		t.Errorf("commit without Release moved Due to %v, want %v", h.Due, d3)
	}
}

func testPolitenessFields(t *testing.T, _ Harness, e *env) {
	const key = "polite.example"
	e.append(key, entries("a", 0, 2), 100)
	t1, t2, t3 := T0.Add(time.Second), T0.Add(2*time.Second), T0.Add(3*time.Second)
	pause, failing := T0.Add(time.Hour), T0.Add(-time.Minute)

	h := e.commit(key, hostqueue.Commit{State: politeness.State{LastFetch: t2, PauseUntil: pause, Errors: 3, FailingSince: failing, LastError: "connection refused"}})
	check := func(what string, h *hostqueue.Host, lf, pu time.Time, errs int, fs time.Time, le string) {
		t.Helper()
		if !h.LastFetch.Equal(lf) || !h.PauseUntil.Equal(pu) || h.Errors != errs || !h.FailingSince.Equal(fs) || h.LastError != le {
			t.Errorf("%s: LastFetch %v PauseUntil %v Errors %d FailingSince %v LastError %q\nwant %v %v %d %v %q",
				what, h.LastFetch, h.PauseUntil, h.Errors, h.FailingSince, h.LastError, lf, pu, errs, fs, le)
		}
	}
	check("returned", h, t2, pause, 3, failing, "connection refused")
	check("loaded", e.load(key, 0), t2, pause, 3, failing, "connection refused")

	// LastFetch only moves forward; the other fields are replaced.
	h = e.commit(key, hostqueue.Commit{State: politeness.State{LastFetch: t1, Errors: 1, FailingSince: failing, LastError: "timeout"}})
	check("older LastFetch", h, t2, time.Time{}, 1, failing, "timeout")
	e.commit(key, hostqueue.Commit{})
	check("zero commit", e.load(key, 0), t2, time.Time{}, 0, time.Time{}, "")
	h = e.commit(key, hostqueue.Commit{State: politeness.State{LastFetch: t3}})
	check("newer LastFetch", h, t3, time.Time{}, 0, time.Time{}, "")

	// An idle host keeps its politeness state.
	e.commit(key, hostqueue.Commit{Done: ids(entries("a", 0, 2)), Release: true, IdleTTL: time.Hour, State: politeness.State{LastFetch: t3, Errors: 2}})
	check("idle", e.load(key, 0), t3, time.Time{}, 2, time.Time{}, "")
}

// testOriginRuns: the failure runs of a host's origins (one in the state's
// own fields, the others in Others) are replaced by each commit, and a
// commit of one healthy origin leaves none.
func testOriginRuns(t *testing.T, _ Harness, e *env) {
	const key = "origins.example"
	e.append(key, entries("a", 0, 2), 100)
	failing, pause := T0.Add(-time.Minute), T0.Add(time.Hour)
	st := politeness.State{
		LastFetch: T0, Origin: "http://origins.example", Errors: 2, FailingSince: failing, LastFailed: T0, LastError: "refused",
		Others: map[string]politeness.Run{"https://origins.example": {PauseUntil: pause, Errors: 3, FailingSince: failing, LastError: "tls", LastFailed: T0}},
	}
	check := func(what string, h *hostqueue.Host, want politeness.State) {
		t.Helper()
		o, w := h.Others["https://origins.example"], want.Others["https://origins.example"]
		if h.Origin != want.Origin || !h.LastFailed.Equal(want.LastFailed) || len(h.Others) != len(want.Others) ||
			!o.PauseUntil.Equal(w.PauseUntil) || o.Errors != w.Errors || !o.FailingSince.Equal(w.FailingSince) ||
			o.LastError != w.LastError || !o.LastFailed.Equal(w.LastFailed) {
			t.Errorf("%s: origin %q last failed %v others %+v\nwant %q %v %+v", what, h.Origin, h.LastFailed, h.Others,
				want.Origin, want.LastFailed, want.Others)
		}
	}
	check("returned", e.commit(key, hostqueue.Commit{State: st}), st)
	check("loaded", e.load(key, 0), st)
	healthy := politeness.State{LastFetch: T0, Origin: "http://origins.example"}
	check("one healthy origin", e.commit(key, hostqueue.Commit{State: healthy}), politeness.State{})
}

// testLearnedDelays: the delays a host taught (rate limits, response time)
// are replaced by each commit, kept while the host idles, and zero when a
// commit carries none (absent attributes, old rows).
func testLearnedDelays(t *testing.T, _ Harness, e *env) {
	const key = "learned.example"
	e.append(key, entries("a", 0, 2), 100)
	since := T0.Add(-time.Minute)
	check := func(what string, h *hostqueue.Host, rd time.Duration, rs time.Time, took time.Duration) {
		t.Helper()
		if h.RateDelay != rd || !h.RateSince.Equal(rs) || h.LastTook != took {
			t.Errorf("%s: RateDelay %v RateSince %v LastTook %v, want %v %v %v", what, h.RateDelay, h.RateSince, h.LastTook, rd, rs, took)
		}
	}
	check("new host", e.load(key, 0), 0, time.Time{}, 0)
	h := e.commit(key, hostqueue.Commit{State: politeness.State{LastFetch: T0, RateDelay: 4 * time.Second, RateSince: since, LastTook: 600 * time.Millisecond}})
	check("returned", h, 4*time.Second, since, 600*time.Millisecond)
	check("loaded", e.load(key, 0), 4*time.Second, since, 600*time.Millisecond)
	e.commit(key, hostqueue.Commit{Done: ids(entries("a", 0, 2)),
		Release: true, IdleTTL: time.Hour,
		State: politeness.State{LastFetch: T0, RateDelay: 8 * time.Second, RateSince: T0},
	})
	check("idle", e.load(key, 0), 8*time.Second, T0, 0)
	e.commit(key, hostqueue.Commit{State: politeness.State{LastFetch: T0}})
	check("cleared", e.load(key, 0), 0, time.Time{}, 0)
}

func testAttempts(t *testing.T, _ Harness, e *env) {
	const key = "attempts.example"
	a := entries("a", 0, 4)
	e.append(key, a, 100)
	want := func(what string, h *hostqueue.Host, exp map[string]int) {
		t.Helper()
		if len(h.Attempts) != len(exp) {
			t.Errorf("%s: Attempts = %v, want %v", what, h.Attempts, exp)
			return
		}
		for id, n := range exp {
			if h.Attempts[id] != n {
				t.Errorf("%s: Attempts = %v, want %v", what, h.Attempts, exp)
			}
		}
	}
	h := e.commit(key, hostqueue.Commit{Attempts: map[string]int{"a-00000": 1, "a-00001": 2}})
	want("returned", h, map[string]int{"a-00000": 1, "a-00001": 2})
	want("loaded", e.load(key, 0), map[string]int{"a-00000": 1, "a-00001": 2})
	// Done entries and zero counts are not kept.
	h = e.commit(key, hostqueue.Commit{Done: []string{"a-00000"}, Attempts: map[string]int{"a-00000": 2, "a-00001": 3, "a-00002": 0}})
	want("after done", h, map[string]int{"a-00001": 3})
	// A commit replaces the counters.
	want("replaced", e.commit(key, hostqueue.Commit{}), nil)
	e.commit(key, hostqueue.Commit{Attempts: map[string]int{"a-00003": 1}})
	// A drained, released host keeps none.
	h = e.commit(key, hostqueue.Commit{Done: ids(a[1:]), Attempts: map[string]int{"x-00000": 1}, Release: true, IdleTTL: time.Hour})
	want("released", h, nil)
	want("released, loaded", e.load(key, 0), nil)
}
