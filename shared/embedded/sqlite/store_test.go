package sqlite_test

// Tests of what only the SQLite store has: its file (WAL, reopening, the
// schema version), the sweep of expired state, a closed store. The shared
// behaviour is in contract_test.go.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

var t0 = time.UnixMilli(1_760_000_000_000)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// raw opens the file apart from the store, to see what is really in it.
func raw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func urls(tag string, n int) []hostqueue.Entry {
	out := make([]hostqueue.Entry, n)
	for i := range out {
		out[i] = hostqueue.Entry{ID: fmt.Sprintf("%s-%d", tag, i), URL: fmt.Sprintf("https://%s.example/%d", tag, i)}
	}
	return out
}

func TestFileIsWALAndSurvivesReopening(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	now := func() time.Time { return t0 }
	s, err := sqlite.New(path, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: "a.example", Entries: urls("a", 3), Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "a.example", hostqueue.Commit{Done: []string{"a-0"}, State: politeness.State{LastFetch: t0}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.AcquireShard(ctx, 2, "run-1", t0.Add(time.Minute), t0); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	var mode string
	if err := raw(t, path).QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q (%v), want wal", mode, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, "a.example", 1); err == nil {
		t.Error("Load on a closed store succeeded")
	}

	// A second run on the same file finds everything where it was.
	s, err = sqlite.New(path, now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Load(ctx, "a.example", 10)
	if err != nil {
		t.Fatal(err)
	}
	if h.Pending != 2 || len(h.Head) != 2 || h.Head[0].ID != "a-1" || !h.LastFetch.Equal(t0) || !h.Due.Equal(t0) {
		t.Errorf("after reopening: %+v", h)
	}
	if ok, _ := s.AcquireShard(ctx, 2, "run-2", t0.Add(time.Minute), t0.Add(time.Second)); ok {
		t.Error("a lease held before the restart was taken by another owner")
	}
	if keys, _ := s.DueHosts(ctx, hostqueue.VirtualShard("a.example"), t0, 10); len(keys) != 1 {
		t.Errorf("due hosts after reopening = %v", keys)
	}
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	now := func() time.Time { return t0 }
	for _, p := range []string{"", ":memory:", filepath.Join(dir, "a?b.db"), filepath.Join(dir, "a#b.db"), filepath.Join(dir, "missing", "x.db")} {
		if s, err := sqlite.New(p, now); err == nil {
			s.Close()
			t.Errorf("New(%q) succeeded", p)
		}
	}
	// A file of another schema version is not misread.
	path := filepath.Join(dir, "future.db")
	if _, err := raw(t, path).Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.New(path, now); err == nil {
		s.Close()
		t.Error("New on a file of schema version 99 succeeded")
	}
}

func TestSweep(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	c := &clock{t: t0}
	s, err := sqlite.New(path, c.now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := raw(t, path)
	// idle-N: drained and released with a one-hour TTL; busy: has work;
	// kept: idle with no TTL.
	for i := range 3 {
		key := fmt.Sprintf("idle-%d.example", i)
		if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: urls("i", 1), Limit: 10, Due: t0}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, key, hostqueue.Commit{Done: []string{"i-0"}, Release: true, IdleTTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: "busy.example", Entries: urls("b", 2), Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: "kept.example", Entries: urls("k", 1), Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "kept.example", hostqueue.Commit{Done: []string{"k-0"}, Release: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRobots(ctx, "busy.example", "https://busy.example", hostqueue.Robots{Status: 200, Body: []byte("x"), FetchedAt: t0}); err != nil {
		t.Fatal(err)
	}

	if n, err := s.Sweep(ctx); err != nil || n != 0 {
		t.Errorf("sweep before anything expired = %d, %v", n, err)
	}
	c.advance(time.Hour)
	if n, err := s.Sweep(ctx); err != nil || n != 3 {
		t.Errorf("sweep after the idle TTL = %d, %v; want the 3 idle hosts", n, err)
	}
	if got := count(t, db, "hosts"); got != 2 {
		t.Errorf("hosts left = %d, want busy and kept", got)
	}
	if r, err := s.Robots(ctx, "busy.example", "https://busy.example"); err != nil || r == nil {
		t.Errorf("robots.txt within a week: %v %v", r, err)
	}
	// A robots.txt is swept once a week old (reads do not hide it: the
	// engine judges its age), by the commits' own occasional sweep.
	c.advance(7 * 24 * time.Hour)
	if r, err := s.Robots(ctx, "busy.example", "https://busy.example"); err != nil || r == nil {
		t.Errorf("robots.txt a week old, not swept yet = %+v, %v", r, err)
	}
	if _, err := s.Commit(ctx, "busy.example", hostqueue.Commit{State: politeness.State{LastFetch: c.now()}}); err != nil {
		t.Fatal(err)
	}
	if got := count(t, db, "robots"); got != 0 {
		t.Errorf("robots rows after a commit a week later = %d, want swept", got)
	}
	if r, err := s.Robots(ctx, "busy.example", "https://busy.example"); err != nil || r != nil {
		t.Errorf("robots.txt after the sweep = %+v, %v; want none", r, err)
	}
	if got := count(t, db, "entries"); got != 2 {
		t.Errorf("entries = %d, want busy's 2", got)
	}
}

// TestCancelledCallsKeepTheMemoryStore: an in-memory store lives in its one
// connection, so a cancelled call must leave that connection usable.
func TestCancelledCallsKeepTheMemoryStore(t *testing.T) {
	s, err := sqlite.NewMemory(func() time.Time { return t0 })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(t.Context(), hostqueue.AppendRequest{Key: "a.example", Entries: urls("a", 2), Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Load(cancelled, "a.example", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a cancelled context: %v", err)
	}
	if _, err := s.Append(cancelled, hostqueue.AppendRequest{Key: "a.example", Entries: urls("b", 1), Limit: 10, Due: t0}); err == nil {
		t.Error("Append with a cancelled context succeeded")
	}
	h, err := s.Load(t.Context(), "a.example", 10)
	if err != nil || h.Pending != 2 {
		t.Fatalf("after cancelled calls: %+v, %v; want the 2 entries", h, err)
	}
}

// TestMigratesVersion1: a state file written before the learned delays
// existed (schema 1) opens, keeps its hosts, and stores the delays after.
func TestMigratesVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	now := func() time.Time { return t0 }
	s, err := sqlite.New(path, now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: "old.example", Entries: urls("old", 2), Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "old.example", hostqueue.Commit{Want: 10, State: politeness.State{LastFetch: t0}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Make the file what version 1 wrote.
	db := raw(t, path)
	for _, q := range []string{"ALTER TABLE hosts DROP COLUMN origins", "ALTER TABLE hosts DROP COLUMN rate_delay", "ALTER TABLE hosts DROP COLUMN rate_since",
		"ALTER TABLE hosts DROP COLUMN last_took", "ALTER TABLE entries DROP COLUMN validators_url", "PRAGMA user_version = 1"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err = sqlite.New(path, now)
	if err != nil {
		t.Fatalf("open a version 1 file: %v", err)
	}
	defer s.Close()
	h, err := s.Load(ctx, "old.example", 10)
	if err != nil {
		t.Fatal(err)
	}
	if h.Pending != 2 || !h.LastFetch.Equal(t0) || h.RateDelay != 0 || h.LastTook != 0 {
		t.Fatalf("migrated host: pending %d LastFetch %v RateDelay %v LastTook %v, want 2 %v 0 0", h.Pending, h.LastFetch, h.RateDelay, h.LastTook, t0)
	}
	h, err = s.Commit(ctx, "old.example", hostqueue.Commit{Want: 10, State: politeness.State{LastFetch: t0, RateDelay: 2 * time.Second, RateSince: t0, LastTook: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if h.RateDelay != 2*time.Second || !h.RateSince.Equal(t0) || h.LastTook != time.Second {
		t.Errorf("after the migration: RateDelay %v RateSince %v LastTook %v, want 2s %v 1s", h.RateDelay, h.RateSince, h.LastTook, t0)
	}
	var v int
	if err := raw(t, path).QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 5 {
		t.Errorf("user_version = %d (%v), want 5", v, err)
	}
}

// TestRefreshAttemptsKeptOnRelease: a host whose only work is refreshing
// URLs keeps their failed attempts through a release, so MaxAttempts
// counts them across sessions, not per session.
func TestRefreshAttemptsKeptOnRelease(t *testing.T) {
	ctx := t.Context()
	c := &clock{t: t0}
	s := openFile(t, filepath.Join(t.TempDir(), "state.db"), c.now)
	const key = "feeds.example"
	r := hostqueue.Refresh{ID: "feed-1", URL: "http://feeds.example/rss"}
	r.Every = time.Hour
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Refreshes: []hostqueue.Refresh{r}, RefreshCap: 10, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, key, hostqueue.Commit{Attempts: map[string]int{"feed-1": 2}, Release: true, NextDue: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	h, err := s.Load(ctx, key, 10)
	if err != nil {
		t.Fatal(err)
	}
	if h.Attempts["feed-1"] != 2 {
		t.Errorf("attempts after the release %v, want feed-1: 2", h.Attempts)
	}
}

// TestPlainURLsDueBeforeALaterRefresh: a host due only by a refresh
// hours away becomes due at once when plain URLs come.
func TestPlainURLsDueBeforeALaterRefresh(t *testing.T) {
	ctx := t.Context()
	c := &clock{t: t0}
	s := openFile(t, filepath.Join(t.TempDir(), "state.db"), c.now)
	const key = "feeds.example"
	r := hostqueue.Refresh{ID: "weekly", URL: "http://feeds.example/weekly"}
	r.Every = 100 * time.Hour
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Refreshes: []hostqueue.Refresh{r}, RefreshCap: 10, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	h, err := s.Load(ctx, key, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Due.After(t0) {
		t.Skipf("the refresh's first due time fell at %v; the test wants it later", h.Due)
	}
	res, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: urls("p", 1), Limit: 10, Due: t0})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := s.DueHosts(ctx, res.Shard, t0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != key {
		t.Errorf("due hosts at the append %v, want %s: its plain url waits for no refresh", keys, key)
	}
}
