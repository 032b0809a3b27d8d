package engine_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// idleStore is a store with nothing queued: every lease is granted and no
// host is ever due.
type idleStore struct {
	hostqueue.Store
	dueQueries atomic.Int64
}

func (s *idleStore) AcquireShard(context.Context, int, string, time.Time, time.Time) (bool, error) {
	return true, nil
}
func (s *idleStore) ReleaseShard(context.Context, int, string) error { return nil }
func (s *idleStore) DueHosts(context.Context, int, time.Time, int) ([]string, error) {
	s.dueQueries.Add(1)
	return nil, nil
}

// TestIdleRunEndsAtOnce: with nothing due, an invocation does not sit out
// its whole run (Lambda bills the time); it ends after one look.
func TestIdleRunEndsAtOnce(t *testing.T) {
	virtual(t, func(t *testing.T) {
		store := &idleStore{}
		e := &engine.Engine{
			Store:  store,
			Params: func(context.Context) params.Params { return params.Defaults() },
			Clock:  engine.RealClock{},
			Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		start := time.Now()
		_, err := e.Run(context.Background(), engine.RunRequest{Shard: 0, ShardCount: 4, Owner: "idle", Until: start.Add(30 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("idle run took %s, want it to end at once (Until was 30s away)", took)
		}
		if store.dueQueries.Load() == 0 {
			t.Error("the run never looked for due hosts")
		}
	})
}
