package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// placeShards are two shards other than key's own, and other than each
// other: where ingest placed it by address, and where its address moved.
func placeShards(key string) (s, t int) {
	own := hostqueue.VirtualShard(key)
	return (own + 5) % hostqueue.VirtualShards, (own + 9) % hostqueue.VirtualShards
}

// wantIn asserts that key is stored in shard vs and is due there (due:
// true) or nowhere (false) at now, and never in the other shards named.
func (e *env) wantIn(key string, vs int, due bool, now time.Time, others ...int) {
	e.t.Helper()
	if h := e.load(key, 0); h.VirtualShard != vs {
		e.t.Errorf("%s: stored in shard %d, want %d", key, h.VirtualShard, vs)
	}
	if got := slices.Contains(e.due(vs, now), key); got != due {
		e.t.Errorf("%s: due in shard %d = %v, want %v", key, vs, got, due)
	}
	for _, o := range others {
		if o != vs && slices.Contains(e.due(o, now), key) {
			e.t.Errorf("%s: due in shard %d too, it is stored in %d", key, o, vs)
		}
	}
}

// testPlacement: a host is created in the shard its append places it in
// (AppendRequest.Shard), is due there only, and stays there while it has
// work whatever later appends say; once idle, the next placed append puts
// it where that append says, and an unplaced one leaves it where it is.
// A host never placed is in the shard of its key, as before placement.
func testPlacement(t *testing.T, _ Harness, e *env) {
	const key = "placed.example"
	own := hostqueue.VirtualShard(key)
	s, u := placeShards(key)
	app := func(es []hostqueue.Entry, shard int, placed bool) hostqueue.AppendResult {
		t.Helper()
		res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: es, Limit: 100, Due: T0, Shard: shard, Placed: placed})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := app(entries("a", 0, 2), s, true); !res.Activated || res.Shard != s {
		t.Errorf("first placed append = %+v, want activated in shard %d", res, s)
	}
	e.wantIn(key, s, true, T0, own)
	// With work, the host stays: its worker is in shard s's invocation.
	if res := app(entries("a", 2, 1), u, true); res.Shard != s {
		t.Errorf("placed append to a host with work: shard %d, want it kept in %d", res.Shard, s)
	}
	if res := app(entries("a", 3, 1), 0, false); res.Shard != s {
		t.Errorf("unplaced append to a host with work: shard %d, want it kept in %d", res.Shard, s)
	}
	e.wantIn(key, s, true, T0, own, u)
	// Released with work left, it is due again in its shard.
	later := T0.Add(time.Minute)
	e.commit(key, hostqueue.Commit{Done: ids(entries("a", 0, 1)), Release: true, NextDue: later})
	e.wantIn(key, s, true, later, own, u)
	// Drained and released: idle, in no shard's hands; a placed append
	// puts it where its address now is.
	e.commit(key, hostqueue.Commit{Done: ids(entries("a", 1, 3)), Release: true, IdleTTL: time.Hour})
	if res := app(entries("b", 0, 1), u, true); !res.Activated || res.Shard != u {
		t.Errorf("placed append to an idle host = %+v, want activated in shard %d", res, u)
	}
	e.wantIn(key, u, true, later, own, s)
	// Idle again, an unplaced append (its lookup failed) leaves it there.
	e.commit(key, hostqueue.Commit{Done: ids(entries("b", 0, 1)), Release: true, IdleTTL: time.Hour})
	if res := app(entries("c", 0, 1), 0, false); res.Shard != u {
		t.Errorf("unplaced append to an idle host: shard %d, want it kept in %d", res.Shard, u)
	}
	e.wantIn(key, u, true, later, own, s)

	// Never placed: its key's shard.
	const plain = "plain.example"
	res := e.append(plain, entries("p", 0, 1), 10)
	if res.Shard != hostqueue.VirtualShard(plain) {
		t.Errorf("unplaced new host: shard %d, want its key's %d", res.Shard, hostqueue.VirtualShard(plain))
	}
	e.wantIn(plain, hostqueue.VirtualShard(plain), true, T0)
}

// testBatchPlacement: a batch's hosts placed by one address all land in
// that address's shard (the DynamoDB store lists them in one due list),
// and are due there only.
func testBatchPlacement(t *testing.T, _ Harness, e *env) {
	ba, ok := e.store.(hostqueue.BatchAppender)
	if !ok {
		t.Skip("the store takes no batches")
	}
	const vs = 7
	var reqs []hostqueue.AppendRequest
	for i := range 6 {
		reqs = append(reqs, hostqueue.AppendRequest{Key: fmt.Sprintf("site%d.shared.example", i), Entries: entries("s", i, 2),
			Limit: 10, Due: T0, Shard: vs, Placed: true})
	}
	for i, o := range ba.AppendBatch(e.ctx(), reqs) {
		if o.Err != nil || !o.Result.Activated || o.Result.Shard != vs {
			t.Fatalf("batch append %s = %+v, %v; want activated in shard %d", reqs[i].Key, o.Result, o.Err, vs)
		}
	}
	var want []string
	for _, r := range reqs {
		want = append(want, r.Key)
		e.wantIn(r.Key, vs, true, T0, hostqueue.VirtualShard(r.Key))
	}
	if got := slices.Sorted(slices.Values(e.due(vs, T0))); !slices.Equal(got, want) {
		t.Errorf("due hosts of shard %d = %v, want the batch's %v", vs, got, want)
	}
}

// testMove: Move hands a host with work to another shard in one step: due
// there at the same time, with its queue and state, and no longer due in
// the shard it left; a move from a shard the host is not in changes
// nothing; an idle host moves without becoming due.
func testMove(t *testing.T, _ Harness, e *env) {
	mv, ok := e.store.(hostqueue.Mover)
	if !ok {
		t.Skip("the store moves no hosts")
	}
	const key = "moving.example"
	s, u := placeShards(key)
	own := hostqueue.VirtualShard(key)
	due := T0.Add(3 * time.Second)
	if _, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: entries("m", 0, 3), Limit: 10, Due: due, Shard: s, Placed: true}); err != nil {
		t.Fatal(err)
	}
	before := e.load(key, 10)
	h, err := mv.Move(e.ctx(), key, s, u)
	if err != nil {
		t.Fatal(err)
	}
	if h.VirtualShard != u || !h.Due.Equal(due) || h.Pending != 3 {
		t.Errorf("Move = shard %d due %v pending %d, want %d %v 3", h.VirtualShard, h.Due, h.Pending, u, due)
	}
	after := e.load(key, 10)
	if !slices.Equal(after.Head, before.Head) || !after.Due.Equal(due) {
		t.Errorf("after the move: head %v due %v, want %v %v", ids(after.Head), after.Due, ids(before.Head), due)
	}
	e.wantIn(key, u, false, due.Add(-time.Millisecond), s, own)
	e.wantIn(key, u, true, due, s, own)
	// From a shard it is not in: nothing changes.
	h, err = mv.Move(e.ctx(), key, s, own)
	if err != nil || h.VirtualShard != u {
		t.Errorf("Move from a shard the host left = %+v, %v; want it kept in %d", h, err, u)
	}
	e.wantIn(key, u, true, due, s, own)
	// Worked in its new shard: released with work, due again there.
	later := T0.Add(time.Minute)
	e.commit(key, hostqueue.Commit{Done: ids(entries("m", 0, 1)), Release: true, NextDue: later})
	e.wantIn(key, u, true, later, s, own)
	// Idle, it moves without becoming due.
	e.commit(key, hostqueue.Commit{Done: ids(entries("m", 1, 2)), Release: true, IdleTTL: time.Hour})
	if _, err := mv.Move(e.ctx(), key, u, s); err != nil {
		t.Fatal(err)
	}
	e.wantIn(key, s, false, later.Add(time.Hour), u, own)
	if _, err := mv.Move(e.ctx(), "nobody.example", s, u); !errors.Is(err, hostqueue.ErrNotFound) {
		t.Errorf("Move of an unknown host: err = %v, want ErrNotFound", err)
	}
}
