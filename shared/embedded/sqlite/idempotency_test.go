package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue/idemtest"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

// TestIdempotencyContractFile runs the idempotency contract on a file.
func TestIdempotencyContractFile(t *testing.T) {
	idemtest.Run(t, func(t *testing.T) hostqueue.IdempotencyStore {
		return openFile(t, filepath.Join(t.TempDir(), "state.db"), time.Now)
	}, true)
}

// TestIdempotencyContractMemory runs the idempotency contract in memory.
func TestIdempotencyContractMemory(t *testing.T) {
	idemtest.Run(t, func(t *testing.T) hostqueue.IdempotencyStore {
		s, err := sqlite.NewMemory(time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}, true)
}

// TestIdempotencyAcrossStoresAndReopen: two stores on one file (two
// processes) see one key, and a reopened file still has it, so a local
// run that restarts replays a retried POST instead of queueing it again.
func TestIdempotencyAcrossStoresAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	t0 := time.UnixMilli(1_760_000_000_000)
	a, b := openFile(t, path, time.Now), openFile(t, path, time.Now)
	c := hostqueue.IdempotencyClaim{Key: "k", BodyHash: "h", Token: "a", Now: t0, LockUntil: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}
	rec, err := a.Claim(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	c.Token = "b"
	if _, err := b.Claim(t.Context(), c); err == nil {
		t.Fatal("second process claimed a key in flight")
	}
	rec.State, rec.Status, rec.Accepted = hostqueue.IdempotencyDone, 202, []string{"x", "y"}
	if err := a.Settle(t.Context(), "k", "a", rec); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	again := openFile(t, path, time.Now)
	got, err := again.Claim(t.Context(), c)
	if err != nil || got.State != hostqueue.IdempotencyDone || len(got.Accepted) != 2 {
		t.Errorf("after reopening: %+v, %v; want the Done record", got, err)
	}
}

// TestIdempotencyExpiredRowsAreSwept: a claim deletes rows whose window
// ended, so the table does not grow with every key ever used.
func TestIdempotencyExpiredRowsAreSwept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openFile(t, path, time.Now)
	t0 := time.UnixMilli(1_760_000_000_000)
	for _, key := range []string{"old1", "old2"} {
		if _, err := s.Claim(t.Context(), hostqueue.IdempotencyClaim{Key: key, BodyHash: "h", Token: "t", Now: t0, LockUntil: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	later := t0.Add(2 * time.Hour)
	if _, err := s.Claim(t.Context(), hostqueue.IdempotencyClaim{Key: "new", BodyHash: "h", Token: "t", Now: later, LockUntil: later.Add(time.Minute), Expires: later.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, raw(t, path), "idempotency"); n != 1 {
		t.Errorf("%d rows left, want only the live key", n)
	}
}
