package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// entries makes n entries tag-from .. tag-(from+n-1), with every field set
// on some of them so that a store that drops one is caught.
func entries(tag string, from, n int) []hostqueue.Entry {
	out := make([]hostqueue.Entry, n)
	for i := range out {
		id := fmt.Sprintf("%s-%05d", tag, from+i)
		e := hostqueue.Entry{ID: id, URL: "https://" + tag + ".example/page/" + id}
		switch (from + i) % 4 {
		case 1:
			e.ETag = `"etag-` + id + `"`
		case 2:
			e.LastModified = "Tue, 01 Jan 2030 00:00:00 GMT"
		case 3:
			e.Hops = 2
		}
		out[i] = e
	}
	return out
}

// bulky makes n entries with URLs of about 100 bytes: enough of them to
// spread over several DynamoDB chunks.
func bulky(tag string, from, n int) []hostqueue.Entry {
	out := entries(tag, from, n)
	for i := range out {
		out[i].URL += "?" + strings.Repeat("q", 60)
	}
	return out
}

func ids(es []hostqueue.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

func concat[S ~[]E, E any](ss ...S) S {
	var out S
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

func (e *env) ctx() context.Context { return e.t.Context() }

// append adds es to key's queue, due at T0, and fails the test on error.
func (e *env) append(key string, es []hostqueue.Entry, limit int) hostqueue.AppendResult {
	e.t.Helper()
	res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Entries: es, Limit: limit, Due: T0})
	if err != nil {
		e.t.Fatalf("append %d to %s: %v", len(es), key, err)
	}
	return res
}

// load reads key through the peer: the state must be in the store, not in
// the writer's memory.
func (e *env) load(key string, want int) *hostqueue.Host {
	e.t.Helper()
	h, err := e.peer.Load(e.ctx(), key, want)
	if err != nil {
		e.t.Fatalf("load %s: %v", key, err)
	}
	return h
}

func (e *env) commit(key string, c hostqueue.Commit) *hostqueue.Host {
	e.t.Helper()
	h, err := e.store.Commit(e.ctx(), key, c)
	if err != nil {
		e.t.Fatalf("commit %s: %v", key, err)
	}
	return h
}

// wantQueue asserts key's whole queue, in order.
func (e *env) wantQueue(key string, want []string) {
	e.t.Helper()
	h := e.load(key, len(want)+10)
	if h.Pending != len(want) {
		e.t.Errorf("%s: Pending = %d, want %d", key, h.Pending, len(want))
	}
	if got := ids(h.Head); !slices.Equal(got, want) {
		e.t.Errorf("%s: queue =\n  %v\nwant\n  %v", key, got, want)
	}
}

func (e *env) due(vshard int, now time.Time) []string {
	e.t.Helper()
	keys, err := e.peer.DueHosts(e.ctx(), vshard, now, 1000)
	if err != nil {
		e.t.Fatalf("due hosts of shard %d: %v", vshard, err)
	}
	return keys
}

// keysInShard returns n keys of virtual shard vs.
func keysInShard(vs, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("h%04d.example", i)
		if hostqueue.VirtualShard(k) == vs {
			out = append(out, k)
		}
	}
	return out
}

// recorder is an OnEvict that records every report, and checks that the
// reported entries are still queued when they are reported (through the
// peer store), so that none disappears before its result is out.
type recorder struct {
	e     *env
	key   string
	check bool
	// incoming are the IDs of the append in progress: evicted straight
	// from it, they were never queued.
	incoming map[string]bool

	mu    sync.Mutex
	calls [][]hostqueue.Entry
	early []string // reported entries that were already gone
}

func (r *recorder) onEvict(ctx context.Context, evicted []hostqueue.Entry) error {
	if r.check {
		h, err := r.e.peer.Load(ctx, r.key, 100_000)
		if err != nil {
			return err
		}
		queued := map[string]bool{}
		for _, q := range h.Head {
			queued[q.ID] = true
		}
		r.mu.Lock()
		for _, ev := range evicted {
			if !queued[ev.ID] && !r.incoming[ev.ID] {
				r.early = append(r.early, ev.ID)
			}
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, slices.Clone(evicted))
	return nil
}

func (r *recorder) all() []hostqueue.Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return concat(r.calls...)
}

// expect resets the recorder for an append of incoming.
func (r *recorder) expect(incoming []hostqueue.Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls, r.early = nil, nil
	r.incoming = map[string]bool{}
	for _, e := range incoming {
		r.incoming[e.ID] = true
	}
}
