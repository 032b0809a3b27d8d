package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
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

// connCounter counts, per server, the connections accepted and closed and
// the requests served.
type connCounter struct {
	mu                     sync.Mutex
	opened, closed, served int
}

func (c *connCounter) state(_ net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew:
		c.opened++
	case http.StateClosed, http.StateHijacked:
		c.closed++
	}
}

func (c *connCounter) get() (opened, closed, served int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.closed, c.served
}

// countingServer is a server on ip that answers "ok" and counts.
func countingServer(t *testing.T, ip string, h http.HandlerFunc) (*connCounter, string) {
	t.Helper()
	c := &connCounter{}
	srv := startServer(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.served++
		c.mu.Unlock()
		if h != nil {
			h(w, r)
		}
		io.WriteString(w, "ok")
	}), c.state)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return c, port
}

func mustFetch(t *testing.T, f *fetch.Fetcher, u string) {
	t.Helper()
	resp, err := f.Fetch(context.Background(), fetch.Request{URL: u})
	if err != nil {
		t.Fatalf("Fetch %s: %v", u, err)
	}
	if string(resp.Body) != "ok" {
		t.Fatalf("Fetch %s: body %q", u, resp.Body)
	}
}

// TestCloseHost: CloseHost closes that host's idle connection, and only
// its: the next request to it dials again and succeeds (also at once,
// before the transport's pool has noticed the close: it is sent once, on a
// new connection), another host's connection is still reused.
func TestCloseHost(t *testing.T) {
	a, portA := countingServer(t, "127.0.0.2", nil)
	b, portB := countingServer(t, "127.0.0.3", nil)
	opts := localOptions()
	opts.Resolve = map[string][]netip.Addr{
		"a.test": {netip.MustParseAddr("127.0.0.2")},
		"b.test": {netip.MustParseAddr("127.0.0.3")},
	}
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	urlA, urlB := "http://a.test:"+portA+"/", "http://b.test:"+portB+"/"
	mustFetch(t, f, urlA)
	mustFetch(t, f, urlB)
	mustFetch(t, f, urlA)
	if opened, _, _ := a.get(); opened != 1 {
		t.Fatalf("host A: %d connections for two requests, want 1 (kept alive)", opened)
	}
	const rounds = 30
	for i := range rounds {
		f.CloseHost("A.test") // any case, as a URL may spell it
		if i == 0 {
			want(t, "open connections after CloseHost", f.OpenConns(), 1)
		}
		mustFetch(t, f, urlA)
		mustFetch(t, f, urlB)
	}
	opened, _, served := a.get()
	want(t, "host A connections", opened, 1+rounds)
	want(t, "host A requests (each seen once)", served, 2+rounds)
	opened, closed, served := b.get()
	want(t, "host B connections (its idle one survives)", opened, 1)
	want(t, "host B closed connections", closed, 0)
	want(t, "host B requests", served, 1+rounds)
	st := f.Stats()
	want(t, "dials", st.Dials, int64(2+rounds))
	want(t, "open", st.OpenConns, int64(2))
	t.Logf("requests sent again after a stale connection: %d of %d", st.StaleRetries, rounds)
}

// TestCloseHostInFlight: a connection carrying a request is not cut; it
// closes when the request ends.
func TestCloseHostInFlight(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	a, port := countingServer(t, "127.0.0.2", func(http.ResponseWriter, *http.Request) { <-release })
	f := fetch.New(localOptions(), fixedNow)
	defer f.CloseIdleConnections()
	done := make(chan error)
	go func() {
		_, err := f.Fetch(context.Background(), fetch.Request{URL: "http://127.0.0.2:" + port + "/"})
		done <- err
	}()
	waitFor(t, func() bool { _, _, served := a.get(); return served == 1 })
	f.CloseHost("127.0.0.2")
	want(t, "open connections while the request runs", f.OpenConns(), 1)
	unblock()
	if err := <-done; err != nil {
		t.Fatalf("request in flight during CloseHost: %v", err)
	}
	want(t, "open connections after it", f.OpenConns(), 0)
	waitFor(t, func() bool { _, closed, _ := a.get(); return closed == 1 })
}

// TestIdlePoolHoldsEveryHost: more hosts than the old pool of 100 each
// keep their connection between requests, with and without a cap.
func TestIdlePoolHoldsEveryHost(t *testing.T) {
	const hosts = 150
	for _, maxConns := range []int{0, hosts} {
		t.Run(fmt.Sprintf("MaxConns %d", maxConns), func(t *testing.T) {
			c, port := countingServer(t, "127.0.0.2", nil)
			opts := localOptions()
			opts.MaxConns = maxConns
			opts.Resolve = map[string][]netip.Addr{}
			for i := range hosts {
				opts.Resolve[fmt.Sprintf("h%d.test", i)] = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
			}
			f := fetch.New(opts, fixedNow)
			defer f.CloseIdleConnections()
			for range 2 {
				for i := range hosts {
					mustFetch(t, f, fmt.Sprintf("http://h%d.test:%s/", i, port))
				}
			}
			opened, _, served := c.get()
			want(t, "requests", served, 2*hosts)
			want(t, "connections", opened, hosts)
			want(t, "dials", f.Stats().Dials, int64(hosts))
		})
	}
}

// TestMaxConnsClosesOldestIdle: at the cap a dial closes the connection
// idle the longest, and the other idle ones are still reused.
func TestMaxConnsClosesOldestIdle(t *testing.T) {
	a, portA := countingServer(t, "127.0.0.2", nil)
	b, portB := countingServer(t, "127.0.0.3", nil)
	c, portC := countingServer(t, "127.0.0.4", nil)
	opts := localOptions()
	opts.MaxConns = 2
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	mustFetch(t, f, "http://127.0.0.2:"+portA+"/")
	mustFetch(t, f, "http://127.0.0.3:"+portB+"/")
	mustFetch(t, f, "http://127.0.0.4:"+portC+"/") // closes A's
	mustFetch(t, f, "http://127.0.0.3:"+portB+"/") // B's kept
	for _, tc := range []struct {
		name string
		c    *connCounter
		want int
	}{{"A", a, 1}, {"B", b, 1}, {"C", c, 1}} {
		opened, _, _ := tc.c.get()
		want(t, "host "+tc.name+" connections", opened, tc.want)
	}
	waitFor(t, func() bool { _, closed, _ := a.get(); return closed == 1 })
	if _, closed, _ := b.get(); closed != 0 {
		t.Errorf("host B's idle connection was closed too")
	}
	want(t, "open", f.OpenConns(), 2)
}
