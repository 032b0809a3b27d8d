package main

// Local mode under faults a machine really has, each in the command's own
// process: a pause between runs longer than GiveUpAfter, a second job on
// the same results file, a hang-up.

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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

// smallDisk mounts a tmpfs of size at a new folder and returns it. The
// test is skipped when mounting is not possible (not root).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s): the disk fault tests need root", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file into dir until its disk is full and returns the
// file's path (remove it to free the space).
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for n := len(chunk) / 2; n > 0; n /= 2 { // the last few blocks too
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// pageSites starts hosts loopback servers whose pages are 6,000 bytes of
// text, each page its own, and returns their URLs, n a host.
func pageSites(t *testing.T, hosts, n int) []string {
	t.Helper()
	var urls []string
	for range hosts {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			line := []byte(r.Host + r.URL.Path + " ")
			_, _ = w.Write(bytes.Repeat(line, 6000/len(line)))
		}))
		t.Cleanup(srv.Close)
		for i := range n {
			urls = append(urls, fmt.Sprintf("%s/p%d", srv.URL, i))
		}
	}
	return urls
}

// TestDiskFull fills the disk under each of --out, --bodies, --warc and
// --state in turn, while the job runs: it stops with exit 3 and one message saying to free
// space there; the results file holds only whole lines; once space is
// freed, the same command finishes the job with every url's result exactly
// once.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	for _, place := range []string{"out", "bodies", "warc", "state"} {
		t.Run(place, func(t *testing.T) {
			t.Parallel()
			disk := smallDisk(t, "4m")
			dir := t.TempDir()
			at := func(name string) string {
				file := map[string]string{"out": "out.jsonl", "state": "s.db", "bodies": "bodies", "warc": "crawl.warc.gz"}[name]
				if name == place {
					return filepath.Join(disk, file)
				}
				return filepath.Join(dir, file)
			}
			urls := pageSites(t, 4, 15)
			args := []string{"--urls", writeList(t, dir, urls...), "--state", at("state"), "--out", at("out"),
				"--bodies", at("bodies"), "--allow-private", "--param", "FetchDelay=300ms"}
			switch place {
			case "bodies":
				args = append(args, "--param", "InlineBodyBytes=1024")
			case "warc":
				args = append(args, "--warc", at("warc"))
			}
			first, firstErr := runner(t, args...)
			waitFor(t, time.Minute, "the first results", func() bool {
				b, _ := os.ReadFile(at("out"))
				return bytes.Count(b, []byte("\n")) >= 4
			})
			filler := fill(t, disk)
			if code := exitCode(t, first, 2*time.Minute); code != cli.ExitDisk || !strings.Contains(firstErr.String(), "free space on "+disk) {
				t.Fatalf("a full disk under --%s: exit %d, want %d and a word to free space on %s:\n%s", place, code, cli.ExitDisk, disk, firstErr)
			}
			before := readResults(t, at("out")) // fails on a partial line
			if len(before) >= len(urls) {
				t.Fatalf("%d results before the disk was full, want fewer than %d (the disk too large?)", len(before), len(urls))
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			second, secondErr := runner(t, args...)
			if code := exitCode(t, second, 2*time.Minute); code != cli.ExitOK {
				t.Fatalf("the same command after freeing space: exit %d:\n%s", code, secondErr)
			}
			seen := map[string]int{}
			for _, r := range readResults(t, at("out")) {
				seen[r.URL]++
				if r.Status != result.StatusFetched {
					t.Errorf("%s: %s %q, want fetched", r.URL, r.Status, r.Error)
				}
			}
			for _, u := range urls {
				if seen[u] != 1 {
					t.Errorf("%s: %d results, want exactly one", u, seen[u])
				}
			}
			t.Logf("%d results before the disk under --%s was full, %d in all; first run:\n%s", len(before), place, len(seen), firstErr)
		})
	}
}
