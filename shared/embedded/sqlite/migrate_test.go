package sqlite_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

// TestMigratesVersion2: a state file written before entries kept the URL
// their validators belong to (schema 2) opens, keeps its queued entries
// and their validators (the URL's own, as they were sent then), and keeps
// a redirect target's validators URL for entries queued after.
func TestMigratesVersion2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	now := func() time.Time { return t0 }
	s, err := sqlite.New(path, now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	old := urls("old", 2)
	old[0].ETag, old[1].LastModified = `"v1"`, "Tue, 01 Dec 2026 10:00:00 GMT"
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: "old.example", Entries: old, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Make the file what version 2 wrote.
	db := raw(t, path)
	for _, q := range []string{"ALTER TABLE hosts DROP COLUMN origins", "ALTER TABLE entries DROP COLUMN validators_url", "PRAGMA user_version = 2"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err = sqlite.New(path, now)
	if err != nil {
		t.Fatalf("open a version 2 file: %v", err)
	}
	defer s.Close()
	h, err := s.Load(ctx, "old.example", 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.Head, old) {
		t.Fatalf("migrated queue %+v, want %+v", h.Head, old)
	}
	moved := hostqueue.Entry{ID: "new-0", URL: "https://old.example/a", ETag: `"v2"`, ValidatorsURL: "https://old.example/b"}
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: "old.example", Entries: []hostqueue.Entry{moved}, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if h, err = s.Load(ctx, "old.example", 10); err != nil || len(h.Head) != 3 || h.Head[2] != moved {
		t.Fatalf("after the migration: head %+v (%v), want the old two then %+v", h.Head, err, moved)
	}
	var v int
	if err := raw(t, path).QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 5 {
		t.Errorf("user_version = %d (%v), want 5", v, err)
	}
}
