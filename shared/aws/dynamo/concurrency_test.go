package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// TestConcurrentAppendAndConsume is the store's promise: ingests appending
// to one host while the check engine drains it lose nothing and hand no
// entry out twice. Eight appenders, each with its own store (as separate
// Lambda instances have) and its own IDs, append many small batches and
// some big enough to spill into chunks, while one consumer loops Load(10)
// then Commit(Done those). At the end every appended ID was consumed
// exactly once, or evicted (reported through OnEvict), or is still pending.
func TestConcurrentAppendAndConsume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
	}{
		{"no eviction", 1 << 20},
		{"small PersistLimit", 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runAppendConsume(t, tc.limit)
		})
	}
}

func runAppendConsume(t *testing.T, limit int) {
	e := newEnv(t)
	// Only bounds a hang: the race takes a few seconds alone, and under a
	// loaded CI machine moto's conflicts and retries take minutes.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	const (
		key       = "busy.example"
		appenders = 8
		// Six batches each, one of them spilling: ~300 URLs and ~1,000
		// requests to moto per run, most of them lost races (the
		// contract's concurrency cases race 8 appenders too).
		batches = 6
	)
	start := time.Now()

	var mu sync.Mutex
	appended := map[string]int{} // ID -> appends that returned success
	evicted := map[string]int{}  // ID -> times reported through OnEvict
	var overLimit []string
	attempted := 0

	// Every conditional write goes through one atomicConditions; the
	// counting clients above it check that no version was written twice.
	serial := atomicConditions{Client: e.db, mu: &sync.Mutex{}}
	versions := &sync.Map{}
	appendClient := &countingClient{Client: serial, versions: versions}
	consumeClient := &countingClient{Client: serial, versions: versions}
	var wg sync.WaitGroup
	appendDone := make(chan struct{})
	for w := range appenders {
		wg.Go(func() {
			store := e.wrapped(appendClient)
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			next := 0
			for b := range batches {
				n := 1 + rng.IntN(5)
				if b%7 == 3 {
					n = 25 // ~3 KB: spills into a chunk
				}
				es := entries(fmt.Sprintf("w%d", w), next, n, 80+rng.IntN(80))
				next += n
				mu.Lock()
				attempted += n
				mu.Unlock()
				res, err := store.Append(ctx, hostqueue.AppendRequest{
					Key: key, Entries: es, Limit: limit, Due: t0,
					OnEvict: func(_ context.Context, ev []hostqueue.Entry) error {
						mu.Lock()
						defer mu.Unlock()
						for _, x := range ev {
							evicted[x.ID]++
						}
						return nil
					},
				})
				if err != nil {
					t.Errorf("appender %d batch %d: %v", w, b, err)
					return
				}
				mu.Lock()
				for _, x := range es {
					appended[x.ID]++
				}
				if res.Pending > limit {
					overLimit = append(overLimit, fmt.Sprintf("pending %d after appender %d batch %d", res.Pending, w, b))
				}
				mu.Unlock()
			}
		})
	}
	go func() { wg.Wait(); close(appendDone) }()
	// However the consumer ends, stop and wait for the appenders first.
	defer func() { cancel(); <-appendDone }()

	consumed := map[string]int{}
	consumer := e.wrapped(consumeClient)
	loads, emptyWithPending := 0, 0
	finished := false
	for !finished {
		if ctx.Err() != nil {
			t.Fatalf("consumer did not drain the host within the deadline: %d loads", loads)
		}
		// Read the flag before loading: the last load must see every append.
		select {
		case <-appendDone:
			finished = true
		default:
		}
		h, err := consumer.Load(ctx, key, 10)
		if errors.Is(err, hostqueue.ErrNotFound) {
			finished = false
			continue
		}
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		loads++
		if len(h.Head) == 0 && h.Pending > 0 {
			emptyWithPending++
		}
		done := ids(h.Head)
		for _, id := range done {
			consumed[id]++
		}
		if len(done) > 0 || h.Pending > 0 {
			finished = false
			if err := commitRetried(ctx, t, consumer, key, hostqueue.Commit{Done: done, State: politeness.State{LastFetch: t0}}); err != nil {
				cancel()
				<-appendDone
				t.Fatalf("Commit #%d: %v (host writes: appenders %d with %d conflicts, consumer %d with %d conflicts)", loads, err,
					appendClient.puts.Load(), appendClient.conflicts.Load(), consumeClient.puts.Load(), consumeClient.conflicts.Load())
			}
		}
	}

	mu.Lock()
	defer mu.Unlock()
	final := e.load(key, 1<<20)
	pending := map[string]bool{}
	for _, x := range final.Head {
		pending[x.ID] = true
	}
	if final.Pending != 0 || len(pending) != 0 {
		t.Errorf("after draining: %d pending, head %v", final.Pending, ids(final.Head))
	}
	e.checkChunks(key)

	var missing, twice, unknown, evictedTwice, evictedAndConsumed []string
	for id := range appended {
		c, ev := consumed[id], evicted[id]
		switch {
		case c == 0 && ev == 0 && !pending[id]:
			missing = append(missing, id)
		case c > 1:
			twice = append(twice, id)
		}
		if ev > 1 {
			evictedTwice = append(evictedTwice, id)
		}
		if ev > 0 && c > 0 {
			evictedAndConsumed = append(evictedAndConsumed, id)
		}
	}
	for id := range consumed {
		if appended[id] == 0 {
			unknown = append(unknown, id)
		}
	}
	for id := range evicted {
		if appended[id] == 0 {
			unknown = append(unknown, id)
		}
	}
	t.Logf("limit %d: %d appended, %d consumed, %d evicted, %d pending, %d loads, %d with an empty head but pending, in %v",
		limit, len(appended), len(consumed), len(evicted), final.Pending, loads, emptyWithPending, time.Since(start).Round(time.Millisecond))
	if n := appendClient.dupVersions.Load() + consumeClient.dupVersions.Load(); n > 0 {
		t.Errorf("%d host item versions were written twice by conditional writes: moto let a stale write through", n)
	}
	t.Logf("host writes: appenders %d (%d conflicts), consumer %d (%d conflicts)",
		appendClient.puts.Load(), appendClient.conflicts.Load(), consumeClient.puts.Load(), consumeClient.conflicts.Load())
	if len(appended) != attempted {
		t.Errorf("%d of %d IDs appended: an append failed", len(appended), attempted)
	}
	for _, c := range []struct {
		what string
		ids  []string
	}{
		{"lost (neither consumed, evicted nor pending)", missing},
		{"consumed more than once", twice},
		{"consumed or evicted but never appended", unknown},
	} {
		if len(c.ids) > 0 {
			slices.Sort(c.ids)
			t.Errorf("%d IDs %s: %v", len(c.ids), c.what, c.ids[:min(len(c.ids), 20)])
		}
	}
	if emptyWithPending > 0 {
		t.Errorf("%d loads returned an empty head with entries pending: a referenced chunk was missing", emptyWithPending)
	}
	if len(overLimit) > 0 {
		t.Errorf("appends left more than PersistLimit %d queued: %v", limit, overLimit)
	}
	// Reporting before the write (so that a failed report writes nothing)
	// means an attempt that then loses the race has reported entries that
	// the winner also reports, or that the consumer takes meanwhile: at
	// least once, not exactly once. Counted, not failed.
	if len(evictedTwice)+len(evictedAndConsumed) > 0 {
		t.Logf("over-reported: %d IDs reported evicted more than once, %d both reported evicted and consumed",
			len(evictedTwice), len(evictedAndConsumed))
	}
	if limit < 1<<20 && len(evicted) == 0 {
		t.Errorf("PersistLimit %d evicted nothing: the test did not exercise eviction", limit)
	}
	if limit >= 1<<20 && len(evicted) > 0 {
		t.Errorf("%d evicted under a limit never reached", len(evicted))
	}
}

// commitRetried commits c, and again after ErrOutcomeUnknown (a commit
// raced by more writes than the host item remembers), as the check engine
// retries a failed commit: the same Done IDs again are harmless.
func commitRetried(ctx context.Context, t *testing.T, s *dynamo.Store, key string, c hostqueue.Commit) error {
	var err error
	for range 5 {
		if _, err = s.Commit(ctx, key, c); !errors.Is(err, dynamo.ErrOutcomeUnknown) {
			return err
		}
		t.Logf("commit %s again: %v", key, err)
	}
	return err
}

// TestAppendConflictRetried slips a second writer in between an append's
// read and its write, deterministically: the first write must fail its
// condition, and the retry must keep both appends' entries, in the order
// they landed, with no chunk item leaked by the lost attempt.
func TestAppendConflictRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "race.example"
	e.append(key, entries("base", 0, 2, 100), 1000)

	other := e.fresh()
	c := &countingClient{Client: e.db}
	c.beforeHostPut = func(ctx context.Context, n int64) {
		if n == 1 {
			// 10 entries of 100 bytes: the intruder spills a chunk too.
			if _, err := other.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: entries("b", 0, 10, 100), Limit: 1000, Due: t0}); err != nil {
				t.Errorf("intruding append: %v", err)
			}
		}
	}
	store := e.wrapped(c)
	retries := 0
	store.OnRetry = func() { retries++ }
	res, err := store.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: entries("a", 0, 10, 100), Limit: 1000, Due: t0})
	if err != nil {
		t.Fatal(err)
	}
	if c.conflicts.Load() != 1 || c.puts.Load() != 2 {
		t.Errorf("%d host writes with %d conflicts, want 2 and 1: the race did not happen as staged", c.puts.Load(), c.conflicts.Load())
	}
	if retries != 1 {
		t.Errorf("OnRetry called %d times, want once (the StoreRetries metric)", retries)
	}
	if res.Pending != 22 || res.Appended != 10 {
		t.Errorf("result = %+v, want 10 appended, 22 pending", res)
	}
	e.wantHead(key, slices.Concat(idRange("base", 0, 2), idRange("b", 0, 10), idRange("a", 0, 10)))
	e.checkChunks(key)
}

// TestAppendRaceBothLand races two appenders, each with its own store,
// batch after batch on one host, and checks that every entry of both is
// queued once, each appender's in its own order.
func TestAppendRaceBothLand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const (
		key    = "tworace.example"
		rounds = 15
	)
	c := &countingClient{Client: atomicConditions{Client: e.db, mu: &sync.Mutex{}}}
	var wg sync.WaitGroup
	for _, tag := range []string{"x", "y"} {
		wg.Go(func() {
			s := e.wrapped(c)
			for r := range rounds {
				if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: entries(tag, r*8, 8, 100), Limit: 10_000, Due: t0}); err != nil {
					t.Errorf("%s round %d: %v", tag, r, err)
				}
			}
		})
	}
	wg.Wait()
	h := e.load(key, 10_000)
	if h.Pending != 2*rounds*8 || len(h.Head) != h.Pending {
		t.Errorf("Pending %d, head %d; want %d", h.Pending, len(h.Head), 2*rounds*8)
	}
	var x, y []string
	for _, id := range ids(h.Head) {
		if id[0] == 'x' {
			x = append(x, id)
		} else {
			y = append(y, id)
		}
	}
	if !slices.Equal(x, idRange("x", 0, rounds*8)) || !slices.Equal(y, idRange("y", 0, rounds*8)) {
		t.Errorf("queue is not both appenders' entries, each in order:\n  %v", ids(h.Head))
	}
	e.checkChunks(key)
	t.Logf("%d host writes, %d conflicts retried", c.puts.Load(), c.conflicts.Load())
}

// TestEvictionRaceKeepsLimit stages the race between an evicting append and
// a plain one: the evicting append A decides to drop the oldest chunk, and
// before A's host write lands, B appends one entry. A's write then fails its
// condition and A retries against B's state. The outcome must be the same
// as if A had run after B: exactly the oldest entries over the limit are
// evicted and the queue holds Limit entries.
func TestEvictionRaceKeepsLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "evictrace.example"
	e.buildTwoChunks(key, "e") // e-0..3 | e-4..7 | e-8 e-9

	other := e.fresh()
	var byB []string
	c := &countingClient{Client: e.db}
	c.beforeHostPut = func(ctx context.Context, n int64) {
		if n == 1 {
			if _, err := other.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: []hostqueue.Entry{entry("b-00000", 60)}, Limit: 8, Due: t0,
				OnEvict: func(_ context.Context, ev []hostqueue.Entry) error { byB = append(byB, ids(ev)...); return nil }}); err != nil {
				t.Errorf("intruding append: %v", err)
			}
		}
	}
	var reported []string
	res, err := e.wrapped(c).Append(ctx, hostqueue.AppendRequest{
		Key: key, Entries: entries("a", 0, 3, 200), Limit: 8, Due: t0,
		OnEvict: func(_ context.Context, ev []hostqueue.Entry) error {
			reported = append(reported, ids(ev)...)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.conflicts.Load() != 1 {
		t.Fatalf("%d conflicts, want 1: the race did not happen as staged", c.conflicts.Load())
	}
	// Whatever B did (it may evict e-0..e-2 itself, or not evict at all if
	// it saw the queue A's lost attempt left behind), the queue must end with
	// the 8 newest entries and A must have reported only entries it removed.
	want := slices.Concat(idRange("e", 6, 10), []string{"b-00000"}, idRange("a", 0, 3))
	e.wantHead(key, want)
	if res.Pending != 8 {
		t.Errorf("A's result = %+v, want 8 pending", res)
	}
	for _, id := range slices.Concat(reported, byB) {
		if slices.Contains(want, id) {
			t.Errorf("%s was reported evicted, but it is still queued (A reported %v, B %v)", id, reported, byB)
		}
	}
	// Between them A and B removed e-0..e-5 and reported each (A's lost
	// attempt may report some that B then evicts: at least once).
	all := slices.Concat(reported, byB)
	slices.Sort(all)
	if all = slices.Compact(all); !slices.Equal(all, idRange("e", 0, 6)) {
		t.Errorf("reported evicted %v, want e-0..e-5 (A reported %v, B %v)", all, reported, byB)
	}
	e.checkChunks(key)
}
