package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

// TestTakeOverLeases: a lease left by a holder that died is released at
// once, for another owner to take without waiting for its expiry, and the
// queued hosts of its shard count as fetched at the takeover, so their
// delay still follows the dead holder's last possible request; hosts of
// shards nobody held keep their last fetch.
func TestTakeOverLeases(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: t0}
	s, err := sqlite.New(filepath.Join(t.TempDir(), "state.db"), c.now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	held, free := "held.example", "free.example"
	for hostqueue.VirtualShard(free) == hostqueue.VirtualShard(held) {
		free = "x" + free
	}
	for _, key := range []string{held, free} {
		if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: urls(key, 2), Limit: 10, Due: t0}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, key, hostqueue.Commit{State: politeness.State{LastFetch: t0.Add(-time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	vs := hostqueue.VirtualShard(held)
	if ok, err := s.AcquireShard(ctx, vs, "dead-run", t0.Add(84*time.Second), t0); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	c.advance(3 * time.Second) // the restart
	if ok, _ := s.AcquireShard(ctx, vs, "next-run", c.now().Add(time.Minute), c.now()); ok {
		t.Fatal("a live lease was taken before the takeover")
	}

	got, err := s.TakeOverLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Leases != 1 || got.Hosts != 1 || !got.Until.Equal(t0.Add(84*time.Second)) {
		t.Errorf("takeover = %+v, want 1 lease until %s and 1 host", got, t0.Add(84*time.Second))
	}
	if ok, err := s.AcquireShard(ctx, vs, "next-run", c.now().Add(time.Minute), c.now()); err != nil || !ok {
		t.Errorf("after the takeover the shard cannot be leased: %v %v", ok, err)
	}
	for key, want := range map[string]time.Time{held: c.now(), free: t0.Add(-time.Hour)} {
		h, err := s.Load(ctx, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !h.LastFetch.Equal(want) {
			t.Errorf("%s: last fetch %s, want %s", key, h.LastFetch, want)
		}
	}
	if err := s.ReleaseShard(ctx, vs, "next-run"); err != nil {
		t.Fatal(err)
	}
	if again, err := s.TakeOverLeases(ctx); err != nil || again.Leases != 0 {
		t.Errorf("second takeover = %+v, %v; want no lease", again, err)
	}
}
