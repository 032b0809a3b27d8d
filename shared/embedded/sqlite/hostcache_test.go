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

// TestTwoStoresOnOneFile: a store's cached hosts row never hides what
// another store (another process) committed to the same file: after the
// other one appends to a host this store just wrote, this store's next
// commit starts from the other's row, so no URL is lost and the counts
// agree in both.
func TestTwoStoresOnOneFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	c := &clock{t: t0}
	a, err := sqlite.New(path, c.now)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.New(path, c.now)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const key = "shared.example"
	first := urls(key, 2)
	if _, err := a.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: first, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	// a's commits cache the row they wrote (the first one's sweep of
	// idle state starts the cache afresh).
	for range 2 {
		if _, err := a.Commit(ctx, key, hostqueue.Commit{State: politeness.State{LastFetch: t0}}); err != nil {
			t.Fatal(err)
		}
	}
	more := urls("other."+key, 3)
	if _, err := b.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: more, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	h, err := a.Commit(ctx, key, hostqueue.Commit{Done: []string{first[0].ID}, Want: 10, State: politeness.State{LastFetch: t0.Add(time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	if h.Pending != 4 || len(h.Head) != 4 {
		t.Fatalf("after b appended 3 to a's 2 and a committed 1 done: pending %d, head %d, want 4 and 4", h.Pending, len(h.Head))
	}
	// And a's next append numbers its entries after b's.
	last := urls("last."+key, 1)
	if _, err := a.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: last, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	got, err := b.Load(ctx, key, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got.Head {
		ids = append(ids, e.ID)
	}
	want := []string{first[1].ID, more[0].ID, more[1].ID, more[2].ID, last[0].ID}
	if got.Pending != len(want) || len(ids) != len(want) {
		t.Fatalf("b reads pending %d, head %v; want %v", got.Pending, ids, want)
	}
	for i := range want {
		if ids[i] != want[i] {
			t.Fatalf("b reads head %v, want %v", ids, want)
		}
	}
}
