package localmode

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// outJob is one job of the out-file tests: an input file of URLs that end
// denied at ingest (private addresses are not allowed), so a run takes no
// request and ends at once.
type outJob struct {
	t              *testing.T
	dir, state, in string
	out            string
	overwrite      bool
	lines          int
	lastInfo       OutInfo
	lastTakeover   Takeover
}

func newOutJob(t *testing.T, dir, name string) *outJob {
	return &outJob{t: t, dir: dir, state: filepath.Join(dir, name+".db"), in: filepath.Join(dir, name+".urls"), out: filepath.Join(dir, name+".jsonl")}
}

// add appends n URLs to the job's input.
func (j *outJob) add(n int) {
	j.t.Helper()
	f, err := os.OpenFile(j.in, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		j.t.Fatal(err)
	}
	defer f.Close()
	for range n {
		j.lines++
		if _, err := f.WriteString("http://127.0.0.1:1/" + filepath.Base(j.in) + "/" + strings.Repeat("x", j.lines) + "\n"); err != nil {
			j.t.Fatal(err)
		}
	}
}

// run opens the job's state with its results file, runs the input and
// closes: the error is Open's.
func (j *outJob) run() error {
	j.t.Helper()
	rt, err := Open(context.Background(), Options{State: j.state, OutPath: j.out, Overwrite: j.overwrite, Log: testLog(j.t)})
	if err != nil {
		return err
	}
	j.lastInfo, j.lastTakeover = rt.OutFile(), rt.Takeover()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rt.Run(ctx, RunOptions{Input: fileInput(j.t, j.in)}); err != nil {
		j.t.Fatalf("run: %v", err)
	}
	if err := rt.Close(); err != nil {
		j.t.Fatalf("close: %v", err)
	}
	return nil
}

func (j *outJob) mustRun() {
	j.t.Helper()
	if err := j.run(); err != nil {
		j.t.Fatalf("open: %v", err)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// refused checks that err is an out-file conflict naming every one of
// names, and that the file at out holds before (nil: does not exist).
func refused(t *testing.T, err error, out string, before []byte, names ...string) {
	t.Helper()
	var conflict *OutConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("error %v, want an out-file conflict", err)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %s", err, n)
		}
	}
	if before == nil {
		if exists(out) {
			t.Errorf("%s was created", out)
		}
		return
	}
	if got := read(t, out); !bytes.Equal(got, before) {
		t.Errorf("%s changed: %d bytes, want its %d bytes untouched", out, len(got), len(before))
	}
}

// TestOutFile: results are never destroyed. A non-empty results file is
// appended to only by the job whose state recorded it, emptied only when
// asked (Overwrite), and refused otherwise, before the state or the file
// is created or written.
func TestOutFile(t *testing.T) {
	t.Parallel()
	earlier := []byte(`{"id":"earlier","url":"http://a.example/"}` + "\n")

	t.Run("non-empty file, new state: refused, nothing created", func(t *testing.T) {
		j := newOutJob(t, t.TempDir(), "job")
		j.add(2)
		if err := os.WriteFile(j.out, earlier, 0o644); err != nil {
			t.Fatal(err)
		}
		j.state = filepath.Join(j.dir, "job.bd") // the typo
		refused(t, j.run(), j.out, earlier, j.out, j.state)
		if exists(j.state) || exists(j.state+LockSuffix) {
			t.Errorf("the refused state %s was created", j.state)
		}
	})
	t.Run("non-empty file, no state: refused", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "out.jsonl")
		if err := os.WriteFile(out, earlier, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(context.Background(), Options{OutPath: out})
		refused(t, err, out, earlier, out)
	})
	t.Run("overwrite empties it", func(t *testing.T) {
		j := newOutJob(t, t.TempDir(), "job")
		j.add(2)
		if err := os.WriteFile(j.out, earlier, 0o644); err != nil {
			t.Fatal(err)
		}
		j.overwrite = true
		j.mustRun()
		if rs := readResults(t, j.out); len(rs) != 2 || !j.lastInfo.Overwritten {
			t.Errorf("after --overwrite: %d results (%+v), want the 2 new ones only", len(rs), j.lastInfo)
		}
	})
	t.Run("same job appends", func(t *testing.T) {
		j := newOutJob(t, t.TempDir(), "job")
		j.add(2)
		j.mustRun()
		first := read(t, j.out)
		j.add(1)
		j.mustRun()
		got := read(t, j.out)
		if !bytes.HasPrefix(got, first) || len(readResults(t, j.out)) != 3 {
			t.Errorf("resumed job: %d results, earlier bytes kept %v; want 3, kept", len(readResults(t, j.out)), bytes.HasPrefix(got, first))
		}
		if !j.lastInfo.Appended || j.lastInfo.Earlier != 2 {
			t.Errorf("resumed job: %+v, want appended after 2 earlier results", j.lastInfo)
		}
	})
	t.Run("same job with --overwrite again still appends", func(t *testing.T) {
		// The command line that started the job, run again to resume it:
		// its --overwrite must not empty what the job wrote.
		j := newOutJob(t, t.TempDir(), "job")
		j.add(2)
		j.overwrite = true
		j.mustRun()
		first := read(t, j.out)
		j.add(1)
		j.mustRun()
		got := read(t, j.out)
		if !bytes.HasPrefix(got, first) || len(readResults(t, j.out)) != 3 {
			t.Errorf("resumed with --overwrite: %d results, earlier bytes kept %v; want 3, kept", len(readResults(t, j.out)), bytes.HasPrefix(got, first))
		}
		if !j.lastInfo.Appended || j.lastInfo.Overwritten || !j.lastInfo.OverwriteIgnored || j.lastInfo.Earlier != 2 {
			t.Errorf("resumed with --overwrite: %+v, want appended after 2, overwrite ignored", j.lastInfo)
		}
	})
	t.Run("another job's file refused, naming both", func(t *testing.T) {
		dir := t.TempDir()
		a, b := newOutJob(t, dir, "a"), newOutJob(t, dir, "b")
		a.add(1)
		b.add(1)
		a.mustRun()
		b.mustRun()
		before := read(t, b.out)
		a.out = b.out
		refused(t, a.run(), b.out, before, b.out, filepath.Join(dir, "a.jsonl"), a.state)
		// Standard output is not the file the state writes either.
		_, err := Open(context.Background(), Options{State: a.state})
		refused(t, err, filepath.Join(dir, "none"), nil, "a.jsonl")
		// With Overwrite the job goes on in the other file.
		a.overwrite = true
		a.mustRun()
		if rs := readResults(t, b.out); len(rs) != 0 && rs[0].URL != "" && strings.Contains(rs[0].URL, "b.urls") {
			t.Errorf("after --overwrite %s still holds job b's results", b.out)
		}
	})
	t.Run("a truncated, replaced or removed file is refused", func(t *testing.T) {
		j := newOutJob(t, t.TempDir(), "job")
		j.add(3)
		j.mustRun()
		full := read(t, j.out)
		if err := os.WriteFile(j.out, full[:len(full)/2], 0o644); err != nil { // same inode, shorter
			t.Fatal(err)
		}
		refused(t, j.run(), j.out, full[:len(full)/2], "truncated or rewritten since")
		if err := os.Remove(j.out); err != nil {
			t.Fatal(err)
		}
		refused(t, j.run(), j.out, nil, "and it is gone")
		// A new file (which may get the old inode back) of the same size.
		other := bytes.ReplaceAll(full, []byte("x"), []byte("y"))
		if err := os.WriteFile(j.out, other, 0o644); err != nil {
			t.Fatal(err)
		}
		refused(t, j.run(), j.out, other, "replaced or rewritten since")
	})
	t.Run("a moved file is followed", func(t *testing.T) {
		j := newOutJob(t, t.TempDir(), "job")
		j.add(1)
		j.mustRun()
		moved := filepath.Join(j.dir, "moved.jsonl")
		if err := os.Rename(j.out, moved); err != nil {
			t.Fatal(err)
		}
		j.out = moved
		j.add(1)
		j.mustRun()
		if n := len(readResults(t, moved)); n != 2 || !j.lastInfo.Appended {
			t.Errorf("moved file: %d results (%+v), want 2 appended", n, j.lastInfo)
		}
	})
	t.Run("a bad state fails before the file is created or touched", func(t *testing.T) {
		dir := t.TempDir()
		garbage := filepath.Join(dir, "garbage.db")
		if err := os.WriteFile(garbage, []byte("not a database, not at all, no\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, state := range []string{garbage, dir} {
			out := filepath.Join(dir, "new.jsonl")
			if _, err := Open(context.Background(), Options{State: state, OutPath: out}); err == nil {
				t.Errorf("state %s opened", state)
			}
			if exists(out) {
				t.Errorf("state %s: %s was created", state, out)
			}
			kept := filepath.Join(dir, "kept.jsonl")
			if err := os.WriteFile(kept, earlier, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(context.Background(), Options{State: state, OutPath: kept, Overwrite: true}); err == nil {
				t.Errorf("state %s opened", state)
			}
			if got := read(t, kept); !bytes.Equal(got, earlier) {
				t.Errorf("state %s: %s changed", state, kept)
			}
		}
	})
	t.Run("a partial last line the state never committed is cut", func(t *testing.T) {
		j := newOutJob(t, t.TempDir(), "job")
		j.add(2)
		j.mustRun()
		partial := `{"id":"cut-by-a-cr`
		f := openOut(t, j.out)
		if _, err := f.WriteString(partial); err != nil {
			t.Fatal(err)
		}
		j.add(1)
		j.mustRun()
		if j.lastInfo.Cut != int64(len(partial)) {
			t.Errorf("cut %d bytes, want the partial line's %d", j.lastInfo.Cut, len(partial))
		}
		if n := len(readResults(t, j.out)); n != 3 {
			t.Errorf("%d results, want 3 whole lines", n)
		}
	})
	t.Run("a state without a record appends, ending a partial line", func(t *testing.T) {
		j := newOutJob(t, t.TempDir(), "job")
		j.add(1)
		j.mustRun()
		// As a state written before the record, or to standard output.
		db, err := sql.Open("sqlite", j.state)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("DELETE FROM out_file"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		partial := `{"id":"not-ours`
		f := openOut(t, j.out)
		if _, err := f.WriteString(partial); err != nil {
			t.Fatal(err)
		}
		before := read(t, j.out)
		j.add(1)
		j.mustRun()
		got := read(t, j.out)
		if !j.lastInfo.Unrecorded || j.lastInfo.Terminated != 1 || !bytes.HasPrefix(got, append(before, '\n')) {
			t.Errorf("%+v; file kept its bytes and ended the line: %v", j.lastInfo, bytes.HasPrefix(got, append(before, '\n')))
		}
		// Recorded from now on: another job's state is refused.
		other := newOutJob(t, j.dir, "other")
		other.add(1)
		other.mustRun()
		other.out = j.out
		refused(t, other.run(), j.out, got, "not to this file")
	})
}

// TestStateLock: one runtime works a state at a time; a second one is
// refused at once, naming the holder, and the lock goes with Close.
func TestStateLock(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.db")
	first, err := Open(context.Background(), Options{State: state, Out: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), Options{State: state, Out: &bytes.Buffer{}})
	var busy *BusyError
	if !errors.As(err, &busy) || !strings.Contains(err.Error(), "pid "+itoa(os.Getpid())) {
		t.Fatalf("second runtime on a held state: %v, want refused naming pid %d", err, os.Getpid())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(context.Background(), Options{State: state, Out: &bytes.Buffer{}})
	if err != nil {
		t.Fatalf("after Close the state stays locked: %v", err)
	}
	again.Close()
}

func itoa(n int) string { return strconv.Itoa(n) }
