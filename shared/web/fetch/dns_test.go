package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// dnsZone is what a test nameserver answers for one name.
type dnsZone struct {
	a, aaaa []string
	ttl     uint32
	// cname, when set, answers with a CNAME to it (cnameTTL) and then
	// the target's own records, as a recursive resolver does.
	cname    string
	cnameTTL uint32
	rcode    int // dns.RcodeSuccess unless set
	// truncate answers over UDP with the TC bit and no records, so
	// only a query over TCP gets them.
	truncate bool
}

// dnsServer is a recursive nameserver on loopback (miekg/dns over UDP)
// that answers from its zones, NXDOMAIN for any other name, and counts the
// queries it receives.
type dnsServer struct {
	addr string
	mu   sync.Mutex
	// zones by lowercase FQDN.
	zones   map[string]dnsZone
	queries map[string]int // "name type" -> queries received
	tcp     int            // of which over TCP
	// hold, when set, is waited on before answering.
	hold chan struct{}
}

func startDNS(t *testing.T, zones map[string]dnsZone) *dnsServer {
	t.Helper()
	// One port over UDP and TCP (for answers too long for a datagram).
	// TCP first: the UDP port of a free TCP one is free far more often
	// than the other way round. Should it be taken, try another.
	var pc net.PacketConn
	var ln net.Listener
	for try := 0; pc == nil; try++ {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if pc, err = net.ListenPacket("udp", ln.Addr().String()); err != nil {
			ln.Close()
			if try == 20 {
				t.Fatalf("no port free over both TCP and UDP: %v", err)
			}
		}
	}
	s := &dnsServer{addr: pc.LocalAddr().String(), zones: map[string]dnsZone{}, queries: map[string]int{}}
	for name, z := range zones {
		s.zones[dns.Fqdn(strings.ToLower(name))] = z
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: s}, {Listener: ln, Handler: s}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return s
}

func (s *dnsServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	s.mu.Lock()
	s.queries[strings.TrimSuffix(name, ".")+" "+dns.TypeToString[q.Qtype]]++
	_, overTCP := w.RemoteAddr().(*net.TCPAddr)
	if overTCP {
		s.tcp++
	}
	z, ok := s.zones[name]
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	if !ok {
		m.Rcode = dns.RcodeNameError
		w.WriteMsg(m)
		return
	}
	m.Rcode = z.rcode
	if z.truncate && !overTCP {
		m.Truncated = true
		w.WriteMsg(m)
		return
	}
	owner := name
	if z.cname != "" {
		m.Answer = append(m.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: z.cnameTTL}, Target: dns.Fqdn(z.cname)})
		owner = dns.Fqdn(z.cname)
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: owner, Rrtype: t, Class: dns.ClassINET, Ttl: z.ttl}
	}
	switch q.Qtype {
	case dns.TypeA:
		for _, a := range z.a {
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: net.ParseIP(a)})
		}
	case dns.TypeAAAA:
		for _, a := range z.aaaa {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.ParseIP(a)})
		}
	}
	w.WriteMsg(m)
}

// holdAnswers makes the server wait until the returned channel is
// closed before it answers.
func (s *dnsServer) holdAnswers() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = make(chan struct{})
	return s.hold
}

// asked is how many queries of type qtype ("A", "AAAA") name received.
func (s *dnsServer) asked(name, qtype string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[name+" "+qtype]
}

func (s *dnsServer) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.queries {
		n += c
	}
	return n
}

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newCache(s *dnsServer, clock *testClock) *fetch.DNSCache {
	return fetch.NewDNSCache(fetch.DNSCacheOptions{
		Servers: []string{s.addr},
		MinTTL:  30 * time.Second, MaxTTL: 10 * time.Minute, NegativeTTL: 10 * time.Second,
		// Bounds a lost packet only: a loopback server answers at once.
		Timeout: 5 * time.Second,
		Now:     clock.Now,
	})
}

// TestDNSCacheFetch: a fetcher resolves through the cache, so two fetches
// of one name cost one lookup (one A and one AAAA query), and the request
// reaches the address the nameserver gave.
func TestDNSCacheFetch(t *testing.T) {
	site := startServer(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served "+r.Host)
	}), nil)
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	ns := startDNS(t, map[string]dnsZone{"www.site.test": {a: []string{"127.0.0.2"}, ttl: 300}})
	cache := newCache(ns, newTestClock())
	opts := localOptions()
	opts.DNS = cache
	for i := range 2 {
		// A fetcher of its own each time: the cache, not a kept-alive
		// connection, is what saves the second lookup.
		f := fetch.New(opts, fixedNow)
		resp, err := f.Fetch(context.Background(), fetch.Request{URL: "http://www.site.test:" + port + "/"})
		f.CloseIdleConnections()
		if err != nil {
			t.Fatalf("fetch %d: %v", i, err)
		}
		want(t, "body", string(resp.Body), "served www.site.test:"+port)
	}
	want(t, "A queries", ns.asked("www.site.test", "A"), 1)
	want(t, "AAAA queries", ns.asked("www.site.test", "AAAA"), 1)
	st := cache.Stats()
	want(t, "lookups", st.Lookups, int64(2))
	want(t, "cache hits", st.CacheHits, int64(1))
	want(t, "queries counted", st.Queries, int64(2))
}

// TestDNSCacheTTL: an answer is kept for its TTL, raised to MinTTL and
// cut to MaxTTL; a CNAME chain is kept for its shortest record.
func TestDNSCacheTTL(t *testing.T) {
	tests := []struct {
		name string
		zone dnsZone
		kept time.Duration // asked again once this has passed, not before
	}{
		{"TTL honoured", dnsZone{a: []string{"192.0.2.1"}, ttl: 120}, 120 * time.Second},
		{"TTL below the minimum raised", dnsZone{a: []string{"192.0.2.1"}, ttl: 5}, 30 * time.Second},
		{"zero TTL raised", dnsZone{a: []string{"192.0.2.1"}, ttl: 0}, 30 * time.Second},
		{"TTL above the maximum cut", dnsZone{a: []string{"192.0.2.1"}, ttl: 86400}, 10 * time.Minute},
		{"CNAME's shorter TTL", dnsZone{a: []string{"192.0.2.1"}, ttl: 300, cname: "edge.cdn.test", cnameTTL: 60}, 60 * time.Second},
		{"IPv6 only", dnsZone{aaaa: []string{"2001:db8::1"}, ttl: 90}, 90 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := startDNS(t, map[string]dnsZone{"host.test": tc.zone})
			clock := newTestClock()
			cache := newCache(ns, clock)
			lookup := func() []netip.Addr {
				t.Helper()
				addrs, err := cache.Lookup(context.Background(), "host.test")
				if err != nil {
					t.Fatal(err)
				}
				return addrs
			}
			first := lookup()
			wantAddr := cmpOr(tc.zone.a, tc.zone.aaaa)[0]
			if len(first) != 1 || first[0] != netip.MustParseAddr(wantAddr) {
				t.Fatalf("addresses %v, want [%s]", first, wantAddr)
			}
			clock.advance(tc.kept - time.Second)
			lookup()
			want(t, "A queries just before expiry", ns.asked("host.test", "A"), 1)
			clock.advance(2 * time.Second)
			lookup()
			want(t, "A queries just after expiry", ns.asked("host.test", "A"), 2)
			want(t, "AAAA queries just after expiry", ns.asked("host.test", "AAAA"), 2)
		})
	}
}

func cmpOr(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// TestDNSCacheOrder: IPv4 answers come before IPv6 ones, each family in
// the order the server gave.
func TestDNSCacheOrder(t *testing.T) {
	ns := startDNS(t, map[string]dnsZone{"dual.test": {a: []string{"192.0.2.2", "192.0.2.1"}, aaaa: []string{"2001:db8::1"}, ttl: 60}})
	addrs, err := newCache(ns, newTestClock()).Lookup(context.Background(), "Dual.Test.")
	if err != nil {
		t.Fatal(err)
	}
	want(t, "addresses", fmt.Sprint(addrs), "[192.0.2.2 192.0.2.1 2001:db8::1]")
}

// TestDNSCacheNotFound: NXDOMAIN, and a name with no address of either
// family, fail as Go's resolver says "no such host" (KindDNS, permanent)
// and are kept NegativeTTL.
func TestDNSCacheNotFound(t *testing.T) {
	for _, name := range []string{"gone.site.test", "nodata.site.test"} {
		t.Run(name, func(t *testing.T) {
			ns := startDNS(t, map[string]dnsZone{"nodata.site.test": {ttl: 300}})
			clock := newTestClock()
			opts := localOptions()
			opts.DNS = newCache(ns, clock)
			f := fetch.New(opts, fixedNow)
			fetchIt := func() error {
				_, err := f.Fetch(context.Background(), fetch.Request{URL: "http://" + name + "/a"})
				return err
			}
			err := fetchIt()
			want(t, "kind", fetch.KindOf(err), fetch.KindDNS)
			want(t, "transient", fetch.IsTransient(err), false)
			var de *net.DNSError
			if !errors.As(err, &de) || !de.IsNotFound || de.IsTemporary || de.IsTimeout {
				t.Fatalf("error %v carries DNS error %+v, want one that is not found and not temporary", err, de)
			}
			if msg := "dial tcp: lookup " + name + " on " + ns.addr + ": no such host"; !strings.HasSuffix(err.Error(), msg) {
				t.Errorf("error %q does not end as Go's resolver's %q", err, msg)
			}
			clock.advance(9 * time.Second)
			if err := fetchIt(); fetch.KindOf(err) != fetch.KindDNS || !strings.HasSuffix(err.Error(), "no such host") {
				t.Errorf("kept answer: %v, want the same no such host", err)
			}
			want(t, "A queries within NegativeTTL", ns.asked(name, "A"), 1)
			clock.advance(2 * time.Second)
			fetchIt()
			want(t, "A queries after NegativeTTL", ns.asked(name, "A"), 2)
		})
	}
}

// TestDNSCacheMergesLookups: 50 lookups of one name at once cost one
// query of each type, and all get the answer.
func TestDNSCacheMergesLookups(t *testing.T) {
	ns := startDNS(t, map[string]dnsZone{"busy.test": {a: []string{"192.0.2.7"}, ttl: 60}})
	release := ns.holdAnswers()
	cache := newCache(ns, newTestClock())
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			addrs, err := cache.Lookup(context.Background(), "busy.test")
			if err == nil && (len(addrs) != 1 || addrs[0].String() != "192.0.2.7") {
				err = fmt.Errorf("addresses %v", addrs)
			}
			errs <- err
		})
	}
	// Every lookup but the first has joined it before the server answers.
	waitFor(t, func() bool { return cache.Stats().Merged == n-1 })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	want(t, "A queries", ns.asked("busy.test", "A"), 1)
	want(t, "AAAA queries", ns.asked("busy.test", "AAAA"), 1)
}

// TestDNSCacheKeepsTheGuard: an address from DNS, fresh or cached, is
// judged by the address guard before any connection: the metadata
// endpoint and a private address are refused. (Nothing is ever connected
// to: the guard refuses before connect(2).)
func TestDNSCacheKeepsTheGuard(t *testing.T) {
	ns := startDNS(t, map[string]dnsZone{
		"metadata.test": {a: []string{"169.254.169.254"}, ttl: 300},
		"private.test":  {a: []string{"10.0.0.1"}, ttl: 300},
		"mapped.test":   {aaaa: []string{"::ffff:169.254.169.254"}, ttl: 300},
	})
	cache := newCache(ns, newTestClock())
	tests := []struct {
		host         string
		allowPrivate bool
		msg          string
	}{
		{"metadata.test", false, "address 169.254.169.254 is link-local (the cloud instance metadata endpoint"},
		{"metadata.test", true, "address 169.254.169.254 is link-local (the cloud instance metadata endpoint"},
		{"mapped.test", true, "169.254.169.254"},
		{"private.test", false, "address 10.0.0.1 is private (RFC 1918): not allowed"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s private=%v", tc.host, tc.allowPrivate), func(t *testing.T) {
			f := fetch.New(fetch.Options{DNS: cache, AllowPrivate: tc.allowPrivate, Timeout: 5 * time.Second}, fixedNow)
			for try := range 2 { // fresh, then cached
				_, err := f.Fetch(context.Background(), fetch.Request{URL: "http://" + tc.host + "/"})
				if fetch.KindOf(err) != fetch.KindDenied || !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("try %d: %v (kind %v), want denied: %q", try, err, fetch.KindOf(err), tc.msg)
				}
			}
		})
	}
	if st := cache.Stats(); st.CacheHits == 0 {
		t.Errorf("no lookup was answered from the cache: %+v", st)
	}
}

// TestDNSCacheServerFailures: a server that fails, is unreachable or is
// silent gives a transient error, as Go's resolver did, and nothing is
// kept: the next lookup asks again.
func TestDNSCacheServerFailures(t *testing.T) {
	servfail := startDNS(t, map[string]dnsZone{"broken.test": {rcode: dns.RcodeServerFailure}})
	// A port nobody listens on: the kernel refuses the datagram.
	closed, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.LocalAddr().String()
	closed.Close()
	// A socket that never answers.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	tests := []struct {
		name, server string
		kind         fetch.Kind
		msg          string
		timeout      bool
	}{
		{"SERVFAIL", servfail.addr, fetch.KindDNS, "server misbehaving", false},
		{"unreachable", closedAddr, fetch.KindDNS, "connection refused", false},
		// A timeout reads as KindTimeout, as Go's resolver's did: the
		// classification of errors.go is unchanged.
		{"silent", silent.LocalAddr().String(), fetch.KindTimeout, "i/o timeout", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cache := fetch.NewDNSCache(fetch.DNSCacheOptions{Servers: []string{tc.server}, Timeout: 300 * time.Millisecond})
			opts := localOptions()
			opts.DNS = cache
			f := fetch.New(opts, fixedNow)
			for try := range 2 {
				_, err := f.Fetch(context.Background(), fetch.Request{URL: "http://broken.test/"})
				var de *net.DNSError
				if !errors.As(err, &de) || !de.IsTemporary || de.IsNotFound || de.IsTimeout != tc.timeout {
					t.Fatalf("try %d: %v carries DNS error %+v, want a temporary one (timeout %v)", try, err, de, tc.timeout)
				}
				want(t, "kind", fetch.KindOf(err), tc.kind)
				want(t, "transient", fetch.IsTransient(err), true)
				if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "lookup broken.test on "+tc.server) {
					t.Errorf("error %q does not say %q from %s", err, tc.msg, tc.server)
				}
			}
			if st := cache.Stats(); st.CacheHits != 0 || st.Queries < 4 {
				t.Errorf("stats %+v: a failure must not be kept (each lookup asks again)", st)
			}
		})
	}
}

// TestDNSCacheCallerGivesUp: a caller whose context ends stops waiting
// (canceled reads as KindCanceled), and the lookup goes on for the cache.
func TestDNSCacheCallerGivesUp(t *testing.T) {
	ns := startDNS(t, map[string]dnsZone{"slow.test": {a: []string{"192.0.2.9"}, ttl: 60}})
	release := ns.holdAnswers()
	cache := newCache(ns, newTestClock())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := cache.Lookup(ctx, "slow.test")
		done <- err
	}()
	waitFor(t, func() bool { return ns.total() > 0 })
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || fetch.KindOf(err) != fetch.KindCanceled {
		t.Fatalf("lookup canceled: %v (kind %v), want context.Canceled", err, fetch.KindOf(err))
	}
	close(release)
	waitFor(t, func() bool {
		addrs, err := cache.Lookup(context.Background(), "slow.test")
		return err == nil && len(addrs) == 1
	})
	want(t, "A queries", ns.asked("slow.test", "A"), 1)
}

// TestDNSCacheSystemNames: localhost (in /etc/hosts) is answered by the
// system resolver, not the nameservers, and IP literals by nobody.
func TestDNSCacheSystemNames(t *testing.T) {
	ns := startDNS(t, nil)
	cache := newCache(ns, newTestClock())
	addrs, err := cache.Lookup(context.Background(), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range addrs {
		found = found || a.IsLoopback()
	}
	if !found {
		t.Errorf("localhost resolved to %v, want a loopback address", addrs)
	}
	if addrs, err := cache.Lookup(context.Background(), "192.0.2.4"); err != nil || fmt.Sprint(addrs) != "[192.0.2.4]" {
		t.Errorf("IP literal: %v, %v", addrs, err)
	}
	want(t, "queries to the nameserver", ns.total(), 0)
	want(t, "system lookups", cache.Stats().SystemLookups, int64(1))
}

// TestResolveBypassesDNS: with Options.Resolve the table answers and the
// cache is never asked.
func TestResolveBypassesDNS(t *testing.T) {
	site := startServer(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil)
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	ns := startDNS(t, map[string]dnsZone{"www.site.test": {a: []string{"127.0.0.3"}, ttl: 60}})
	opts := localOptions()
	opts.DNS = newCache(ns, newTestClock())
	opts.Resolve = map[string][]netip.Addr{"www.site.test": {netip.MustParseAddr("127.0.0.2")}}
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	if _, err := f.Fetch(context.Background(), fetch.Request{URL: "http://www.site.test:" + port + "/"}); err != nil {
		t.Fatal(err)
	}
	want(t, "queries", ns.total(), 0)
}

// TestDNSCacheTruncated: an answer truncated over UDP is asked again over
// TCP.
func TestDNSCacheTruncated(t *testing.T) {
	ns := startDNS(t, map[string]dnsZone{"long.test": {a: []string{"192.0.2.1", "192.0.2.2"}, ttl: 60, truncate: true}})
	cache := newCache(ns, newTestClock())
	addrs, err := cache.Lookup(context.Background(), "long.test")
	if err != nil {
		t.Fatal(err)
	}
	want(t, "addresses", fmt.Sprint(addrs), "[192.0.2.1 192.0.2.2]")
	ns.mu.Lock()
	overTCP := ns.tcp
	ns.mu.Unlock()
	want(t, "queries over TCP", overTCP, 2)
	want(t, "queries counted", cache.Stats().Queries, int64(4))
}

// TestDNSCacheNextAddress: the answers are dialed in order, the next one
// when a connection is refused.
func TestDNSCacheNextAddress(t *testing.T) {
	site := startServer(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), nil)
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	// Nothing listens on 127.0.0.3 at the site's port.
	ns := startDNS(t, map[string]dnsZone{"two.test": {a: []string{"127.0.0.3", "127.0.0.2"}, ttl: 60}})
	opts := localOptions()
	opts.DNS = newCache(ns, newTestClock())
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	mustFetch(t, f, "http://two.test:"+port+"/")
}

// TestDefaultDNSCacheShared: fetchers with no Options.DNS share the
// process's cache. (localhost is answered from /etc/hosts: no query.)
func TestDefaultDNSCacheShared(t *testing.T) {
	site := startServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), nil)
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	before := fetch.DefaultDNSCache().Stats()
	for range 2 {
		f := fetch.New(localOptions(), fixedNow)
		mustFetch(t, f, "http://localhost:"+port+"/")
		f.CloseIdleConnections()
		if st := f.Stats().DNS; st.Lookups <= before.Lookups {
			t.Errorf("fetcher's DNS stats %+v do not count its lookups", st)
		}
	}
	after := fetch.DefaultDNSCache().Stats()
	want(t, "lookups", after.Lookups-before.Lookups, int64(2))
	if after.CacheHits-before.CacheHits < 1 {
		t.Errorf("the second fetcher's lookup was not answered from the shared cache: %+v then %+v", before, after)
	}
}
