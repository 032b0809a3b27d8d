package localmode

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

// chunkStore is a BatchAppender that activates every host it is given and
// notes, at each call, which shards' loops had been woken before it.
type chunkStore struct {
	hostqueue.Store
	rt    *Runtime
	calls [][]int // per call: the loops with a wake-up waiting
	sizes []int
}

func (s *chunkStore) AppendBatch(_ context.Context, reqs []hostqueue.AppendRequest) []hostqueue.AppendOutcome {
	var woken []int
	for i, c := range s.rt.wakes {
		if len(c) > 0 {
			woken = append(woken, i)
		}
	}
	s.calls, s.sizes = append(s.calls, woken), append(s.sizes, len(reqs))
	out := make([]hostqueue.AppendOutcome, len(reqs))
	for i, r := range reqs {
		out[i].Result = hostqueue.AppendResult{Appended: len(r.Entries), Activated: true}
	}
	return out
}

// TestWakeOnAppend: a large batch's appends are handed to the store a
// chunk at a time, small ones first, and the shards of each chunk's activated hosts are
// woken before the next chunk is appended, so the first hosts are worked
// while the rest of the batch is still being queued.
func TestWakeOnAppend(t *testing.T) {
	rt := &Runtime{wakes: make([]chan struct{}, 4)}
	for i := range rt.wakes {
		rt.wakes[i] = make(chan struct{}, 1)
	}
	store := &chunkStore{rt: rt}
	s := wakeOnAppend(store, waker{rt}).(hostqueue.BatchAppender)
	// Chunks double from a group's appends up to appendWakeChunk.
	var want []int
	n := 0
	for size := sqlite.GroupSize; size < appendWakeChunk; size *= 2 {
		want = append(want, size)
		n += size
	}
	want = append(want, appendWakeChunk, appendWakeChunk, 10)
	n += 2*appendWakeChunk + 10
	reqs := make([]hostqueue.AppendRequest, n)
	for i := range reqs {
		reqs[i] = hostqueue.AppendRequest{Key: fmt.Sprintf("h%d.example", i), Entries: []hostqueue.Entry{{ID: fmt.Sprint(i), URL: "http://x/"}}}
	}
	out := s.AppendBatch(t.Context(), reqs)
	if len(out) != n {
		t.Fatalf("%d outcomes for %d appends", len(out), n)
	}
	if !slices.Equal(store.sizes, want) {
		t.Fatalf("the store was handed chunks of %v, want %v", store.sizes, want)
	}
	if len(store.calls[0]) != 0 {
		t.Errorf("loops %v woken before any append", store.calls[0])
	}
	if len(store.calls[1]) != len(rt.wakes) {
		t.Errorf("before the second chunk, loops %v had a wake-up, want all %d (the first chunk's hosts cover every shard)", store.calls[1], len(rt.wakes))
	}
}
