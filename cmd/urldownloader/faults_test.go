package main

// Local mode under faults a machine really has, each in the command's own
// process: a pause between runs longer than GiveUpAfter, a second job on
// the same results file, a hang-up.

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/cli"
)

// flakySite is a loopback server whose pages answer 500 while down
// (robots.txt 404, a usable answer); it counts page requests.
type flakySite struct {
	*httptest.Server
	down  atomic.Bool
	mu    sync.Mutex
	pages int
}

func newFlakySite(t *testing.T) *flakySite {
	t.Helper()
	s := &flakySite{}
	s.down.Store(true)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.pages++
		s.mu.Unlock()
		if s.down.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("page " + r.URL.Path + "\n"))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *flakySite) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pages
}

// writeList writes urls as a list file in dir.
func writeList(t *testing.T, dir string, urls ...string) string {
	t.Helper()
	p := filepath.Join(dir, "urls.txt")
	if err := os.WriteFile(p, []byte(strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPauseBeyondGiveUpAfter: a job stopped while its host fails, run
// again after a pause longer than GiveUpAfter, asks the host before giving
// anything up: the host answers now, and every URL is fetched.
func TestPauseBeyondGiveUpAfter(t *testing.T) {
	t.Parallel()
	const giveUpAfter = 2 * time.Second
	s := newFlakySite(t)
	dir := t.TempDir()
	in := writeList(t, dir, s.URL+"/a", s.URL+"/b", s.URL+"/c")
	out := filepath.Join(dir, "out.jsonl")
	args := []string{"--urls", in, "--state", filepath.Join(dir, "s.db"), "--out", out, "--allow-private",
		"--param", "GiveUpAfter=" + giveUpAfter.String(), "--param", "FetchDelay=100ms", "--param", "MaxBackoff=400ms"}

	first, firstErr := runner(t, args...)
	waitFor(t, time.Minute, "the first run's failed requests", func() bool { return s.requests() >= 2 })
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, first, time.Minute); code != cli.ExitInterrupted {
		t.Fatalf("first run: exit %d, want %d:\n%s", code, cli.ExitInterrupted, firstErr)
	}
	if rs := readResults(t, out); len(rs) > 0 {
		t.Fatalf("the first run ended %d urls within GiveUpAfter, want none (stopped too late?)", len(rs))
	}
	time.Sleep(giveUpAfter + time.Second)
	s.down.Store(false)
	before := s.requests()

	second, secondErr := runner(t, args...)
	if code := exitCode(t, second, time.Minute); code != cli.ExitOK {
		t.Errorf("second run: exit %d, want 0:\n%s", code, secondErr)
	}
	rs := readResults(t, out)
	if len(rs) != 3 {
		t.Fatalf("%d results, want 3", len(rs))
	}
	for _, r := range rs {
		if r.Status != result.StatusFetched {
			t.Errorf("%s: %s %q, want fetched (the host answers now)", r.URL, r.Status, r.Error)
		}
	}
	if n := s.requests() - before; n < 3 {
		t.Errorf("the second run made %d page requests, want the 3 URLs asked for", n)
	}
}

// TestOneWriterPerResultsFile: while a job writes a results file, a
// second job on it (another state, with --overwrite; or any job while a
// server holds it, even empty) is refused at once, naming the holder, and
// the file keeps every result of the first job.
func TestOneWriterPerResultsFile(t *testing.T) {
	t.Parallel()
	s := newFlakySite(t)
	s.down.Store(false)
	dir := t.TempDir()
	var urls []string
	for i := range 20 {
		urls = append(urls, fmt.Sprintf("%s/p%d", s.URL, i))
	}
	in := writeList(t, dir, urls...)
	out := filepath.Join(dir, "out.jsonl")
	first, firstErr := runner(t, "--urls", in, "--state", filepath.Join(dir, "a.db"), "--out", out, "--allow-private",
		"--param", "FetchDelay=200ms")
	waitFor(t, time.Minute, "the first job's first results", func() bool {
		b, _ := os.ReadFile(out)
		return bytes.Count(b, []byte("\n")) >= 2
	})

	holder := "pid " + strconv.Itoa(first.Process.Pid)
	for name, args := range map[string][]string{
		"another job with --overwrite": {"--urls", in, "--state", filepath.Join(dir, "b.db"), "--out", out, "--overwrite", "--allow-private"},
		"a server with --overwrite":    {"--listen", "127.0.0.1:0", "--state", filepath.Join(dir, "c.db"), "--out", out, "--overwrite", "--allow-private"},
	} {
		second, secondErr := runner(t, args...)
		if code := exitCode(t, second, time.Minute); code != cli.ExitUsage || !strings.Contains(secondErr.String(), holder) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d naming %s", name, code, secondErr, cli.ExitUsage, holder)
		}
	}
	if code := exitCode(t, first, 2*time.Minute); code != cli.ExitOK {
		t.Fatalf("first job: exit %d:\n%s", code, firstErr)
	}
	if rs := readResults(t, out); len(rs) != len(urls) {
		t.Errorf("%d results in the file, want the first job's %d", len(rs), len(urls))
	}

	// A server holds an empty results file: a job on it is refused too.
	empty := filepath.Join(dir, "empty.jsonl")
	server, _ := runner(t, "--listen", "127.0.0.1:0", "--state", filepath.Join(dir, "d.db"), "--out", empty, "--allow-private")
	waitFor(t, time.Minute, "the server's state", func() bool {
		_, err := os.Stat(filepath.Join(dir, "d.db"))
		return err == nil
	})
	job, jobErr := runner(t, "--urls", in, "--state", filepath.Join(dir, "e.db"), "--out", empty, "--allow-private")
	if code := exitCode(t, job, time.Minute); code != cli.ExitUsage || !strings.Contains(jobErr.String(), "pid "+strconv.Itoa(server.Process.Pid)) {
		t.Errorf("a job on a server's empty results file: exit %d, stderr %q; want exit %d naming the server", code, jobErr, cli.ExitUsage)
	}
	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = exitCode(t, server, time.Minute)
}
