package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestRefreshKilledMidSchedule runs a job with a refreshing URL through
// the command, kills it with SIGKILL once a refetch is committed, and
// runs the same command again: the restarted run fetches the URL no
// earlier than the due time the state held at the kill, and on the
// schedule after it; no seq is skipped in the results (one may repeat:
// at least once per id and seq).
func TestRefreshKilledMidSchedule(t *testing.T) {
	t.Parallel()
	const every = 10 * time.Second // MinRefresh's least
	var mu sync.Mutex
	var fetches []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/feed" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		fetches = append(fetches, time.Now())
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, "<rss>1</rss>")
	}))
	defer srv.Close()
	fetched := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), fetches...)
	}
	url := srv.URL + "/feed"
	dir := t.TempDir()
	in, state, out := filepath.Join(dir, "urls.jsonl"), filepath.Join(dir, "s.db"), filepath.Join(dir, "results.jsonl")
	line := fmt.Sprintf(`{"url": %q, "refresh": %q, "emitUnchanged": true}`+"\n", url, every)
	if err := os.WriteFile(in, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--urls", in, "--state", state, "--out", out, "--allow-private",
		"--param", "MinRefresh=" + every.String(), "--param", "FetchDelay=0"}

	first, _ := runner(t, args...)
	// Kill once the second fetch is committed: the state then holds the
	// next due time, after that fetch.
	var due time.Time
	waitFor(t, 2*time.Minute, "a committed refetch", func() bool {
		f := fetched()
		if len(f) < 2 {
			return false
		}
		due = refreshDue(t, state, url)
		return due.After(f[len(f)-1])
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	before := len(fetched())
	if before != 2 {
		t.Logf("%d fetches before the kill", before)
	}

	second, stderr := runner(t, args...)
	waitFor(t, 2*time.Minute, "two fetches by the restarted run", func() bool { return len(fetched()) >= before+2 })
	if err := second.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = second.Wait()
	f := fetched()
	// The state keeps milliseconds.
	if got := f[before]; got.Before(due.Add(-time.Millisecond)) {
		t.Errorf("the restarted run fetched at %s, before the due time stored at the kill, %s (%s early)\n%s",
			got.Format(time.StampMilli), due.Format(time.StampMilli), due.Sub(got), stderr)
	}
	if got := f[before+1]; got.Before(due.Add(every - time.Millisecond)) {
		t.Errorf("the restarted run's second fetch came at %s, before the next due time, %s", got.Format(time.StampMilli),
			due.Add(every).Format(time.StampMilli))
	}
	// Every fetch emits (emitUnchanged): the seqs run 1, 2, ... with no
	// gap, a repeat at most where the kill came.
	seqs := map[int]bool{}
	last := 0
	for _, r := range readResults(t, out) {
		if r.URL != url {
			continue
		}
		if r.Status != result.StatusFetched && r.Status != result.StatusNotModified {
			t.Errorf("result seq %d: status %s, want fetched or not_modified", r.Seq, r.Status)
		}
		seqs[r.Seq] = true
		last = max(last, r.Seq)
	}
	for s := 1; s <= last; s++ {
		if !seqs[s] {
			t.Errorf("seq %d missing from the results (highest %d): a fetch's result was skipped", s, last)
		}
	}
	if last < len(f)-1 {
		t.Errorf("highest seq %d after %d fetches, want at least %d", last, len(f), len(f)-1)
	}
}

// refreshDue is the due time the state holds for the refreshing url
// (zero when it holds none).
func refreshDue(t *testing.T, state, url string) time.Time {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+state+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var due sql.NullInt64
	err = db.QueryRowContext(context.Background(), "SELECT due FROM refreshes WHERE url = ?", url).Scan(&due)
	if err != nil || !due.Valid {
		return time.Time{}
	}
	return time.UnixMilli(due.Int64)
}
