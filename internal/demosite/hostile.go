package demosite

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// Kind is how a hostile host misbehaves. Each kind's doc says what a
// correct downloader ends that host's URLs as, with robots.txt obeyed (the
// default) and GiveUpAfter bounding how long a host may give no usable
// answer. HostileHost.Expect checks a result against it.
type Kind string

// The hostile kinds, one host each (two for the redirect loop).
const (
	// Refused: nothing listens on the host's address (port 1 of a loopback
	// address of its own), so every connection is refused. robots.txt
	// cannot be read, which RFC 9309 (§2.3.1.4) reads as "disallow all": the
	// URLs end denied once GiveUpAfter has passed since the first failure,
	// and no page is ever requested.
	Refused Kind = "refused"
	// Hang accepts connections, reads the request and never answers. Like
	// Refused: denied after GiveUpAfter; the host sees robots.txt probes
	// (each cut by FetchTimeout, one per back-off step) and no page request.
	Hang Kind = "hang"
	// Drip serves robots.txt (404, allow all); its pages send their headers
	// at once, then one byte of body every half second, slower than any
	// FetchTimeout the parameters allow. The URLs end fetch_error (a
	// timeout), after MaxAttempts tries or at GiveUpAfter, whichever comes
	// first.
	Drip Kind = "drip"
	// Reset serves robots.txt; its pages send headers and 16 KiB of a
	// 64 KiB body, then reset the connection (RST). fetch_error (connection
	// reset), as Drip.
	Reset Kind = "reset"
	// Robots503 answers robots.txt with 503 and no Retry-After, forever:
	// denied after GiveUpAfter, and no page is ever requested.
	Robots503 Kind = "robots-503"
	// Robots429 answers robots.txt with 429 and Retry-After (3 s by
	// default) until that long after its first 429, then 200 allowing
	// everything: the pages are fetched, none before the Retry-After ran
	// out, and GiveUpAfter never fires.
	Robots429 Kind = "robots-429"
	// BigRobots serves a 600 KiB robots.txt with Disallow rules at its
	// start (/early-a/), at 450 KiB (/early-b/) and at 590 KiB (/late/).
	// RFC 9309 has crawlers parse at least 500 KiB: /early-a/ and /early-b/
	// end denied and are never requested; /late/ ends denied, or fetched by
	// a crawler that stops at 500 KiB as the RFC allows; /page/ is fetched.
	BigRobots Kind = "big-robots"
	// LoopA and LoopB redirect to each other: loop-a/loop/N answers 301 to
	// loop-b/loop/N, which answers 301 to loop-a/loop/N, and so on. Each
	// hop ends its URL as redirect and queues the target on the other host;
	// the hop count travels with it, and the sixth hop of a chain ends as
	// fetch_error (too many redirects): a chain of five redirect results
	// (six where the target of the sixth hop is queued before it ends) and
	// one fetch_error. Only loop-a's URLs are submitted.
	LoopA Kind = "redirect-loop-a"
	LoopB Kind = "redirect-loop-b"
	// RetryAfterBeyond serves robots.txt; its pages answer 429 with
	// Retry-After of 8 days, longer than any valid GiveUpAfter: the URLs end
	// fetch_error naming the 429, at once or at GiveUpAfter at the latest,
	// never after a wait of days.
	RetryAfterBeyond Kind = "retry-after-beyond"
	// NXDomain is a name that does not resolve (it is in no resolve
	// table): fetch_error "no such host" at once, never retried (attempts
	// 0 or 1: one lookup, for robots.txt or a page, answers for every URL
	// of the name).
	NXDomain Kind = "nxdomain"
)

// Ending is what a correct downloader ends a host of kind k's URLs as, in
// a few words (the kind's doc says why).
func (k Kind) Ending() string {
	switch k {
	case Refused, Hang, Robots503:
		return "denied (robots.txt unreachable) after GiveUpAfter"
	case Drip, Reset:
		return "fetch_error after MaxAttempts or GiveUpAfter"
	case Robots429:
		return "fetched, after the Retry-After"
	case BigRobots:
		return "early paths denied and never requested, pages fetched"
	case LoopA, LoopB:
		return "redirect x5, then fetch_error at the sixth hop"
	case RetryAfterBeyond:
		return "fetch_error (429), by GiveUpAfter at the latest"
	case NXDomain:
		return "fetch_error (no such host) at once"
	}
	return "unknown"
}

// HostileKinds lists every kind in the order a HostileSite serves them.
var HostileKinds = []Kind{Refused, Hang, Drip, Reset, Robots503, Robots429, BigRobots, LoopA, LoopB, RetryAfterBeyond, NXDomain}

// HostileDomain is the parent of every hostile host name. .test is
// reserved (RFC 6761): no real resolver answers for it, and the local
// stack resolves these names from a fixed table (fetch.Options.Resolve).
const HostileDomain = "hostile.test"

// The big robots.txt's layout: its size and where its rules sit.
const (
	bigRobotsSize  = 600 << 10
	bigRobotsMid   = 450 << 10
	bigRobotsLate  = 590 << 10
	dripInterval   = 500 * time.Millisecond
	resetBodyBytes = 64 << 10
	resetSentBytes = 16 << 10
	// longRetryAfter is beyond params.MaxGiveUpAfter (7 days).
	longRetryAfter = 8 * 24 * time.Hour
)

// HostileOptions shape a HostileSite.
type HostileOptions struct {
	// Pages is how many URLs each host gets (default 3); the big robots.txt
	// host gets as many of each of its paths, loop-a as many chains.
	Pages int
	// RetryAfter is what the robots-429 host asks for (default 3s; whole
	// seconds on the wire).
	RetryAfter time.Duration
	// Net is the loopback /16 the hosts take addresses in, one each
	// (default 127.66.0.0/16, apart from the healthy site's 127.0.x.y).
	Net netip.Prefix
}

// HostileHost is one misbehaving host of a HostileSite.
type HostileHost struct {
	Kind Kind
	// Name is the host name ("drip.hostile.test"); Host is name:port, as
	// in the host's URLs, results and request log.
	Name, Host string
	// Addr is where the host listens (for Refused: where nothing does);
	// invalid for NXDomain, which has no address.
	Addr netip.AddrPort
	// URLs are the URLs to submit for this host (none for LoopB).
	URLs []string
}

// HostileSite is a set of running hostile hosts with a request log kept
// by the servers' own clocks, like Site's.
type HostileSite struct {
	hosts     []HostileHost
	servers   []*http.Server
	listeners []net.Listener

	mu       sync.Mutex
	requests []Request
	conns    map[net.Conn]bool
	closed   bool
	wg       sync.WaitGroup
}

// StartHostile serves one host of every kind until Close.
func StartHostile(opts HostileOptions) (*HostileSite, error) {
	if opts.Pages <= 0 {
		opts.Pages = 3
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 3 * time.Second
	}
	if !opts.Net.IsValid() {
		opts.Net = netip.MustParsePrefix("127.66.0.0/16")
	}
	base := opts.Net.Masked().Addr().As4()
	if !opts.Net.Addr().IsLoopback() || opts.Net.Bits() > 24 {
		return nil, fmt.Errorf("hostile site: %s is not a loopback network of at least 256 addresses", opts.Net)
	}
	s := &HostileSite{conns: map[net.Conn]bool{}}
	names := map[Kind]string{}
	for i, k := range HostileKinds {
		h := HostileHost{Kind: k, Name: string(k) + "." + HostileDomain}
		ip := netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(2 + i)})
		switch k {
		case NXDomain:
			h.Host = h.Name
		case Refused:
			// Port 1 (tcpmux) is privileged and unused: nothing listens.
			h.Addr = netip.AddrPortFrom(ip, 1)
		default:
			ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("hostile site: listen on %s for %s: %w", ip, k, err)
			}
			s.listeners = append(s.listeners, ln)
			h.Addr = netip.MustParseAddrPort(ln.Addr().String())
		}
		if h.Host == "" {
			h.Host = net.JoinHostPort(h.Name, strconv.Itoa(int(h.Addr.Port())))
		}
		names[k] = h.Host
		s.hosts = append(s.hosts, h)
	}
	li := 0
	for i := range s.hosts {
		h := &s.hosts[i]
		h.URLs = hostileURLs(*h, opts.Pages)
		if !h.Addr.IsValid() || h.Kind == Refused {
			continue
		}
		ln := s.listeners[li]
		li++
		if h.Kind == Hang {
			s.wg.Add(1)
			go s.serveHang(ln, h.Host)
			continue
		}
		srv := &http.Server{Handler: s.logged(h.Host, hostileHandler(h.Kind, names, opts)), ReadHeaderTimeout: 10 * time.Second}
		s.servers = append(s.servers, srv)
		go func() { _ = srv.Serve(ln) }()
	}
	return s, nil
}

// hostileURLs are the URLs submitted for h.
func hostileURLs(h HostileHost, pages int) []string {
	var paths []string
	switch h.Kind {
	case LoopB:
		return nil
	case LoopA:
		for i := 0; i < pages; i++ {
			paths = append(paths, fmt.Sprintf("/loop/%d", i))
		}
	case BigRobots:
		for i := 0; i < pages; i++ {
			paths = append(paths, fmt.Sprintf("/page/%d", i), fmt.Sprintf("/early-a/%d", i), fmt.Sprintf("/early-b/%d", i), fmt.Sprintf("/late/%d", i))
		}
	default:
		for i := 0; i < pages; i++ {
			paths = append(paths, fmt.Sprintf("/page/%d", i))
		}
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = "http://" + h.Host + p
	}
	return out
}

// hostileHandler serves one HTTP-speaking hostile kind.
func hostileHandler(k Kind, names map[Kind]string, opts HostileOptions) http.Handler {
	var (
		mu       sync.Mutex
		first429 time.Time
	)
	big := BigRobotsTxt()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		robots := r.URL.Path == "/robots.txt"
		switch {
		case k == Robots503 && robots:
			http.Error(w, "robots.txt is having a bad day", http.StatusServiceUnavailable)
		case k == Robots429 && robots:
			mu.Lock()
			now := time.Now()
			if first429.IsZero() {
				first429 = now
			}
			left := first429.Add(opts.RetryAfter).Sub(now)
			mu.Unlock()
			if left > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int((left+time.Second-1)/time.Second)))
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "User-agent: *\nAllow: /\n")
		case k == BigRobots && robots:
			w.Header().Set("Content-Type", "text/plain")
			w.Write(big)
		case robots:
			http.NotFound(w, r)
		case k == Drip:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Content-Length", "1048576")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			t := time.NewTicker(dripInterval)
			defer t.Stop()
			for {
				select {
				case <-r.Context().Done():
					return
				case <-t.C:
					if _, err := w.Write([]byte(".")); err != nil {
						return
					}
					w.(http.Flusher).Flush()
				}
			}
		case k == Reset:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Content-Length", strconv.Itoa(resetBodyBytes))
			w.WriteHeader(http.StatusOK)
			w.Write([]byte(strings.Repeat("r", resetSentBytes)))
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				// Linger 0: close sends RST instead of FIN.
				_ = tc.SetLinger(0)
			}
			conn.Close()
		case k == LoopA || k == LoopB:
			other := names[LoopB]
			if k == LoopB {
				other = names[LoopA]
			}
			http.Redirect(w, r, "http://"+other+r.URL.Path, http.StatusMovedPermanently)
		case k == RetryAfterBeyond:
			w.Header().Set("Retry-After", strconv.Itoa(int(longRetryAfter/time.Second)))
			http.Error(w, "come back next week", http.StatusTooManyRequests)
		default:
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, Body(r.Host, r.URL.Path))
		}
	})
}

// BigRobotsTxt is the big-robots host's robots.txt: 600 KiB in one group
// for every agent, Disallow /early-a/ at its start, /early-b/ at 450 KiB
// and /late/ at 590 KiB, the rest filler rules for paths nobody asks for.
func BigRobotsTxt() []byte {
	var b strings.Builder
	b.Grow(bigRobotsSize)
	b.WriteString("# A large robots.txt: the rules that matter sit at its start, below 500 KiB and above it.\nUser-agent: *\nDisallow: /early-a/\n")
	n := 0
	fill := func(upTo int) {
		for b.Len() < upTo {
			fmt.Fprintf(&b, "Disallow: /filler/%07d/\n", n)
			n++
		}
	}
	fill(bigRobotsMid)
	b.WriteString("Disallow: /early-b/\n")
	fill(bigRobotsLate)
	b.WriteString("Disallow: /late/\n")
	fill(bigRobotsSize - 64)
	return []byte(b.String())
}

// serveHang accepts connections, reads each request and never answers; the
// request's end in the log is when the client gave up.
func (s *HostileSite) serveHang(ln net.Listener, host string) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !s.track(c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			start := time.Now()
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				return
			}
			// Wait for the client to give up (EOF or reset) or Close.
			_, _ = io.Copy(io.Discard, c)
			s.log(Request{Host: host, Path: req.URL.Path, Start: start, End: time.Now()})
		}()
	}
}

func (s *HostileSite) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = true
	return true
}

func (s *HostileSite) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *HostileSite) log(r Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
}

// logged records every request h serves, with the server's clock.
func (s *HostileSite) logged(host string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() { s.log(Request{Host: host, Path: r.URL.Path, Start: start, End: time.Now()}) }()
		h.ServeHTTP(w, r)
	})
}

// Hosts returns the hostile hosts, in HostileKinds order.
func (s *HostileSite) Hosts() []HostileHost { return slices.Clone(s.hosts) }

// Host returns the host of kind k.
func (s *HostileSite) Host(k Kind) HostileHost {
	for _, h := range s.hosts {
		if h.Kind == k {
			return h
		}
	}
	return HostileHost{}
}

// ByHost finds the hostile host whose name:port is host.
func (s *HostileSite) ByHost(host string) (HostileHost, bool) {
	for _, h := range s.hosts {
		if h.Host == host {
			return h, true
		}
	}
	return HostileHost{}, false
}

// URLs returns every URL to submit, host after host.
func (s *HostileSite) URLs() []string {
	var out []string
	for _, h := range s.hosts {
		out = append(out, h.URLs...)
	}
	return out
}

// Resolve is the name table the downloader needs to find the hosts (for
// fetch.Options.Resolve): every name but NXDomain's, which must not
// resolve.
func (s *HostileSite) Resolve() map[string][]netip.Addr {
	t := map[string][]netip.Addr{}
	for _, h := range s.hosts {
		if h.Addr.IsValid() {
			t[h.Name] = []netip.Addr{h.Addr.Addr()}
		}
	}
	return t
}

// Requests returns every request the hostile hosts saw, by start time.
func (s *HostileSite) Requests() []Request {
	s.mu.Lock()
	out := slices.Clone(s.requests)
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Request) int { return a.Start.Compare(b.Start) })
	return out
}

// Close stops every host at once: open requests (hanging, dripping) are cut.
func (s *HostileSite) Close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	for _, srv := range s.servers {
		_ = srv.Close()
	}
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	s.wg.Wait()
}

// Expect checks one result for a URL of h (or, for the loop hosts, of a
// chain they started) against the ending h's Kind documents; "" means it
// is one a correct downloader gives.
func (h HostileHost) Expect(r result.Result) string {
	want := func(st result.Status, errHas ...string) string {
		if r.Status != st {
			return fmt.Sprintf("%s %s (%s), want %s", r.URL, r.Status, r.Error, st)
		}
		for _, s := range errHas {
			if !strings.Contains(strings.ToLower(r.Error), s) {
				return fmt.Sprintf("%s %s with error %q, want it to mention %q", r.URL, r.Status, r.Error, s)
			}
		}
		return ""
	}
	path := strings.TrimPrefix(r.URL, "http://"+h.Host)
	switch h.Kind {
	case Refused, Hang, Robots503:
		return want(result.StatusDenied, "robots.txt")
	case Drip, Reset:
		return want(result.StatusFetchError)
	case RetryAfterBeyond:
		return want(result.StatusFetchError, "429")
	case NXDomain:
		if msg := want(result.StatusFetchError, "no such host"); msg != "" {
			return msg
		}
		if r.Attempts > 1 {
			return fmt.Sprintf("%s took %d attempts, want at most 1 (no such host is final)", r.URL, r.Attempts)
		}
		return ""
	case Robots429:
		if msg := want(result.StatusFetched); msg != "" {
			return msg
		}
		if b := Body(h.Host, path); r.Data != b {
			return fmt.Sprintf("%s body %q, want %q", r.URL, r.Data, b)
		}
		return ""
	case BigRobots:
		switch {
		case strings.HasPrefix(path, "/early-"):
			return want(result.StatusDenied, "robots.txt")
		case strings.HasPrefix(path, "/late/"):
			if r.Status == result.StatusFetched {
				return ""
			}
			return want(result.StatusDenied, "robots.txt")
		default:
			if msg := want(result.StatusFetched); msg != "" {
				return msg
			}
			if b := Body(h.Host, path); r.Data != b {
				return fmt.Sprintf("%s body %q, want %q", r.URL, r.Data, b)
			}
			return ""
		}
	case LoopA, LoopB:
		if r.Status == result.StatusRedirect {
			return ""
		}
		return want(result.StatusFetchError, "redirect")
	}
	return fmt.Sprintf("%s: unknown hostile kind %q", r.URL, h.Kind)
}

// NeverRequested are the paths h must never see requested: pages behind a
// robots.txt that cannot be read, and paths its robots.txt disallows.
func (h HostileHost) NeverRequested(path string) bool {
	switch h.Kind {
	case Hang, Robots503:
		return path != "/robots.txt"
	case BigRobots:
		return strings.HasPrefix(path, "/early-")
	}
	return false
}
