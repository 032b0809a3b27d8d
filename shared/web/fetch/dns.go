package fetch

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Defaults applied by NewDNSCache to zero-valued DNSCacheOptions fields.
const (
	// DefaultDNSMinTTL is the shortest time an answer is kept. Many sites
	// publish TTLs of a few seconds for load balancing; asking again every
	// few seconds for each of thousands of hosts would cost more queries
	// than requests (a VPC's resolver answers 1,024 packets a second per
	// network interface), and the addresses behind such names stay valid
	// for far longer than their TTL.
	DefaultDNSMinTTL = 30 * time.Second
	// DefaultDNSMaxTTL is the longest time an answer is kept, whatever
	// its TTL: a site that moves is found again within minutes.
	DefaultDNSMaxTTL = 10 * time.Minute
	// DefaultDNSNegativeTTL is how long "no such host" (NXDOMAIN, or no
	// address of either family) is kept: long enough that a job's many
	// URLs on a dead name cost one query, short enough that a name just
	// created is seen soon.
	DefaultDNSNegativeTTL = 10 * time.Second
	// DefaultDNSTimeout bounds one query to one nameserver. A lookup
	// asks each server in turn, dnsAttempts times, so it ends within
	// dnsAttempts x servers x Timeout whoever waits for it.
	DefaultDNSTimeout = 2 * time.Second
	// DefaultDNSMaxEntries bounds the names kept: about 100 bytes each,
	// 10 MB in all for a job over 100,000 hosts.
	DefaultDNSMaxEntries = 100_000
)

// dnsAttempts is how many times each nameserver is asked before a lookup
// fails, as resolv.conf's default "attempts:2".
const dnsAttempts = 2

// errServerMisbehaving is the text Go's resolver gives a SERVFAIL or an
// unusable answer, kept so messages read the same as before the cache.
const errServerMisbehaving = "server misbehaving"

// DNSCacheOptions configures a DNSCache. The zero value asks the
// nameservers of /etc/resolv.conf with the defaults above.
type DNSCacheOptions struct {
	// Servers are the nameservers asked, as "ip:port" ("127.0.0.1:5353")
	// or "ip" (port 53); see ParseDNSServers. nil means those of
	// /etc/resolv.conf; an empty list, none: the system resolver answers
	// every name. Each is asked in turn until one answers.
	Servers []string
	// MinTTL and MaxTTL bound how long an answer is kept: its own TTL
	// (the shortest of its records) raised to MinTTL, cut to MaxTTL.
	MinTTL, MaxTTL time.Duration
	// NegativeTTL is how long "no such host" is kept.
	NegativeTTL time.Duration
	// Timeout bounds one query to one server (see DefaultDNSTimeout).
	Timeout time.Duration
	// MaxEntries bounds the names kept; past it, expired answers are
	// dropped first, then any.
	MaxEntries int
	// Now is the clock TTLs are measured with; nil means time.Now.
	Now func() time.Time
}

// DNSCache resolves host names for fetchers and keeps the answers. It is a
// stub resolver: it asks recursive nameservers for A and AAAA records
// (miekg/dns), because Go's own resolver does not tell the TTLs. A name the
// stub cannot answer as the system would (one in /etc/hosts such as
// localhost, a name without a dot, which the system completes with its
// search list, *.localhost and *.local, or every name when no nameserver
// is known) is asked of the system resolver instead and kept MinTTL.
//
// Concurrent lookups of one name share one query; a failure that may pass
// (SERVFAIL, timeout, unreachable server) is not kept. The cache only
// finds addresses: the fetcher's address guard judges every address it
// dials, cached or not.
//
// One DNSCache serves a whole process (DefaultDNSCache) unless a caller
// injects its own (Options.DNS). It is safe for concurrent use.
type DNSCache struct {
	opts    DNSCacheOptions
	servers []string
	// hosts are the names /etc/hosts lists, answered by the system.
	hosts map[string]bool
	// system answers names the stub cannot (see DNSCache); a field so a
	// test can stand in for the operating system.
	system func(ctx context.Context, name string) ([]netip.Addr, error)

	mu      sync.Mutex
	entries map[string]*dnsEntry
	flights map[string]*dnsFlight

	lookups, hits, merged, queries, systemLookups atomic.Int64
}

// DNSStats are a DNSCache's counters since it was made.
type DNSStats struct {
	// Lookups is the names asked of the cache (IP literals aside).
	Lookups int64
	// CacheHits were answered from a kept answer or a kept "no such host".
	CacheHits int64
	// Merged waited for a lookup of the same name already under way.
	Merged int64
	// Queries is the messages sent to nameservers: a lookup asks A and
	// AAAA (two), more when a server fails or truncates.
	Queries int64
	// SystemLookups were asked of the system resolver (see DNSCache).
	SystemLookups int64
}

type dnsEntry struct {
	addrs []netip.Addr // IPv4 first, then IPv6, each in the order answered
	// notFound is the "no such host" kept for a name with no address.
	notFound *net.DNSError
	expires  time.Time
}

// dnsFlight is a lookup under way; done is closed once entry or err is set.
type dnsFlight struct {
	done  chan struct{}
	entry *dnsEntry
	err   error
}

var defaultDNS = sync.OnceValue(func() *DNSCache { return NewDNSCache(DNSCacheOptions{}) })

// DefaultDNSCache is the process's shared cache, the one every Fetcher
// whose Options.DNS is nil uses: made on first use, from /etc/resolv.conf
// as it is then.
func DefaultDNSCache() *DNSCache { return defaultDNS() }

// NewDNSCache returns an empty cache with opts, zero fields set to the
// defaults. With opts.Servers nil it reads /etc/resolv.conf now; a missing
// or serverless file sends every name to the system resolver.
func NewDNSCache(opts DNSCacheOptions) *DNSCache {
	if opts.MinTTL <= 0 {
		opts.MinTTL = DefaultDNSMinTTL
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = DefaultDNSMaxTTL
	}
	opts.MaxTTL = max(opts.MaxTTL, opts.MinTTL)
	if opts.NegativeTTL <= 0 {
		opts.NegativeTTL = DefaultDNSNegativeTTL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultDNSTimeout
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultDNSMaxEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	servers := make([]string, 0, len(opts.Servers))
	for _, s := range opts.Servers {
		servers = append(servers, withDNSPort(s))
	}
	if opts.Servers == nil {
		servers = resolvConfServers("/etc/resolv.conf")
	}
	return &DNSCache{
		opts:    opts,
		servers: servers,
		hosts:   hostsFileNames("/etc/hosts"),
		system:  systemLookup,
		entries: map[string]*dnsEntry{},
		flights: map[string]*dnsFlight{},
	}
}

// Stats returns the cache's counters.
func (c *DNSCache) Stats() DNSStats {
	return DNSStats{
		Lookups:       c.lookups.Load(),
		CacheHits:     c.hits.Load(),
		Merged:        c.merged.Load(),
		Queries:       c.queries.Load(),
		SystemLookups: c.systemLookups.Load(),
	}
}

// Lookup returns host's addresses, IPv4 first, from the cache or from a
// lookup it starts or joins. It fails with a *net.DNSError as Go's
// resolver does: IsNotFound for "no such host" (NXDOMAIN or no address),
// IsTemporary for a failing or unreachable server, IsTimeout when no server
// answered in time. ctx bounds only this caller's wait: the lookup goes on
// for the others and for the cache.
func (c *DNSCache) Lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	name := tableKey(host)
	c.lookups.Add(1)
	c.mu.Lock()
	if e := c.entries[name]; e != nil && c.opts.Now().Before(e.expires) {
		c.mu.Unlock()
		c.hits.Add(1)
		return e.result(host)
	}
	fl := c.flights[name]
	if fl == nil {
		fl = &dnsFlight{done: make(chan struct{})}
		c.flights[name] = fl
		go c.fly(name, fl)
	} else {
		c.merged.Add(1)
	}
	c.mu.Unlock()
	select {
	case <-fl.done:
	case <-ctx.Done():
		return nil, contextDNSError(ctx.Err(), host)
	}
	if fl.err != nil {
		return nil, renamed(fl.err, host)
	}
	return fl.entry.result(host)
}

// Cached returns host's addresses if the cache holds a live answer for
// it, without asking anyone.
func (c *DNSCache) Cached(host string) ([]netip.Addr, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[tableKey(host)]
	if e == nil || e.notFound != nil || !c.opts.Now().Before(e.expires) {
		return nil, false
	}
	return e.addrs, len(e.addrs) > 0
}

// lookup is Lookup for a dial on network: only the addresses it can reach.
func (c *DNSCache) lookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	addrs, err := c.Lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	return forNetwork(addrs, network, host)
}

// forNetwork keeps the addresses of network's family ("tcp4", "tcp6";
// "tcp" keeps all), or fails as "no such host" when none is left.
func forNetwork(addrs []netip.Addr, network, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range addrs {
		if network == "tcp4" && !a.Unmap().Is4() || network == "tcp6" && !a.Is6() {
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: errNoSuchHost, Name: host, IsNotFound: true}
	}
	return out, nil
}

func (e *dnsEntry) result(host string) ([]netip.Addr, error) {
	if e.notFound != nil {
		return nil, renamed(e.notFound, host)
	}
	return slices.Clone(e.addrs), nil
}

// renamed is a copy of a shared lookup's error naming host as this caller
// wrote it, so no caller can change what another one reads.
func renamed(err error, host string) error {
	if de, ok := errors.AsType[*net.DNSError](err); ok {
		cp := *de
		cp.Name = host
		return &cp
	}
	return err
}

// contextDNSError is what a lookup the caller stopped waiting for fails
// with, in Go's resolver's words; the context error stays in the chain so
// a canceled request still reads as KindCanceled and a deadline as
// KindTimeout.
func contextDNSError(err error, host string) *net.DNSError {
	deadline := errors.Is(err, context.DeadlineExceeded)
	msg := "operation was canceled"
	if deadline {
		msg = "i/o timeout"
	}
	return &net.DNSError{Err: msg, Name: host, IsTimeout: deadline, IsTemporary: deadline, UnwrapErr: err}
}

// fly runs the lookup of name for everyone waiting on fl, then keeps what
// may be kept.
func (c *DNSCache) fly(name string, fl *dnsFlight) {
	entry, err := c.resolve(name)
	c.mu.Lock()
	if entry != nil {
		c.store(name, entry)
	}
	delete(c.flights, name)
	fl.entry, fl.err = entry, err
	c.mu.Unlock()
	close(fl.done)
}

// store keeps e under name; c.mu is held. At MaxEntries the expired
// answers go first, then a tenth of the rest (map order: no recency is
// tracked, so the bound costs nothing per lookup).
func (c *DNSCache) store(name string, e *dnsEntry) {
	if len(c.entries) >= c.opts.MaxEntries {
		now := c.opts.Now()
		for k, old := range c.entries {
			if !now.Before(old.expires) {
				delete(c.entries, k)
			}
		}
		drop := len(c.entries) - c.opts.MaxEntries*9/10
		for k := range c.entries {
			if drop <= 0 {
				break
			}
			delete(c.entries, k)
			drop--
		}
	}
	c.entries[name] = e
}

// resolve asks for name: an entry to keep (addresses or "no such host"),
// or an error that must not be kept.
func (c *DNSCache) resolve(name string) (*dnsEntry, error) {
	if _, ok := dns.IsDomainName(name); !ok || name == "" || name == "onion" || strings.HasSuffix(name, ".onion") {
		// As Go's resolver: a name that cannot be in the DNS is not
		// found, and a Tor name (RFC 7686) is never asked.
		return c.negative(&net.DNSError{Err: errNoSuchHost, Name: name, IsNotFound: true}), nil
	}
	if c.bySystem(name) {
		return c.resolveSystem(name)
	}
	// Every query is bounded by Timeout, the whole lookup by them all.
	ctx, cancel := context.WithTimeout(context.Background(),
		time.Duration(dnsAttempts*len(c.servers))*c.opts.Timeout+time.Second)
	defer cancel()
	var v4, v6 dnsAnswer
	var wg sync.WaitGroup
	wg.Go(func() { v4 = c.ask(ctx, name, dns.TypeA) })
	wg.Go(func() { v6 = c.ask(ctx, name, dns.TypeAAAA) })
	wg.Wait()
	if addrs := append(v4.addrs, v6.addrs...); len(addrs) > 0 {
		ttl := c.opts.MaxTTL
		for _, a := range []dnsAnswer{v4, v6} {
			if len(a.addrs) > 0 {
				ttl = min(ttl, a.ttl)
			}
		}
		return &dnsEntry{addrs: addrs, expires: c.opts.Now().Add(max(ttl, c.opts.MinTTL))}, nil
	}
	for _, a := range []dnsAnswer{v4, v6} {
		if a.err != nil {
			// One family failed and the other has no address: the name
			// may yet have one, so nothing is kept.
			return nil, a.err
		}
	}
	// Both families answered: NXDOMAIN, or no address of either.
	server := cmp.Or(v4.server, v6.server)
	return c.negative(&net.DNSError{Err: errNoSuchHost, Name: name, Server: server, IsNotFound: true}), nil
}

func (c *DNSCache) negative(err *net.DNSError) *dnsEntry {
	return &dnsEntry{notFound: err, expires: c.opts.Now().Add(c.opts.NegativeTTL)}
}

// bySystem reports a name the stub would answer differently from the
// system (see DNSCache).
func (c *DNSCache) bySystem(name string) bool {
	return len(c.servers) == 0 || !strings.Contains(name, ".") || c.hosts[name] ||
		name == "localhost" || strings.HasSuffix(name, ".localhost") || strings.HasSuffix(name, ".local")
}

func (c *DNSCache) resolveSystem(name string) (*dnsEntry, error) {
	c.systemLookups.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), dnsAttempts*c.opts.Timeout+time.Second)
	defer cancel()
	addrs, err := c.system(ctx, name)
	if err != nil {
		if de, ok := errors.AsType[*net.DNSError](err); ok && de.IsNotFound {
			return c.negative(de), nil
		}
		return nil, err
	}
	if len(addrs) == 0 {
		return c.negative(&net.DNSError{Err: errNoSuchHost, Name: name, IsNotFound: true}), nil
	}
	// IPv4 first, as the stub orders its answers.
	slices.SortStableFunc(addrs, func(a, b netip.Addr) int {
		return cmp.Compare(familyRank(a), familyRank(b))
	})
	return &dnsEntry{addrs: addrs, expires: c.opts.Now().Add(c.opts.MinTTL)}, nil
}

func familyRank(a netip.Addr) int {
	if a.Unmap().Is4() {
		return 0
	}
	return 1
}

func systemLookup(ctx context.Context, name string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", name)
}

// dnsAnswer is one family's answer: addresses (with the shortest TTL of
// the records that led to them), none (NXDOMAIN or no data), or err.
type dnsAnswer struct {
	addrs  []netip.Addr
	ttl    time.Duration
	server string
	err    error
}

// ask asks the servers in turn for name's records of qtype until one
// answers, dnsAttempts rounds at most. The errors are Go's resolver's:
// SERVFAIL is a temporary "server misbehaving", a timeout IsTimeout, an
// unreachable server IsTemporary.
func (c *DNSCache) ask(ctx context.Context, name string, qtype uint16) dnsAnswer {
	var last error
	for range dnsAttempts {
		for _, server := range c.servers {
			r, err := c.exchange(ctx, name, qtype, server)
			if err != nil {
				last = exchangeError(err, name, server)
				if ctx.Err() != nil {
					return dnsAnswer{err: last}
				}
				continue
			}
			switch r.Rcode {
			case dns.RcodeSuccess:
				addrs, ttl := answerAddrs(r, name, qtype)
				return dnsAnswer{addrs: addrs, ttl: ttl, server: server}
			case dns.RcodeNameError:
				return dnsAnswer{server: server}
			case dns.RcodeServerFailure:
				last = &net.DNSError{Err: errServerMisbehaving, Name: name, Server: server, IsTemporary: true}
			default:
				last = &net.DNSError{Err: errServerMisbehaving, Name: name, Server: server}
			}
		}
	}
	if last == nil {
		last = &net.DNSError{Err: "no nameserver", Name: name, IsTemporary: true}
	}
	return dnsAnswer{err: last}
}

// exchange sends one query over UDP, and again over TCP when the answer
// was truncated.
func (c *DNSCache) exchange(ctx context.Context, name string, qtype uint16, server string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	c.queries.Add(1)
	r, _, err := (&dns.Client{Net: "udp", UDPSize: 1232}).ExchangeContext(ctx, m, server)
	if err == nil && r.Truncated {
		c.queries.Add(1)
		r, _, err = (&dns.Client{Net: "tcp"}).ExchangeContext(ctx, m, server)
	}
	return r, err
}

func exchangeError(err error, name, server string) *net.DNSError {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return &net.DNSError{Err: "i/o timeout", Name: name, Server: server, IsTimeout: true, IsTemporary: true}
	}
	return &net.DNSError{Err: err.Error(), Name: name, Server: server, IsTemporary: true}
}

// answerAddrs reads the addresses of name from r's answer section,
// following a CNAME chain, and the shortest TTL of the records used.
func answerAddrs(r *dns.Msg, name string, qtype uint16) ([]netip.Addr, time.Duration) {
	target := dns.Fqdn(name)
	ttl := uint32(1<<32 - 1)
	var addrs []netip.Addr
	for hops := 0; hops < 8 && len(addrs) == 0 && target != ""; hops++ {
		next := ""
		for _, rr := range r.Answer {
			h := rr.Header()
			if !strings.EqualFold(h.Name, target) {
				continue
			}
			var a netip.Addr
			switch v := rr.(type) {
			case *dns.A:
				if qtype == dns.TypeA {
					a, _ = netip.AddrFromSlice(v.A.To4())
				}
			case *dns.AAAA:
				if qtype == dns.TypeAAAA {
					a, _ = netip.AddrFromSlice(v.AAAA.To16())
				}
			case *dns.CNAME:
				next = v.Target
				ttl = min(ttl, h.Ttl)
			}
			if a.IsValid() {
				addrs = append(addrs, a)
				ttl = min(ttl, h.Ttl)
			}
		}
		target = next
	}
	return addrs, time.Duration(ttl) * time.Second
}

// ParseDNSServers reads a comma-separated list of nameservers, each an IP
// address with an optional port ("127.0.0.1:5353", "10.0.0.2", "[::1]:53"),
// for DNSCacheOptions.Servers. Blanks around items are ignored; the error
// names the bad item, for the caller to prefix with its flag's name.
func ParseDNSServers(list string) ([]string, error) {
	var out []string
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if _, err := netip.ParseAddrPort(withDNSPort(item)); err != nil {
			return nil, fmt.Errorf("%q is not a nameserver: want an IP address with an optional port, such as 127.0.0.1:5353 or [::1]:53", item)
		}
		out = append(out, withDNSPort(item))
	}
	return out, nil
}

// withDNSPort adds port 53 to a bare address.
func withDNSPort(s string) string {
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"), "53")
	}
	return s
}

// resolvConfServers are the nameservers a resolv.conf names, as
// "ip:port"; none when it cannot be read.
func resolvConfServers(path string) []string {
	conf, err := dns.ClientConfigFromFile(path)
	if err != nil {
		return []string{}
	}
	out := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		out = append(out, net.JoinHostPort(s, conf.Port))
	}
	return out
}

// hostsFileNames are the names a hosts file lists (lowercase, no
// trailing dot); none when it cannot be read.
func hostsFileNames(path string) map[string]bool {
	names := map[string]bool{}
	f, err := os.Open(path)
	if err != nil {
		return names
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if _, err := netip.ParseAddr(fields[0]); err != nil {
			continue
		}
		for _, n := range fields[1:] {
			names[tableKey(n)] = true
		}
	}
	return names
}
