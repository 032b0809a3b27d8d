package engine_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/engine"
)

// TestServerGateKeepsSlotsForOtherServers: eight hosts on one server
// address (ports of one IP) and four hosts each on an address of its own
// share four worker slots. The shared address's requests are spaced by
// ServerDelay, one at a time, and its hosts, which could only wait there,
// give their slots up to the others: the hosts on their own addresses are
// done long before the shared address's queue is (virtual time: exact).
func TestServerGateKeepsSlotsForOtherServers(t *testing.T) {
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay, p.ServerDelay, p.ServerConnections = time.Second, time.Second, 1
		p.MaxConcurrentHosts = 4
		p.RespectRobots = false
		p.FetchTimeout = 5 * time.Second
		e := newEnv(t, p)
		e.gate = engine.NewGate(engine.RealClock{}, nil)
		start := time.Now()
		var mu sync.Mutex
		var shared []served
		lastOwn := time.Time{}
		record := func(own bool) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				sp := served{start: time.Now()}
				time.Sleep(20 * time.Millisecond)
				w.Write([]byte("ok"))
				sp.end = time.Now()
				mu.Lock()
				defer mu.Unlock()
				if own {
					lastOwn = sp.end
				} else {
					shared = append(shared, sp)
				}
			}
		}
		var urls []string
		for range 8 {
			srv := e.net.NewServer("127.0.0.9", record(false))
			t.Cleanup(srv.Close)
			for i := range 3 {
				urls = append(urls, fmt.Sprintf("%s/p%d", srv.URL, i))
			}
		}
		e.seed(urls...)
		time.Sleep(10 * time.Millisecond) // the shared hosts are due first
		var own []string
		for range 4 {
			srv := e.net.NewServer(loopbackIP(), record(true))
			t.Cleanup(srv.Close)
			for i := range 3 {
				own = append(own, fmt.Sprintf("%s/p%d", srv.URL, i))
			}
		}
		e.seed(own...)
		sum := e.runUntil(len(urls)+len(own), 3*time.Minute)
		if n := len(e.pub.all()); n != len(urls)+len(own) {
			t.Fatalf("%d results, want %d", n, len(urls)+len(own))
		}
		// Hosts that gave their slot up at the gate made no request.
		if sum.Requests != int64(len(urls)+len(own)) {
			t.Errorf("the run counted %d requests, want the %d made", sum.Requests, len(urls)+len(own))
		}
		mu.Lock()
		defer mu.Unlock()
		slices.SortFunc(shared, func(a, b served) int { return a.start.Compare(b.start) })
		for i := 1; i < len(shared); i++ {
			if gap := shared[i].start.Sub(shared[i-1].end); gap < p.ServerDelay {
				t.Errorf("shared address: request %d started %v after the previous one ended, want at least ServerDelay %v", i, gap, p.ServerDelay)
			}
		}
		sharedDone := shared[len(shared)-1].end.Sub(start)
		ownDone := lastOwn.Sub(start)
		t.Logf("hosts on their own addresses done after %v, the shared address after %v", ownDone, sharedDone)
		// Their 3 requests a FetchDelay apart, and a slot freed by a
		// shared host at its next request: well under the shared queue's
		// 24 x ServerDelay.
		if ownDone > 10*time.Second {
			t.Errorf("hosts on their own addresses done after %v, want under 10s: the shared address's hosts held the slots", ownDone)
		}
	})
}

// TestServerGateReadsPastAHeldAddress: on AWS every name of one address
// is placed in one virtual shard (hostqueue.Place), beside hosts alone on
// theirs. When more of that address's hosts are due than the shard's due
// look takes (MaxConcurrentHosts+1), the look is all held hosts; it must
// read on past them, or the hosts alone wait for the whole address.
func TestServerGateReadsPastAHeldAddress(t *testing.T) {
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay, p.ServerDelay, p.ServerConnections = time.Second, time.Second, 1
		p.MaxConcurrentHosts = 4
		p.RespectRobots = false
		e := newEnv(t, p)
		e.gate = engine.NewGate(engine.RealClock{}, nil)
		shard := 3
		e.shard = &shard
		start := time.Now()
		var mu sync.Mutex
		var lastOwn time.Time
		sharedSrv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
		var urls []string
		for range 30 {
			srv := e.net.NewServer("127.0.0.9", sharedSrv)
			t.Cleanup(srv.Close)
			for i := range 2 {
				urls = append(urls, fmt.Sprintf("%s/p%d", srv.URL, i))
			}
		}
		e.seed(urls...)
		time.Sleep(10 * time.Millisecond) // the shared hosts are due first
		var own []string
		for range 2 {
			srv := e.net.NewServer(loopbackIP(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("ok"))
				mu.Lock()
				lastOwn = time.Now()
				mu.Unlock()
			}))
			t.Cleanup(srv.Close)
			own = append(own, srv.URL+"/only")
		}
		e.seed(own...)
		e.runUntil(len(urls)+len(own), 5*time.Minute)
		if n := len(e.pub.all()); n != len(urls)+len(own) {
			t.Fatalf("%d results, want %d", n, len(urls)+len(own))
		}
		mu.Lock()
		defer mu.Unlock()
		// The shared address takes 60 x ServerDelay; the hosts alone
		// need one request each.
		took := lastOwn.Sub(start)
		t.Logf("hosts alone on their addresses fetched after %v", took)
		if took > 15*time.Second {
			t.Errorf("hosts alone on their addresses fetched after %v, want within 15s: the due look never read past the held address", took)
		}
	})
}

// served is one request as a server saw it.
type served struct{ start, end time.Time }
