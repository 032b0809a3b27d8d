package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// appenders is how many ingests race on one host in the concurrency cases.
const appenders = 8

// race runs 8 appenders, each adding its own entries in small batches to
// one key through the store, against one consumer that, through the peer,
// loads the head and commits it done until the appenders are finished and
// (with drain) the queue is empty, pausing between rounds. It returns what
// the consumer consumed, in order, and the IDs each appender added.
func race(t *testing.T, e *env, key string, perAppender, limit int, pause time.Duration, drain bool, onEvict func(context.Context, []hostqueue.Entry) error) (consumed []string, added [][]string) {
	const batch = 5
	ctx, cancel := context.WithTimeout(e.ctx(), 5*time.Minute)
	defer cancel()
	added = make([][]string, appenders)
	errs := make(chan error, appenders+1)
	var wg sync.WaitGroup
	finished := make(chan struct{})
	for a := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perAppender; i += batch {
				es := entries(fmt.Sprintf("p%d", a), i, min(batch, perAppender-i))
				_, err := e.store.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: es, Limit: limit, Due: T0, OnEvict: onEvict})
				if err != nil {
					errs <- fmt.Errorf("appender %d: %w", a, err)
					return
				}
				added[a] = append(added[a], ids(es)...)
			}
		}()
	}
	go func() { wg.Wait(); close(finished) }()

	done := false
	for !done {
		select {
		case <-finished:
			done = true // one more round drains what is left
		default:
		}
		if done && !drain {
			break
		}
		for {
			h, err := e.peer.Load(ctx, key, 10)
			if errors.Is(err, hostqueue.ErrNotFound) {
				break // no append has landed yet
			}
			if err != nil {
				t.Fatalf("consumer load: %v", err)
			}
			if len(h.Head) == 0 {
				break
			}
			if err := commitRetried(ctx, t, e.peer, key, hostqueue.Commit{Done: ids(h.Head), State: politeness.State{LastFetch: T0}}); err != nil {
				t.Fatalf("consumer commit: %v", err)
			}
			consumed = append(consumed, ids(h.Head)...)
			if !done {
				break // let the appenders get ahead again
			}
		}
		if !done {
			time.Sleep(pause)
		}
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return consumed, added
}

// commitRetried commits c, and commits it again after an error, a few
// times, as the check engine does (shared/engine, worker.commit). A store
// may answer a commit it could not tell the outcome of with an error (on
// DynamoDB, ErrOutcomeUnknown when more writes raced it than a host item
// remembers); committing the same Done IDs again is harmless, since IDs
// no longer queued are ignored.
func commitRetried(ctx context.Context, t *testing.T, s hostqueue.Queues, key string, c hostqueue.Commit) error {
	var err error
	for attempt := range 5 {
		if attempt > 0 {
			t.Logf("commit %s, attempt %d: the last one failed: %v", key, attempt+1, err)
			time.Sleep(time.Duration(10<<attempt) * time.Millisecond)
		}
		if _, err = s.Commit(ctx, key, c); err == nil {
			return nil
		}
	}
	return err
}

// testConcurrency: with no limit to evict by, every appended entry is
// consumed exactly once, and in the order its appender added it.
func testConcurrency(t *testing.T, h Harness, e *env) {
	const key = "race.example"
	per := h.scaled(200)
	consumed, added := race(t, e, key, per, 1_000_000, 100*time.Microsecond, true, nil)
	seen := map[string]int{}
	for _, id := range consumed {
		seen[id]++
	}
	total, lost, dup := 0, 0, 0
	pos := map[string]int{}
	for i, id := range consumed {
		pos[id] = i
	}
	for a := range appenders {
		last := -1
		for _, id := range added[a] {
			total++
			switch seen[id] {
			case 0:
				lost++
			case 1:
			default:
				dup++
			}
		}
		// Per appender, first in, first out.
		for _, id := range added[a] {
			if p, ok := pos[id]; ok {
				if p < last {
					t.Errorf("appender %d: %s consumed before an entry appended earlier", a, id)
					break
				}
				last = p
			}
		}
	}
	if total != appenders*per || lost > 0 || dup > 0 || len(consumed) != total {
		t.Errorf("appended %d (want %d), consumed %d: %d lost, %d consumed twice", total, appenders*per, len(consumed), lost, dup)
	}
	e.wantQueue(key, nil)
}

// testConcurrentEviction: with a small limit, every appended entry is
// consumed, reported evicted or still queued; none is lost, the queue
// holds no duplicate, and no entry reported evicted stays queued.
func testConcurrentEviction(t *testing.T, h Harness, e *env) {
	const key = "race-evict.example"
	const limit = 20
	per := h.scaled(100)
	var mu sync.Mutex
	reported := map[string]int{}
	onEvict := func(_ context.Context, es []hostqueue.Entry) error {
		mu.Lock()
		defer mu.Unlock()
		for _, x := range es {
			reported[x.ID]++
		}
		return nil
	}
	// A slow consumer, so that the queue fills up and appends evict.
	consumed, added := race(t, e, key, per, limit, 5*time.Millisecond, false, onEvict)
	final := e.load(key, 10*limit)
	if final.Pending != len(final.Head) || final.Pending > limit {
		t.Errorf("final queue: Pending %d, head %d, limit %d", final.Pending, len(final.Head), limit)
	}
	queued := map[string]int{}
	for _, x := range final.Head {
		queued[x.ID]++
		if queued[x.ID] > 1 {
			t.Errorf("%s queued twice", x.ID)
		}
		if reported[x.ID] > 0 {
			t.Errorf("%s reported evicted but still queued", x.ID)
		}
	}
	isConsumed := map[string]bool{}
	for _, id := range consumed {
		isConsumed[id] = true
	}
	evicted := 0
	for a := range appenders {
		for _, id := range added[a] {
			if reported[id] > 0 {
				evicted++
			}
			if !isConsumed[id] && reported[id] == 0 && queued[id] == 0 {
				t.Errorf("%s lost: neither consumed, reported nor queued", id)
			}
		}
	}
	if evicted == 0 {
		t.Errorf("no entry was evicted: the case did not race appends against the limit")
	}
	t.Logf("%d appended, %d consumed, %d reported evicted, %d left", appenders*per, len(consumed), evicted, final.Pending)
}
