package localmode

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestDamagedState: a --state that is not a urldownloader state (random
// bytes, a state cut short, another program's SQLite database) is refused
// by Open with a StateDamagedError that names the file and shows no
// SQLite words, and the file is left as it was.
func TestDamagedState(t *testing.T) {
	site := startSite(t, demosite.Options{Hosts: 1})
	urls := writeLines(t, site.URLs(2))

	// A real state of a finished job, to cut short.
	good := filepath.Join(t.TempDir(), "good.db")
	rt := open(t, Options{State: good, OutPath: filepath.Join(t.TempDir(), "out.jsonl"), Addresses: fetch.PrivatePolicy()})
	if _, err := rt.Run(context.Background(), RunOptions{Input: fileInput(t, urls)}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 8192)
	for i := range garbage {
		garbage[i] = byte(i*7 + i/13)
	}

	for _, c := range []struct {
		name  string
		write func(path string)
	}{
		{"random bytes", func(p string) { mustWrite(t, p, garbage) }},
		{"a state cut short", func(p string) { mustWrite(t, p, whole[:3000]) }},
		{"another program's database", func(p string) {
			db, err := sql.Open("sqlite", p)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE notes (body TEXT)"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := filepath.Join(t.TempDir(), "s.db")
			c.write(state)
			before, _ := os.ReadFile(state)
			rt, err := Open(context.Background(), Options{State: state, OutPath: filepath.Join(t.TempDir(), "out.jsonl"), Log: testLog(t)})
			if err == nil {
				rt.Close()
				t.Fatal("Open took it as a state")
			}
			var d *StateDamagedError
			if !errors.As(err, &d) || d.State != state {
				t.Fatalf("Open: %v (%T), want a StateDamagedError naming %s", err, err, state)
			}
			for _, raw := range []string{"sqlite", "malformed", "not a database (", "open state: open"} {
				if strings.Contains(err.Error(), raw) {
					t.Errorf("the message shows %q: %s", raw, err)
				}
			}
			if c.name == "another program's database" {
				// SQLite sets WAL mode in its header at open; what
				// matters is that none of this store's tables were added.
				db, err := sql.Open("sqlite", state)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				var n int
				if err := db.QueryRow("SELECT count(*) FROM sqlite_master").Scan(&n); err != nil || n != 1 {
					t.Errorf("the other program's database holds %d tables (%v), want its 1", n, err)
				}
			} else if after, _ := os.ReadFile(state); string(after) != string(before) {
				t.Error("Open changed the damaged file")
			}
		})
	}
}

// TestEmptyState: a zero-byte --state holds no job. It is a new state:
// a results file that already holds another job's lines is refused as for
// any new state, not appended to; a missing one is written.
func TestEmptyState(t *testing.T) {
	site := startSite(t, demosite.Options{Hosts: 1})
	urls := writeLines(t, site.URLs(2))
	dir := t.TempDir()
	state := filepath.Join(dir, "s.db")
	mustWrite(t, state, nil)
	other := filepath.Join(dir, "other.jsonl")
	otherJob := `{"id":"x","url":"http://example.test/","status":"fetched"}` + "\n"
	mustWrite(t, other, []byte(otherJob))

	_, err := Open(context.Background(), Options{State: state, OutPath: other, Log: testLog(t)})
	var conflict *OutConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("Open on a zero-byte state with another job's results file: %v, want an OutConflictError", err)
	}
	if b, _ := os.ReadFile(other); string(b) != otherJob {
		t.Errorf("the other job's results file changed: %q", b)
	}

	out := filepath.Join(dir, "out.jsonl")
	rt := open(t, Options{State: state, OutPath: out, Addresses: fetch.PrivatePolicy()})
	if _, err := rt.Run(context.Background(), RunOptions{Input: fileInput(t, urls)}); err != nil {
		t.Fatal(err)
	}
	if got := len(readResults(t, out)); got != 2 {
		t.Errorf("%d results, want 2", got)
	}
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
