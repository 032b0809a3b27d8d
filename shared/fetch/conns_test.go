package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/fetch"
)

// TestMaxConns: requests beyond the cap, with no idle connection to give
// back, fail as KindLocal without reaching a host; idle connections are
// closed to make room; slots come back when requests end.
func TestMaxConns(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	// The servers' Close waits for the blocked handlers: free them first,
	// also when the test fails early.
	defer unblock()
	var mu sync.Mutex
	seen := map[string]int{}
	blocking := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Host]++
		mu.Unlock()
		if r.URL.Path == "/block" {
			<-release
		}
		io.WriteString(w, "ok")
	})
	a := startServer(t, "127.0.0.2", blocking, nil)
	b := startServer(t, "127.0.0.3", blocking, nil)
	c := startServer(t, "127.0.0.4", blocking, nil)
	opts := localOptions()
	opts.MaxConns = 2
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	ctx := context.Background()

	// A's connection stays idle in the pool (one of MaxConns/2 idle slots).
	if _, err := f.Fetch(ctx, fetch.Request{URL: a.URL + "/"}); err != nil {
		t.Fatal(err)
	}
	if n := f.OpenConns(); n != 1 {
		t.Fatalf("%d connections open after one request, want 1 (kept alive)", n)
	}
	// Two requests hang: the second needs A's idle slot, which is closed
	// for it.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, s := range []string{b.URL, c.URL} {
		wg.Go(func() {
			_, err := f.Fetch(ctx, fetch.Request{URL: s + "/block"})
			errs <- err
		})
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return seen[hostOf(b.URL)] == 1 && seen[hostOf(c.URL)] == 1 })
	if n := f.OpenConns(); n != 2 {
		t.Errorf("%d connections open with two requests in flight, want 2", n)
	}
	// A third is refused before any byte is sent.
	_, err := f.Fetch(ctx, fetch.Request{URL: a.URL + "/again"})
	if fetch.KindOf(err) != fetch.KindLocal || !errors.Is(err, fetch.ErrConnLimit) || fetch.IsTransient(err) {
		t.Fatalf("request beyond the cap: %v (kind %v), want KindLocal wrapping ErrConnLimit, not transient", err, fetch.KindOf(err))
	}
	mu.Lock()
	if seen[hostOf(a.URL)] != 1 {
		t.Errorf("host A saw %d requests, want 1: the refused one must not reach it", seen[hostOf(a.URL)])
	}
	mu.Unlock()
	unblock()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("request in flight: %v", err)
		}
	}
	if _, err := f.Fetch(ctx, fetch.Request{URL: a.URL + "/after"}); err != nil {
		t.Errorf("request after the others ended: %v", err)
	}
	if n := f.OpenConns(); n > 2 {
		t.Errorf("%d connections open, above MaxConns 2", n)
	}
}

func hostOf(u string) string { return strings.TrimPrefix(u, "http://") }

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// emfileChild marks the subprocess of TestOutOfDescriptorsIsLocal.
const emfileChild = "FETCH_TEST_EMFILE_CHILD"

// TestOutOfDescriptorsIsLocal provokes a real EMFILE: a subprocess lowers
// its descriptor limit, uses up every descriptor, then fetches. The error
// must be KindLocal (the host is not to blame), not a connection failure.
func TestOutOfDescriptorsIsLocal(t *testing.T) {
	if os.Getenv(emfileChild) == "1" {
		emfileFetch(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOutOfDescriptorsIsLocal$", "-test.v")
	cmd.Env = append(os.Environ(), emfileChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "EMFILE-OK") {
		t.Fatalf("subprocess: %v\n%s", err, out)
	}
}

func emfileFetch(t *testing.T) {
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	fill := func() {
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				if !errors.Is(err, syscall.EMFILE) {
					t.Fatalf("filling the descriptor table: %v", err)
				}
				return
			}
			held = append(held, f)
		}
	}
	// The runtime may free a descriptor between the fill and the dial (the
	// server's listener is in this process too): then the dial gets it, the
	// server cannot accept, and the request times out. Fill again and
	// retry; a real EMFILE must come within a few tries.
	f := fetch.New(localOptions(), fixedNow)
	var err error
	for try := 0; try < 5; try++ {
		fill()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = f.Fetch(ctx, fetch.Request{URL: srv.URL + "/"})
		cancel()
		if errors.Is(err, syscall.EMFILE) {
			break
		}
	}
	if !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("fetch with no descriptor left: %v, want EMFILE", err)
	}
	if k := fetch.KindOf(err); k != fetch.KindLocal || fetch.IsTransient(err) {
		t.Fatalf("EMFILE classified %v (transient %v), want local and not transient: %v", k, fetch.IsTransient(err), err)
	}
	fmt.Println("EMFILE-OK", err)
}
