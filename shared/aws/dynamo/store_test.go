package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

func TestAppendCreatesHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "new.example"
	due := t0.Add(5 * time.Second)
	first := entries("a", 0, 3, 60)

	if _, err := e.store.Load(ctx, key, 10); !errors.Is(err, hostqueue.ErrNotFound) {
		t.Fatalf("Load of a host never appended to: err = %v, want ErrNotFound", err)
	}
	res, err := e.store.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: first, Limit: 100, Due: due})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 3, Evicted: 0, Pending: 3, Activated: true, Shard: hostqueue.VirtualShard(key)}) {
		t.Errorf("result = %+v, want 3 appended, 3 pending, activated", res)
	}
	h := e.load(key, 10)
	if h.Key != key || h.VirtualShard != hostqueue.VirtualShard(key) || h.Pending != 3 {
		t.Errorf("host = %+v, want key %s, shard %d, 3 pending", h, key, hostqueue.VirtualShard(key))
	}
	if !h.Due.Equal(due) {
		t.Errorf("Due = %v, want %v", h.Due, due)
	}
	if !h.LastFetch.IsZero() || !h.PauseUntil.IsZero() || h.Errors != 0 || len(h.Attempts) != 0 {
		t.Errorf("a new host has politeness state: %+v", h)
	}
	if !slices.EqualFunc(h.Head, first, func(a, b hostqueue.Entry) bool { return a == b }) {
		t.Errorf("head = %+v, want %+v", h.Head, first)
	}

	// A host that is already due keeps its check time; entries go to the tail.
	more := entries("b", 0, 2, 60)
	if _, err := e.store.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: more, Limit: 100, Due: due.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	h = e.load(key, 10)
	if !h.Due.Equal(due) {
		t.Errorf("after a second append Due = %v, want it kept at %v", h.Due, due)
	}
	e.wantHead(key, append(ids(first), ids(more)...))

	for _, want := range []int{0, 1, 2, 4, 5} {
		h := e.load(key, want)
		if h.Pending != 5 || !slices.Equal(ids(h.Head), append(ids(first), ids(more)...)[:want]) {
			t.Errorf("Load(want %d): pending %d head %v", want, h.Pending, ids(h.Head))
		}
	}
	if raw := e.rawHost(key); raw == nil || raw.VS != hostqueue.VirtualShard(key) || raw.Due != due.UnixMilli() || !strings.Contains(raw.Listed, "#b#") {
		t.Errorf("host item = %+v, want vs %d due %d in a due bucket", raw, hostqueue.VirtualShard(key), due.UnixMilli())
	}
	e.checkChunks(key)
}

func TestAppendSpillsIntoChunks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const key = "spill.example"

	// 200-byte entries, one per append: the inline tail holds three (600
	// bytes) and the fourth pushes it over the 700-byte budget into a chunk.
	var all []string
	for i := range 42 {
		es := entries("s", i, 1, 200)
		res := e.append(key, es, 10_000)
		all = append(all, es[0].ID)
		if res.Pending != i+1 {
			t.Fatalf("append #%d: Pending = %d", i, res.Pending)
		}
	}
	raw := e.rawHost(key)
	if len(raw.C) != 10 || len(raw.Q) != 2 {
		t.Errorf("after 42 appends of 200 bytes: %d chunks and %d inline, want 10 and 2", len(raw.C), len(raw.Q))
	}
	if n := len(e.chunkSKs(key)); n != 10 {
		t.Errorf("chunk items in the table = %d, want 10", n)
	}
	e.checkChunks(key)
	e.wantHead(key, all)
	for _, want := range []int{0, 1, 3, 4, 5, 8, 39, 40, 41, 42, 43} {
		h := e.load(key, want)
		if got := ids(h.Head); !slices.Equal(got, all[:min(want, len(all))]) || h.Pending != 42 {
			t.Errorf("Load(want %d) = %d pending, head %v", want, h.Pending, got)
		}
	}

	// One big append: 2000 entries of 100 bytes (200 KB) spill into several
	// chunks of at most 64 KB, in order, after the existing ones.
	big := entries("big", 0, 2000, 100)
	if res := e.append(key, big, 10_000); res.Appended != 2000 || res.Pending != 2042 {
		t.Errorf("big append result = %+v", res)
	}
	raw = e.rawHost(key)
	if len(raw.C) < 10+4 || len(raw.Q) != 0 {
		t.Errorf("after a 200 KB append: %d chunks and %d inline, want >= 14 and 0", len(raw.C), len(raw.Q))
	}
	for _, c := range raw.C[10:] {
		if c.N*100 > 64<<10 {
			t.Errorf("chunk %s holds %d entries of 100 bytes: over 64 KB", c.ID, c.N)
		}
	}
	e.checkChunks(key)
	all = append(all, ids(big)...)
	e.wantHead(key, all)

	// The host item itself stays small whatever the backlog: its inline tail
	// is within the budget.
	if n := inlineSize(raw.Q); n > 700 {
		t.Errorf("inline tail is %d bytes, over the 700-byte budget", n)
	}
}

func inlineSize(es []rawEntry) int {
	n := 0
	for _, e := range es {
		n += 8 + len(e.ID) + len(e.URL)
	}
	return n
}

// buildTwoChunks makes the queue tag-0..3 in one chunk, tag-4..7 in a
// second and tag-8, tag-9 inline, and returns the chunks' sort keys.
func (e *env) buildTwoChunks(key, tag string) (first, second string) {
	e.t.Helper()
	for i := range 10 {
		e.append(key, entries(tag, i, 1, 200), 10_000)
		switch i {
		case 3:
			first = only(e.t, e.chunkSKs(key))
		case 7:
			sks := e.chunkSKs(key)
			sks = slices.DeleteFunc(sks, func(s string) bool { return s == first })
			second = only(e.t, sks)
		}
	}
	raw := e.rawHost(key)
	if len(raw.C) != 2 || raw.C[0].N != 4 || raw.C[1].N != 4 || len(raw.Q) != 2 {
		e.t.Fatalf("setup: host item %+v, want chunks of 4 and 4 plus 2 inline", raw)
	}
	return first, second
}

func only(t *testing.T, s []string) string {
	t.Helper()
	if len(s) != 1 {
		t.Fatalf("want exactly one chunk item, have %v", s)
	}
	return s[0]
}

// idRange lists the IDs tag-from .. tag-(to-1), as entries makes them.
func idRange(tag string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%05d", tag, i))
	}
	return out
}

func TestPersistLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	t.Run("evicts the oldest across chunks", func(t *testing.T) {
		const key = "evict.example"
		first, second := e.buildTwoChunks(key, "e")
		var reported [][]string
		res, err := e.store.Append(ctx, hostqueue.AppendRequest{
			Key: key, Entries: entries("e", 10, 3, 200), Limit: 8, Due: t0,
			OnEvict: func(ctx context.Context, ev []hostqueue.Entry) error {
				// Called before the write: the table still holds them all.
				if h := e.load(key, 100); h.Pending != 10 || len(h.Head) != 10 {
					t.Errorf("OnEvict: the store already changed: pending %d", h.Pending)
				}
				reported = append(reported, ids(ev))
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 3, Evicted: 5, Pending: 8, Shard: hostqueue.VirtualShard(key)}) {
			t.Errorf("result = %+v, want 3 appended, 5 evicted, 8 pending", res)
		}
		if len(reported) != 1 || !slices.Equal(reported[0], idRange("e", 0, 5)) {
			t.Errorf("OnEvict calls = %v, want one with e-0..e-4", reported)
		}
		e.wantHead(key, idRange("e", 5, 13))
		sks := e.chunkSKs(key)
		if slices.Contains(sks, first) || !slices.Contains(sks, second) {
			t.Errorf("chunk items %v: want the evicted first chunk %s gone and the second %s kept", sks, first, second)
		}
		e.checkChunks(key)
	})

	t.Run("evicts from the inline tail", func(t *testing.T) {
		const key = "inline.example"
		e.append(key, entries("i", 0, 3, 50), 4)
		var got []string
		res, err := e.store.Append(ctx, hostqueue.AppendRequest{
			Key: key, Entries: entries("i", 3, 2, 50), Limit: 4, Due: t0,
			OnEvict: func(_ context.Context, ev []hostqueue.Entry) error { got = append(got, ids(ev)...); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Evicted != 1 || res.Pending != 4 || !slices.Equal(got, []string{"i-00000"}) {
			t.Errorf("result %+v, evicted %v; want i-00000 evicted, 4 pending", res, got)
		}
		e.wantHead(key, idRange("i", 1, 5))
	})

	t.Run("incoming alone over the limit", func(t *testing.T) {
		const key = "flood.example"
		e.append(key, entries("old", 0, 3, 50), 5)
		var got []string
		res, err := e.store.Append(ctx, hostqueue.AppendRequest{
			Key: key, Entries: entries("new", 0, 10, 50), Limit: 5, Due: t0,
			OnEvict: func(_ context.Context, ev []hostqueue.Entry) error { got = append(got, ids(ev)...); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		want := append(idRange("old", 0, 3), idRange("new", 0, 5)...)
		if !slices.Equal(got, want) {
			t.Errorf("evicted %v, want %v", got, want)
		}
		if !reflect.DeepEqual(res, hostqueue.AppendResult{Appended: 5, Evicted: 8, Pending: 5, Shard: hostqueue.VirtualShard(key)}) {
			t.Errorf("result = %+v", res)
		}
		e.wantHead(key, idRange("new", 5, 10))
	})

	t.Run("new host, incoming over the limit", func(t *testing.T) {
		const key = "newflood.example"
		var got []string
		res, err := e.store.Append(ctx, hostqueue.AppendRequest{
			Key: key, Entries: entries("n", 0, 10, 300), Limit: 4, Due: t0,
			OnEvict: func(_ context.Context, ev []hostqueue.Entry) error { got = append(got, ids(ev)...); return nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, idRange("n", 0, 6)) || res.Pending != 4 || res.Evicted != 6 {
			t.Errorf("result %+v, evicted %v", res, got)
		}
		e.wantHead(key, idRange("n", 6, 10))
		e.checkChunks(key)
	})

	t.Run("steady state stays at the limit", func(t *testing.T) {
		// One entry at a time far past the limit: after every append the
		// queue holds exactly min(appended, limit), the evictions come
		// oldest first, each once, and no chunk item is left behind.
		const key = "steady.example"
		var got []string
		for i := range 60 {
			res, err := e.store.Append(ctx, hostqueue.AppendRequest{
				Key: key, Entries: entries("st", i, 1, 200), Limit: 20, Due: t0,
				OnEvict: func(_ context.Context, ev []hostqueue.Entry) error { got = append(got, ids(ev)...); return nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Pending != min(i+1, 20) {
				t.Fatalf("append #%d: Pending = %d, want %d", i, res.Pending, min(i+1, 20))
			}
		}
		if !slices.Equal(got, idRange("st", 0, 40)) {
			t.Errorf("evicted %v, want st-0..st-39 in order", got)
		}
		e.wantHead(key, idRange("st", 40, 60))
		e.checkChunks(key)
	})

	t.Run("OnEvict error writes nothing", func(t *testing.T) {
		const key = "failevict.example"
		e.buildTwoChunks(key, "f")
		before, chunksBefore := e.rawHost(key), e.chunkSKs(key)
		boom := errors.New("output queue down")
		_, err := e.store.Append(ctx, hostqueue.AppendRequest{
			Key: key, Entries: entries("f", 10, 3, 200), Limit: 8, Due: t0,
			OnEvict: func(context.Context, []hostqueue.Entry) error { return boom },
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want it to wrap the OnEvict error", err)
		}
		after := e.rawHost(key)
		if after.V != before.V {
			t.Errorf("host item version %d -> %d: it was written", before.V, after.V)
		}
		if got := e.chunkSKs(key); !slices.Equal(got, chunksBefore) {
			t.Errorf("chunk items %v -> %v", chunksBefore, got)
		}
		e.wantHead(key, idRange("f", 0, 10))

		const fresh = "failevict-new.example"
		_, err = e.store.Append(ctx, hostqueue.AppendRequest{
			Key: fresh, Entries: entries("g", 0, 10, 200), Limit: 4, Due: t0,
			OnEvict: func(context.Context, []hostqueue.Entry) error { return boom },
		})
		if !errors.Is(err, boom) {
			t.Fatalf("new host: err = %v, want it to wrap the OnEvict error", err)
		}
		if _, err := e.fresh().Load(ctx, fresh, 10); !errors.Is(err, hostqueue.ErrNotFound) {
			t.Errorf("new host after a failed OnEvict: Load err = %v, want ErrNotFound", err)
		}
		if sks := e.chunkSKs(fresh); len(sks) != 0 {
			t.Errorf("new host after a failed OnEvict: chunk items %v", sks)
		}
	})
}

func TestCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "commit.example"
	first, second := e.buildTwoChunks(key, "c")
	vs := hostqueue.VirtualShard(key)

	if _, err := e.store.Commit(ctx, "nobody.example", hostqueue.Commit{Done: []string{"x"}}); !errors.Is(err, hostqueue.ErrNotFound) {
		t.Errorf("Commit of an unknown host: err = %v, want ErrNotFound", err)
	}

	// Inside the first chunk.
	lf, pu := t0.Add(-time.Second), t0.Add(time.Minute)
	h, err := e.store.Commit(ctx, key, hostqueue.Commit{
		Done:     []string{"c-00000", "c-00001"},
		Attempts: map[string]int{"c-00002": 1, "c-00000": 5, "c-00003": 0},
		Want:     3,
		State:    politeness.State{LastFetch: lf, PauseUntil: pu, Errors: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(h.Head); !slices.Equal(got, idRange("c", 2, 5)) || h.Pending != 8 {
		t.Errorf("Commit returned head %v pending %d, want c-2..c-4 and 8", got, h.Pending)
	}
	for _, h := range []*hostqueue.Host{h, e.load(key, 3)} {
		if !h.LastFetch.Equal(lf) || !h.PauseUntil.Equal(pu) || h.Errors != 2 {
			t.Errorf("politeness state = %v %v %d, want %v %v 2", h.LastFetch, h.PauseUntil, h.Errors, lf, pu)
		}
		if len(h.Attempts) != 1 || h.Attempts["c-00002"] != 1 {
			t.Errorf("Attempts = %v, want only c-00002: 1 (done and zero counters dropped)", h.Attempts)
		}
	}
	if sks := e.chunkSKs(key); !slices.Contains(sks, first) {
		t.Errorf("a half-consumed chunk was deleted: %v", sks)
	}
	e.wantHead(key, idRange("c", 2, 10))

	// Across the chunk boundary: the first chunk is used up and deleted.
	// An older LastFetch does not move it back; the rest is replaced.
	h, err = e.store.Commit(ctx, key, hostqueue.Commit{Done: []string{"c-00002", "c-00003", "c-00004"}, Want: 10, State: politeness.State{LastFetch: lf.Add(-time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	if !h.LastFetch.Equal(lf) || !h.PauseUntil.IsZero() || h.Errors != 0 || h.Attempts != nil {
		t.Errorf("after a second commit: LastFetch %v PauseUntil %v Errors %d Attempts %v; want %v, zero, 0, nil", h.LastFetch, h.PauseUntil, h.Errors, h.Attempts, lf)
	}
	if sks := e.chunkSKs(key); slices.Contains(sks, first) || !slices.Contains(sks, second) {
		t.Errorf("chunk items %v: want %s deleted, %s kept", sks, first, second)
	}
	e.checkChunks(key)
	e.wantHead(key, idRange("c", 5, 10))

	// Done IDs are taken from the head only: an ID further back, or one no
	// longer queued, changes nothing.
	if _, err := e.store.Commit(ctx, key, hostqueue.Commit{Done: []string{"c-00007", "c-00000", "gone"}}); err != nil {
		t.Fatal(err)
	}
	e.wantHead(key, idRange("c", 5, 10))

	// The rest of the second chunk plus one inline entry.
	if _, err := e.store.Commit(ctx, key, hostqueue.Commit{Done: idRange("c", 5, 9)}); err != nil {
		t.Fatal(err)
	}
	if sks := e.chunkSKs(key); len(sks) != 0 {
		t.Errorf("all chunks consumed, chunk items left: %v", sks)
	}
	e.checkChunks(key)
	e.wantHead(key, []string{"c-00009"})

	// Release with work left: due again at NextDue, not before.
	next := t0.Add(10 * time.Second)
	h, err = e.store.Commit(ctx, key, hostqueue.Commit{Release: true, NextDue: next, IdleTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !h.Due.Equal(next) {
		t.Errorf("released with work: Due = %v, want %v", h.Due, next)
	}
	if raw := e.rawHost(key); raw.TTL != 0 {
		t.Errorf("released with work: ttl = %d, want none", raw.TTL)
	}
	e.wantDue(vs, t0, key, false)
	e.wantDue(vs, next, key, true)

	// Release with an empty queue: out of the due index, kept until ttl.
	h, err = e.store.Commit(ctx, key, hostqueue.Commit{Done: []string{"c-00009"}, Release: true, NextDue: next, IdleTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if h.Pending != 0 || !h.Due.IsZero() || len(h.Head) != 0 {
		t.Errorf("released empty: %+v, want no pending, zero Due", h)
	}
	raw := e.rawHost(key)
	if _, ok := raw.attrs["due"]; ok {
		t.Errorf("released empty: the host item still has due (%d), so it stays in the sparse index", raw.Due)
	}
	if want := t0.Add(time.Hour).Unix(); raw.TTL != want {
		t.Errorf("released empty: ttl = %d, want %d", raw.TTL, want)
	}
	e.wantDue(vs, t0.Add(365*24*time.Hour), key, false)
	if h := e.load(key, 1); !h.LastFetch.Equal(lf) {
		t.Errorf("an idle host lost its LastFetch: %v", h.LastFetch)
	}

	// New work for the idle host: due again, no longer expiring.
	e.append(key, entries("c", 10, 1, 50), 100)
	raw = e.rawHost(key)
	if raw.Due != t0.UnixMilli() || raw.TTL != 0 {
		t.Errorf("after new work: due %d ttl %d, want due %d and no ttl", raw.Due, raw.TTL, t0.UnixMilli())
	}
	e.wantDue(vs, t0, key, true)
}

func (e *env) wantDue(vs int, now time.Time, key string, want bool) {
	e.t.Helper()
	keys, err := e.store.DueHosts(e.t.Context(), vs, now, 100)
	if err != nil {
		e.t.Fatalf("DueHosts: %v", err)
	}
	if got := slices.Contains(keys, key); got != want {
		e.t.Errorf("DueHosts(shard %d, %v) = %v: listed %s = %v, want %v", vs, now, keys, key, got, want)
	}
}
