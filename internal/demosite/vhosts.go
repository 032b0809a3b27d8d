package demosite

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Virtual hosts: many named hosts served by one listener, the Host header
// picking the host, with the same robots.txt and pages as Start's. Start
// opens a listener per host, and a process holds at most its descriptor
// limit of them (20,000 here): a farm of 100,000 hosts must be served by
// name, the names resolved to the listener's address (a resolver table or
// a DNS server on loopback). The site keeps per-host counters instead of
// every request, so a job of millions of requests costs it a few hundred
// bytes a host.

// VHostOptions shape a virtual-host site.
type VHostOptions struct {
	// IP is the loopback address to listen on (default 127.0.0.2).
	IP string
	// Addrs, when above 1, is how many consecutive loopback addresses
	// from IP the site listens on, all on one port; AddrOf spreads the
	// names over them. A client's connections to one address and port
	// must each have their own local port: 500,000 connections to one
	// listener in ten minutes (TIME_WAIT keeps a closed one's port for a
	// minute) left connect() searching the ephemeral range, 36% of the
	// client's CPU, a cost no real list of 100,000 hosts on their own
	// servers has.
	Addrs int
	// Latency is added to every response.
	Latency time.Duration
	// Robots, when set, is every host's /robots.txt; otherwise 404.
	Robots string
}

// VHosts is a running virtual-host site.
type VHosts struct {
	opts  VHostOptions
	srv   *http.Server
	addrs []netip.Addr
	port  int

	conns    atomic.Int64
	requests atomic.Int64

	mu    sync.Mutex
	hosts map[string]*vhostStats
	// open and inflight are connections open and requests in flight now;
	// the peaks their most at once.
	open, openPeak         int
	inflight, inflightPeak int
	// lastStart is the latest request's start on the whole site;
	// minStartGap the least time between two requests' starts (-1: fewer
	// than two), whatever their hosts: a server's view of its load.
	lastStart   time.Time
	minStartGap time.Duration
}

// vhostStats is one host as the server saw it.
type vhostStats struct {
	requests, robots, conns int
	inflight                int
	overlaps                int
	lastEnd                 time.Time
	minGap                  time.Duration // -1: fewer than two requests
}

// connKey carries a connection's first host through its requests.
type connKey struct{}

type connHost struct{ host string }

// StartVHosts serves the site until Close.
func StartVHosts(opts VHostOptions) (*VHosts, error) {
	if opts.IP == "" {
		opts.IP = "127.0.0.2"
	}
	addr, err := netip.ParseAddr(opts.IP)
	if err != nil {
		return nil, fmt.Errorf("virtual hosts: %w", err)
	}
	lns, addrs, err := listenAll(addr, max(1, opts.Addrs))
	if err != nil {
		return nil, err
	}
	s := &VHosts{opts: opts, addrs: addrs, port: lns[0].Addr().(*net.TCPAddr).Port, hosts: map[string]*vhostStats{}, minStartGap: -1}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serve),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			s.conns.Add(1)
			return context.WithValue(ctx, connKey{}, &connHost{})
		},
		ConnState: func(_ net.Conn, st http.ConnState) {
			s.mu.Lock()
			defer s.mu.Unlock()
			switch st {
			case http.StateNew:
				s.open++
				s.openPeak = max(s.openPeak, s.open)
			case http.StateClosed, http.StateHijacked:
				s.open--
			}
		},
	}
	for _, ln := range lns {
		go func() { _ = s.srv.Serve(ln) }()
	}
	return s, nil
}

// listenAll listens on n consecutive loopback addresses from first, on one
// port: the first listener's, chosen by the kernel (a few tries, should
// another socket hold that port on a later address).
func listenAll(first netip.Addr, n int) ([]net.Listener, []netip.Addr, error) {
	var lastErr error
	for range 5 {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(first, 0).String())
		if err != nil {
			return nil, nil, fmt.Errorf("virtual hosts: listen on %s: %w", first, err)
		}
		port := uint16(ln.Addr().(*net.TCPAddr).Port)
		lns, addrs := []net.Listener{ln}, []netip.Addr{first}
		a := first
		for len(lns) < n {
			a = a.Next()
			if !a.IsLoopback() {
				closeAll(lns)
				return nil, nil, fmt.Errorf("virtual hosts: %d addresses from %s leave the loopback range", n, first)
			}
			l, err := net.Listen("tcp", netip.AddrPortFrom(a, port).String())
			if err != nil {
				lastErr = err
				break
			}
			lns, addrs = append(lns, l), append(addrs, a)
		}
		if len(lns) == n {
			return lns, addrs, nil
		}
		closeAll(lns)
	}
	return nil, nil, fmt.Errorf("virtual hosts: no port free on all %d addresses from %s: %w", n, first, lastErr)
}

func closeAll(lns []net.Listener) {
	for _, l := range lns {
		_ = l.Close()
	}
}

// Addr is the first listener's address; Port the port all listen on.
func (s *VHosts) Addr() netip.Addr { return s.addrs[0] }

// Addrs are the addresses the site listens on.
func (s *VHosts) Addrs() []netip.Addr { return s.addrs }

// AddrOf is the address name resolves to: one of Addrs, by a hash of the
// name (any name is served on every address; the Host header picks).
func (s *VHosts) AddrOf(name string) netip.Addr {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(strings.TrimSuffix(name, "."))))
	return s.addrs[h.Sum32()%uint32(len(s.addrs))]
}

// Port is the listener's port.
func (s *VHosts) Port() int { return s.port }

// VHostName is the i-th host's name (without the port): any name is
// served, these are the ones the benchmarks use.
func VHostName(i int) string { return fmt.Sprintf("h%06d.vhosts.test", i) }

// URL is page i of the host named name.
func (s *VHosts) URL(name string, i int) string {
	return fmt.Sprintf("http://%s:%d/page/%d", name, s.port, i)
}

func (s *VHosts) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	host := strings.ToLower(r.Host)
	s.requests.Add(1)
	s.mu.Lock()
	h := s.hosts[host]
	if h == nil {
		h = &vhostStats{minGap: -1}
		s.hosts[host] = h
	}
	if c, ok := r.Context().Value(connKey{}).(*connHost); ok && c.host == "" {
		// A connection counts for the host of its first request.
		c.host = host
		h.conns++
	}
	if h.inflight > 0 {
		h.overlaps++
	}
	if !h.lastEnd.IsZero() {
		if g := start.Sub(h.lastEnd); h.minGap < 0 || g < h.minGap {
			h.minGap = g
		}
	}
	if !s.lastStart.IsZero() {
		if g := start.Sub(s.lastStart); s.minStartGap < 0 || g < s.minStartGap {
			s.minStartGap = g
		}
	}
	s.lastStart = start
	h.inflight++
	h.requests++
	s.inflight++
	s.inflightPeak = max(s.inflightPeak, s.inflight)
	if r.URL.Path == "/robots.txt" {
		h.robots++
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		h.inflight--
		s.inflight--
		h.lastEnd = time.Now()
		s.mu.Unlock()
	}()
	servePage(w, r, r.Host, s.opts.Latency, s.opts.Robots, nil)
}

// VHostStats is the site's view of a run.
type VHostStats struct {
	// Hosts asked at least once; Requests in all (Robots of them for
	// robots.txt).
	Hosts, Requests, Robots int
	// Conns are the connections accepted; MaxHostConns the most any host
	// had (a connection counts for its first request's host).
	Conns        int64
	MaxHostConns int
	// OpenPeak is the most connections open at once (the client's
	// sockets), InflightPeak the most requests in flight at once (the
	// hosts being fetched from at that instant).
	OpenPeak, InflightPeak int
	// Overlaps are requests that came while another to the same host was
	// in flight (the politeness rule wants 0).
	Overlaps int
	// MinGap is the smallest time between a response's end and the next
	// request to the same host (-1: no host had two requests); BelowGap
	// counts hosts whose smallest gap was below the delay given to Stats.
	MinGap   time.Duration
	BelowGap int
	// MinStartGap is the least time between two requests' starts on the
	// whole site, whatever their hosts (-1: fewer than two requests).
	MinStartGap time.Duration
}

// Stats summarizes what the site saw, judging gaps against d.
func (s *VHosts) Stats(d time.Duration) VHostStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := VHostStats{Hosts: len(s.hosts), Conns: s.conns.Load(), MinGap: -1, OpenPeak: s.openPeak, InflightPeak: s.inflightPeak, MinStartGap: s.minStartGap}
	for _, h := range s.hosts {
		st.Requests += h.requests
		st.Robots += h.robots
		st.Overlaps += h.overlaps
		st.MaxHostConns = max(st.MaxHostConns, h.conns)
		if h.minGap >= 0 {
			if st.MinGap < 0 || h.minGap < st.MinGap {
				st.MinGap = h.minGap
			}
			if h.minGap < d {
				st.BelowGap++
			}
		}
	}
	return st
}

// Requests is how many requests the site has seen so far.
func (s *VHosts) Requests() int64 { return s.requests.Load() }

// Close stops the site.
func (s *VHosts) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = s.srv.Close()
	}
}
