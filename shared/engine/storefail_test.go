package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// failingStore is the env's store with Commit and DueHosts failing while
// their switches are on.
type failingStore struct {
	hostqueue.Store
	commits, dueHosts atomic.Bool
	commitCalls       atomic.Int32
}

var errStoreDown = errors.New("store down (injected)")

func (s *failingStore) Commit(ctx context.Context, key string, c hostqueue.Commit) (*hostqueue.Host, error) {
	s.commitCalls.Add(1)
	if s.commits.Load() {
		return nil, errStoreDown
	}
	return s.Store.Commit(ctx, key, c)
}

func (s *failingStore) DueHosts(ctx context.Context, vshard int, now time.Time, limit int) ([]string, error) {
	if s.dueHosts.Load() {
		return nil, errStoreDown
	}
	return s.Store.DueHosts(ctx, vshard, now, limit)
}

// TestCommitFailureKeepsLeases checks a worker whose commits fail: after
// its retries it gives the host up with an error (its results are out, its
// URLs stay queued, to be fetched again), and the run keeps its leases until they expire, since
// the host's last fetch is not stored and nobody may come back to it before
// the delay. That holds for the round committed in the background while the
// next is fetched (a queue longer than a round) as for the last round.
func TestCommitFailureKeepsLeases(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		urls int
	}{
		{"last round", 3},
		{"background round", 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				e := newEnv(t, testParams())
				s := newSite(t, withRobots(404, "", page))
				var urls []string
				for i := range tc.urls {
					urls = append(urls, s.url("/p"+string(rune('a'+i))))
				}
				e.seed(urls...)
				store := &failingStore{Store: e.store}
				store.commits.Store(true)
				eng := e.engine()
				eng.Store = store
				start := time.Now()
				sum := e.runWith(eng, "owner", 30*time.Second, 0, nil)
				if sum.Errors == 0 {
					t.Errorf("summary %+v, want the failed commit counted as an error", sum)
				}
				// The host stays due: each tick gives it a new worker (its
				// delay kept by the run's memory), whose commit fails too.
				if n := store.commitCalls.Load(); n < 5 || n%5 != 0 {
					t.Errorf("%d commit attempts, want 5 per worker (its retries)", n)
				}
				if took := time.Since(start); took > 35*time.Second {
					t.Errorf("the run took %v, want it to end at Until", took)
				}
				if len(e.pub.all()) == 0 {
					t.Error("no results published before the failed commit")
				}
				if h := e.load(s.host); h == nil || h.Pending != tc.urls {
					t.Errorf("stored host %+v, want all %d urls still queued", h, tc.urls)
				}
				now := time.Now()
				if ok, err := e.store.AcquireShard(t.Context(), 0, "successor", now.Add(time.Minute), now); err != nil || ok {
					t.Errorf("a successor took vshard 0 right after the run: %v %v; want the lease kept until it expires", ok, err)
				}
			})
		})
	}
}

// TestDueHostsFailure checks that a run whose due-host queries fail counts
// the errors, makes no request and still ends by its Until.
func TestDueHostsFailure(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		s := newSite(t, withRobots(404, "", page))
		e.seed(s.url("/a"))
		store := &failingStore{Store: e.store}
		store.dueHosts.Store(true)
		eng := e.engine()
		eng.Store = store
		start := time.Now()
		sum, err := eng.Run(t.Context(), engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "owner", Until: start.Add(3 * time.Second), Tick: 250 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Errors == 0 || len(s.requests()) != 0 {
			t.Errorf("summary %+v and %d requests, want errors counted and no request", sum, len(s.requests()))
		}
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("run took %v, want it to keep looking until its Until (3s): a failed query is not idleness", took)
		}
	})
}

// namingStore is the env's store with DueHosts also naming extra hosts,
// as a due index judged on stale reads does.
type namingStore struct {
	hostqueue.Store
	extra   []string
	commits atomic.Int32
}

func (s *namingStore) DueHosts(ctx context.Context, vshard int, now time.Time, limit int) ([]string, error) {
	keys, err := s.Store.DueHosts(ctx, vshard, now, limit)
	for _, k := range s.extra {
		if hostqueue.VirtualShard(k) == vshard {
			keys = append(keys, k)
		}
	}
	return keys, err
}

func (s *namingStore) Commit(ctx context.Context, key string, c hostqueue.Commit) (*hostqueue.Host, error) {
	s.commits.Add(1)
	return s.Store.Commit(ctx, key, c)
}

// TestWorkerSkipsHostNotDue: a host the due index names though it is not
// due as stored (moved to later since the index was read) gets no request
// and no commit; the worker ends and the host keeps its time.
func TestWorkerSkipsHostNotDue(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		e := newEnv(t, testParams())
		s := newSite(t, withRobots(404, "", page))
		e.seed(s.url("/a"), s.url("/b"))
		later := time.Now().Add(time.Hour)
		if _, err := e.store.Commit(t.Context(), s.host, hostqueue.Commit{Release: true, NextDue: later, Want: 10, IdleTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		store := &namingStore{Store: e.store, extra: []string{s.host}}
		eng := e.engine()
		eng.Store = store
		e.runWith(eng, "owner", 5*time.Second, 0, nil)
		if got := s.paths(); len(got) != 0 {
			t.Errorf("requests %v to a host due in an hour, want none", got)
		}
		if n := store.commits.Load(); n != 0 {
			t.Errorf("%d commits of a host not due, want none", n)
		}
		if h := e.load(s.host); h == nil || !h.Due.Equal(later) || h.Pending != 2 {
			t.Errorf("stored host %+v, want its 2 URLs due at %v", h, later)
		}
	})
}
