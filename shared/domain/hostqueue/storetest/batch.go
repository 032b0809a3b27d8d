package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// testBatchDue: hosts a batch appends to (hostqueue.BatchAppender) are due
// like single appends' hosts, whatever index the store keeps them in (the
// DynamoDB store names a batch's new hosts of a shard in one due list):
// every host with work is due, each leaves on its own drain or move, and a
// host drained and given work again by a later batch is due again. Read
// through the peer, which never saw the writes.
func testBatchDue(t *testing.T, _ Harness, e *env) {
	ba, ok := e.store.(hostqueue.BatchAppender)
	if !ok {
		t.Skip("the store takes no batches")
	}
	const vsA, vsB = 3, 9
	a := keysInShard(vsA, 5)
	b := keysInShard(vsB, 1) // a lone host of its shard in the batch
	var reqs []hostqueue.AppendRequest
	for i, k := range append(slices.Clone(a), b...) {
		reqs = append(reqs, hostqueue.AppendRequest{Key: k, Entries: entries("b", i, 2), Limit: 10, Due: T0})
	}
	for i, o := range ba.AppendBatch(e.ctx(), reqs) {
		if o.Err != nil || o.Result.Appended != 2 || !o.Result.Activated {
			t.Fatalf("batch append %s = %+v, %v; want 2 appended, activated", reqs[i].Key, o.Result, o.Err)
		}
	}
	wantDue := func(what string, vs int, now time.Time, want []string) {
		t.Helper()
		if got := slices.Sorted(slices.Values(e.due(vs, now))); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s: due hosts of shard %d = %v, want %v", what, vs, got, want)
		}
	}
	wantDue("before the batch's due time", vsA, T0.Add(-time.Millisecond), nil)
	wantDue("the batch", vsA, T0, a)
	wantDue("the lone host", vsB, T0, b)
	if h := e.load(a[0], 10); h.Pending != 2 || !h.Due.Equal(T0) {
		t.Errorf("%s after the batch: pending %d due %v, want 2 at T0", a[0], h.Pending, h.Due)
	}

	// a[0] drains, a[1] is released with work for later, a[2] drains its
	// first entry only and stays due.
	e.commit(a[0], hostqueue.Commit{Done: ids(reqs[0].Entries), Release: true, IdleTTL: time.Hour})
	later := T0.Add(time.Hour)
	e.commit(a[1], hostqueue.Commit{Release: true, NextDue: later})
	e.commit(a[2], hostqueue.Commit{Done: ids(reqs[2].Entries[:1])})
	wantDue("after a drain and a move", vsA, T0.Add(time.Second), a[2:])
	wantDue("the moved host's time", vsA, later, a[1:])
	if h := e.load(a[1], 10); !h.Due.Equal(later) {
		t.Errorf("moved %s: due %v, want %v", a[1], h.Due, later)
	}

	// A second batch: a[0] (drained) gets work again, a[3] more work.
	second := []hostqueue.AppendRequest{
		{Key: a[0], Entries: entries("c", 0, 1), Limit: 10, Due: T0.Add(2 * time.Second)},
		{Key: a[3], Entries: entries("c", 1, 1), Limit: 10, Due: T0.Add(2 * time.Second)},
	}
	for i, o := range ba.AppendBatch(e.ctx(), second) {
		if o.Err != nil || o.Result.Activated != (i == 0) {
			t.Fatalf("second batch %s = %+v, %v; want activated only for the drained host", second[i].Key, o.Result, o.Err)
		}
	}
	wantDue("after the second batch", vsA, T0.Add(2*time.Second), []string{a[0], a[2], a[3], a[4]})

	// Everything drains: nothing is due, ever.
	for _, k := range a {
		h := e.load(k, 10)
		e.commit(k, hostqueue.Commit{Done: ids(h.Head), Release: true, IdleTTL: time.Hour})
	}
	e.commit(b[0], hostqueue.Commit{Done: ids(reqs[len(a)].Entries), Release: true, IdleTTL: time.Hour})
	wantDue("all drained", vsA, later.Add(time.Hour), nil)
	wantDue("all drained", vsB, later.Add(time.Hour), nil)
	wantDue("all drained, asked again", vsA, later.Add(time.Hour), nil)
}
