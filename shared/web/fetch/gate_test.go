package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// recordingGate lets every request through and records, for each, the
// host and the connection's remote address it was asked about, and the
// status it was left with.
type recordingGate struct {
	mu      sync.Mutex
	entered []string // "host addr"
	left    []int
	refuse  error
}

func (g *recordingGate) EnterConn(_ context.Context, host string, a netip.Addr) (fetch.GatePass, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entered = append(g.entered, host+" "+a.String())
	if g.refuse != nil {
		return nil, g.refuse
	}
	return gatePass{g}, nil
}

type gatePass struct{ g *recordingGate }

func (p gatePass) Leave(status int) {
	p.g.mu.Lock()
	defer p.g.mu.Unlock()
	p.g.left = append(p.g.left, status)
}

func (g *recordingGate) seen() ([]string, []int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.entered...), append([]int(nil), g.left...)
}

// twoServers starts a site on 127.0.0.2 and 127.0.0.3 at one port, each
// answering with its own address.
func twoServers(t *testing.T) string {
	t.Helper()
	for try := 0; try < 20; try++ {
		a, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(a.Addr().String())
		b, err := net.Listen("tcp", "127.0.0.3:"+port)
		if err != nil {
			a.Close()
			continue
		}
		for _, ln := range []net.Listener{a, b} {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "from "+strings.Split(r.Context().Value(http.LocalAddrContextKey).(net.Addr).String(), ":")[0])
			}))
			srv.Listener.Close()
			srv.Listener = ln
			srv.Start()
			t.Cleanup(srv.Close)
		}
		return port
	}
	t.Skip("no port free on both 127.0.0.2 and 127.0.0.3")
	return ""
}

// TestGateFollowsTheConnection: the gate is asked about the connection's
// real remote address. When DNS answers change mid-job, a kept-alive
// connection still goes to the old address, and the gate is that
// address's; a new connection goes to the new one, and so does the gate.
func TestGateFollowsTheConnection(t *testing.T) {
	port := twoServers(t)
	ns := startDNS(t, map[string]dnsZone{"moving.test": {a: []string{"127.0.0.2"}, ttl: 60}})
	clock := newTestClock()
	gate := &recordingGate{}
	opts := localOptions()
	opts.DNS = newCache(ns, clock)
	opts.Gate = gate
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	get := func() string {
		t.Helper()
		resp, err := f.Fetch(context.Background(), fetch.Request{URL: "http://moving.test:" + port + "/"})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Body)
	}
	want(t, "first answer", get(), "from 127.0.0.2")
	ns.mu.Lock()
	ns.zones[dns.Fqdn("moving.test")] = dnsZone{a: []string{"127.0.0.3"}, ttl: 60}
	ns.mu.Unlock()
	clock.advance(2 * 60e9)
	want(t, "answer over the kept connection", get(), "from 127.0.0.2")
	f.CloseHost("moving.test")
	want(t, "answer over a new connection", get(), "from 127.0.0.3")
	entered, left := gate.seen()
	want(t, "gate calls", fmt.Sprint(entered), "[moving.test 127.0.0.2 moving.test 127.0.0.2 moving.test 127.0.0.3]")
	want(t, "passes left", fmt.Sprint(left), "[200 200 200]")
	if a, ok := f.ServerAddr(context.Background(), "moving.test", true); !ok || a != netip.MustParseAddr("127.0.0.3") {
		t.Errorf("ServerAddr = %v, %v; want the new answer 127.0.0.3", a, ok)
	}
}

// TestGateOnTheAddressReached: a host with two addresses, the first
// refusing connections, is gated at the one its request reached only.
func TestGateOnTheAddressReached(t *testing.T) {
	site := startServer(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), nil)
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	ns := startDNS(t, map[string]dnsZone{"two.test": {a: []string{"127.0.0.3", "127.0.0.2"}, ttl: 60}})
	gate := &recordingGate{}
	opts := localOptions()
	opts.DNS = newCache(ns, newTestClock())
	opts.Gate = gate
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	mustFetch(t, f, "http://two.test:"+port+"/")
	entered, _ := gate.seen()
	want(t, "gate calls", fmt.Sprint(entered), "[two.test 127.0.0.2]")
}

// TestGateRefusalSendsNothing: a request the gate does not let through
// (its wait ended with the context) fails, and the server sees nothing.
func TestGateRefusalSendsNothing(t *testing.T) {
	var hits int
	var mu sync.Mutex
	site := startServer(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}), nil)
	gate := &recordingGate{refuse: context.DeadlineExceeded}
	opts := localOptions()
	opts.Gate = gate
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	_, err := f.Fetch(context.Background(), fetch.Request{URL: site.URL + "/"})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "ServerDelay") {
		t.Fatalf("Fetch through a refusing gate: %v, want its deadline error naming ServerDelay", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want(t, "requests the server saw", hits, 0)
}
