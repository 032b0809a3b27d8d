// Package demosite serves a small website on several loopback addresses
// (127.0.0.2, 127.0.0.3, ...: every 127/8 address is loopback on Linux, so
// each is a distinct host without DNS), and records every request with the
// server's own timestamps, so tests and benchmarks can check politeness from
// the site's side. StartHostile serves the misbehaving hosts of the real web
// beside it (refusing, hanging, dripping, resetting, bad robots.txt,
// redirect loops, a name that does not resolve), each with the ending a
// correct downloader gives its URLs.
package demosite

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options shape a site.
type Options struct {
	// Hosts is how many loopback hosts to serve; they get 127.0.0.(FirstIP+i).
	Hosts int
	// FirstIP is the last octet of the first host (default 2).
	FirstIP int
	// Latency is added to every response (a small fixed server time).
	Latency time.Duration
	// Robots, when set, is served as /robots.txt on every host; otherwise
	// robots.txt is 404 (allow everything).
	Robots string
	// Handler, when set, serves every path except /robots.txt instead of the
	// default pages (tests use it for special routes).
	Handler http.Handler
	// Listen, when set, opens each host's listener on ip instead of a
	// loopback socket: tests on a virtual clock pass an in-memory
	// network's (fetchtest.Network.Listen).
	Listen func(ip string) (net.Listener, error)
	// TLS serves every host over HTTPS, with a certificate for its IP
	// address signed by a test CA the site generates at start (CAPEM):
	// a client trusts it through its root pool (or SSL_CERT_FILE).
	TLS bool
	// HostsPerListener, above 1, serves that many hosts on each listening
	// socket, to save descriptors at thousands of hosts: each host keeps
	// its own 127.x address (no resolver needed) and the hosts of one
	// socket share its port, the socket bound to every address of the
	// loopback device (0.0.0.0 with SO_BINDTODEVICE lo, so nothing off
	// the machine reaches it); the accepted connection's local address
	// says which host it is for. They share one accept queue. Ignored with
	// Listen.
	HostsPerListener int
}

// Request is one request as the server saw it.
type Request struct {
	Host  string    `json:"host"`
	Path  string    `json:"path"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Site is a running demo site.
type Site struct {
	opts    Options
	hosts   []string
	servers []*http.Server
	// listeners are closed by hand if Start fails (the servers close
	// theirs once serving).
	listeners []net.Listener
	tls       *siteTLS
	// known is the set of hosts, for listeners shared by several.
	known map[string]bool

	mu       sync.Mutex
	requests []Request
	// conns counts the TCP connections each host accepted, handshakes its
	// TLS handshakes.
	conns      map[string]int
	handshakes map[string]Handshakes
}

// Handshakes counts one host's TLS handshakes: Full ones (a certificate
// sent and verified, a key exchange) and Resumed ones (a session ticket
// the client kept from an earlier connection).
type Handshakes struct {
	Full, Resumed int
}

// Start serves the site until Close.
func Start(opts Options) (*Site, error) {
	if opts.Hosts < 1 {
		opts.Hosts = 1
	}
	if opts.FirstIP == 0 {
		opts.FirstIP = 2
	}
	if opts.FirstIP < 2 || opts.FirstIP-2+opts.Hosts > 250*250 {
		return nil, fmt.Errorf("demo site: %d hosts do not fit in 127.0.0.0/8 from .%d", opts.Hosts, opts.FirstIP)
	}
	s := &Site{opts: opts, known: map[string]bool{}, conns: map[string]int{}, handshakes: map[string]Handshakes{}}
	ips := make([]string, opts.Hosts)
	for i := range ips {
		// Last octets stay in 2..251 so no host is a .0, .1 or .255.
		n := opts.FirstIP - 2 + i
		ips[i] = fmt.Sprintf("127.0.%d.%d", n/250, n%250+2)
	}
	if opts.TLS {
		t, err := newSiteTLS(ips, s.handshake)
		if err != nil {
			return nil, err
		}
		s.tls = t
	}
	per := opts.HostsPerListener
	if per <= 1 || opts.Listen != nil {
		per = 1
	}
	var serve []func()
	for first := 0; first < len(ips); first += per {
		run, err := s.listen(ips[first:min(first+per, len(ips))])
		if err != nil {
			for _, l := range s.listeners {
				l.Close()
			}
			return nil, err
		}
		serve = append(serve, run)
	}
	// Serving starts once every host is known: a shared listener's
	// connections look their host up.
	for _, run := range serve {
		go run()
	}
	return s, nil
}

// listen opens one listener for the hosts at ips (on the address itself
// for one, on every loopback address, one port for all, for several) and
// returns what serves it.
func (s *Site) listen(ips []string) (func(), error) {
	var ln net.Listener
	var err error
	switch {
	case s.opts.Listen != nil:
		ln, err = s.opts.Listen(ips[0])
	case len(ips) == 1:
		ln, err = net.Listen("tcp", ips[0]+":0")
	default:
		ln, err = listenLoopback()
	}
	if err != nil {
		return nil, fmt.Errorf("demo site: listen on %s: %w", ips[0], err)
	}
	s.listeners = append(s.listeners, ln)
	// host is the one host of a listener of its own; "" when shared, where
	// each connection's local address names it.
	host, mine := ln.Addr().String(), []string{ln.Addr().String()}
	if len(ips) > 1 {
		port := ln.Addr().(*net.TCPAddr).Port
		mine = nil
		for _, ip := range ips {
			mine = append(mine, net.JoinHostPort(ip, strconv.Itoa(port)))
		}
		host = ""
	}
	for _, h := range mine {
		s.hosts = append(s.hosts, h)
		s.known[h] = true
	}
	if s.tls != nil {
		cfg, err := s.tls.listenerConfig(mine)
		if err != nil {
			return nil, err
		}
		ln = tls.NewListener(ln, cfg)
	}
	srv := &http.Server{
		Handler:           s.handler(host),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.accepted(c, host)
			}
		},
		// HTTP/1.1 only, as over plain HTTP: one request at a time per
		// connection either way, and the handshake counts stay simple.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	s.servers = append(s.servers, srv)
	return func() { _ = srv.Serve(ln) }, nil
}

// The ports of shared listeners lie below the kernel's ephemeral range
// (32768-60999 by default): after a run, clients' connections hold
// thousands of those ports (in TIME_WAIT, bound to 127.0.0.1), and a
// wildcard bind to port 0 searches past every one of them, seconds per
// listener when there are thousands. nextSharedPort counts the ports
// handed out; one another program holds is skipped.
const sharedPortLo, sharedPortHi = 20000, 32767

var nextSharedPort atomic.Int64

// listenLoopback listens on a free port of every address of the loopback
// device: 0.0.0.0 bound to the device "lo", so connections from other
// machines never reach it.
func listenLoopback() (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptString(int(fd), syscall.SOL_SOCKET, syscall.SO_BINDTODEVICE, "lo")
		}); err != nil {
			return err
		}
		return serr
	}}
	var err error
	for range sharedPortHi - sharedPortLo + 1 {
		port := sharedPortLo + (nextSharedPort.Add(1)-1)%(sharedPortHi-sharedPortLo+1)
		var ln net.Listener
		ln, err = lc.Listen(context.Background(), "tcp4", fmt.Sprintf("0.0.0.0:%d", port))
		if !errors.Is(err, syscall.EADDRINUSE) {
			return ln, err
		}
	}
	return nil, err
}

// accepted counts a new connection for its host (host, or the connection's
// local address on a shared listener); one to an address the site does not
// serve is closed.
func (s *Site) accepted(c net.Conn, host string) {
	if host == "" {
		host = c.LocalAddr().String()
		if !s.known[host] {
			_ = c.Close()
			return
		}
	}
	s.mu.Lock()
	s.conns[host]++
	s.mu.Unlock()
}

// handshake counts one TLS handshake of host.
func (s *Site) handshake(host string, resumed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.handshakes[host]
	if resumed {
		h.Resumed++
	} else {
		h.Full++
	}
	s.handshakes[host] = h
}

// Conns returns the TCP connections each host has accepted so far.
func (s *Site) Conns() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.conns)
}

// Handshakes returns each host's TLS handshakes so far (none without
// Options.TLS).
func (s *Site) Handshakes() map[string]Handshakes {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.handshakes)
}

// CAPEM is the PEM certificate of the CA that signed the hosts'
// certificates (nil without Options.TLS).
func (s *Site) CAPEM() []byte {
	if s.tls == nil {
		return nil
	}
	return slices.Clone(s.tls.caPEM)
}

// scheme is the URLs' scheme.
func (s *Site) scheme() string {
	if s.tls != nil {
		return "https"
	}
	return "http"
}

// Hosts returns the served host:port names.
func (s *Site) Hosts() []string { return append([]string(nil), s.hosts...) }

// URL returns the URL of page i on host h.
func (s *Site) URL(h string, i int) string { return fmt.Sprintf("%s://%s/page/%d", s.scheme(), h, i) }

// URLs returns pages 0..perHost-1 of every host.
func (s *Site) URLs(perHost int) []string {
	var out []string
	for _, h := range s.hosts {
		for i := 0; i < perHost; i++ {
			out = append(out, s.URL(h, i))
		}
	}
	return out
}

// Body is the body the default handler serves for host and path, so a test
// can check that a result carries the right page.
func Body(host, path string) string {
	return fmt.Sprintf("demo page %s%s\n", host, path)
}

// handler serves host's pages; host "" is a shared listener's, where the
// request's local address names the host.
func (s *Site) handler(host string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		host := host
		if host == "" {
			if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
				host = a.String()
			}
		}
		defer func() {
			s.mu.Lock()
			s.requests = append(s.requests, Request{Host: host, Path: r.URL.Path, Start: start, End: time.Now()})
			s.mu.Unlock()
		}()
		servePage(w, r, host, s.opts.Latency, s.opts.Robots, s.opts.Handler)
	})
}

// servePage answers one request of host the way every demo site does:
// after latency, robots (404 when empty) as robots.txt, then handler when
// set, else the large and text routes and the pages under /page/.
func servePage(w http.ResponseWriter, r *http.Request, host string, latency time.Duration, robots string, handler http.Handler) {
	if latency > 0 {
		time.Sleep(latency)
	}
	if r.URL.Path == "/robots.txt" {
		if robots == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(robots))
		return
	}
	if handler != nil {
		handler.ServeHTTP(w, r)
		return
	}
	if serveLarge(w, r) || serveText(w, r) {
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/page/") {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte(Body(host, r.URL.Path)))
}

// RequestCount is how many requests the site has logged so far.
func (s *Site) RequestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Requests returns every request seen so far, in arrival order per host.
func (s *Site) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]Request(nil), s.requests...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Gap is the smallest spacing seen on one host: from the end of one
// response to the start of the next request (the politeness rule).
type Gap struct {
	Host     string
	Min      time.Duration
	Requests int
}

// Gaps returns, per host with at least two requests, the smallest gap
// between a response's end and the next request's start.
func Gaps(reqs []Request) map[string]Gap {
	by := map[string][]Request{}
	for _, r := range reqs {
		by[r.Host] = append(by[r.Host], r)
	}
	out := map[string]Gap{}
	for h, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
		g := Gap{Host: h, Requests: len(rs), Min: -1}
		for i := 1; i < len(rs); i++ {
			d := rs[i].Start.Sub(rs[i-1].End)
			if g.Min < 0 || d < g.Min {
				g.Min = d
			}
		}
		if len(rs) > 1 {
			out[h] = g
		}
	}
	return out
}

// MinGap is the smallest gap over all hosts (-1 when no host had two
// requests).
func MinGap(reqs []Request) (time.Duration, string) {
	min, host := time.Duration(-1), ""
	for h, g := range Gaps(reqs) {
		if min < 0 || g.Min < min {
			min, host = g.Min, h
		}
	}
	return min, host
}

// Close stops every host.
func (s *Site) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = srv.Close()
		}
	}
}

// PageIndex parses the page number of a default page path ("/page/7").
func PageIndex(path string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(path, "/page/"))
	return n, err == nil && strings.HasPrefix(path, "/page/")
}

// SkewedURLs is the skewed, shuffled workload of the reference design's
// integration test: the first few hosts get many pages, the rest one or
// two, all shuffled reproducibly from seed.
func (s *Site) SkewedURLs(many int, seed uint64) []string {
	var out []string
	for i, h := range s.hosts {
		n := 1 + i%2
		switch {
		case i < 3:
			n = many
		case i < 10:
			n = max(many/4, 1)
		}
		for p := 0; p < n; p++ {
			out = append(out, s.URL(h, p))
		}
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
