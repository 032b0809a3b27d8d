package params

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultServerDelay is 250 ms: one server address gets at most four of
// our requests a second, whatever the number of host names it carries (the
// load of four hosts at FetchDelay), while a host alone on its address,
// paced at FetchDelay (1 s) from the end of its last response, never waits
// on its address's gate. It must stay at most FetchDelay for that.
const DefaultServerDelay = 250 * time.Millisecond

// DefaultServerConnections is 1: a shared server sees at most one of our
// requests at a time, as it would from one polite host (Heritrix keeps one
// connection per server, Nutch's byIP queue one thread). A slow answer then
// holds back the address's other names, which is the relief a struggling
// server needs.
const DefaultServerConnections = 1

// MaxServerDelay bounds ServerDelay: a minute between two requests to one
// address is already a crawl of 1,440 pages a day.
const MaxServerDelay = time.Minute

// ServerExemptCDN is the word ServerExempt uses for the built-in list of
// published CDN ranges (CDNRanges).
const ServerExemptCDN = "cdn"

// cdnRanges are the ranges Cloudflare and Fastly publish for their edge
// networks: every address there fronts many unrelated sites, which the CDN
// itself shields, so pacing them per address would crawl them far too
// slowly (UKWA #79). Cloudflare's from https://www.cloudflare.com/ips/ as
// listed by MISP warninglists (version 20241104); Fastly's from
// https://api.fastly.com/public-ip-list as listed by MISP warninglists
// (version 20261014); both read 2026-12-06.
var cdnRanges = []string{
	// Cloudflare
	"173.245.48.0/20", "103.21.244.0/22", "103.22.200.0/22", "103.31.4.0/22",
	"141.101.64.0/18", "108.162.192.0/18", "190.93.240.0/20", "188.114.96.0/20",
	"197.234.240.0/22", "198.41.128.0/17", "162.158.0.0/15", "104.16.0.0/13",
	"104.24.0.0/14", "172.64.0.0/13", "131.0.72.0/22",
	"2400:cb00::/32", "2606:4700::/32", "2803:f800::/32", "2405:b500::/32",
	"2405:8100::/32", "2a06:98c0::/29", "2c0f:f248::/32",
	// Fastly
	"23.235.32.0/20", "43.249.72.0/22", "103.244.50.0/24", "103.245.222.0/23",
	"103.245.224.0/24", "104.156.80.0/20", "140.248.64.0/18", "140.248.128.0/17",
	"146.75.0.0/17", "151.101.0.0/16", "157.52.64.0/18", "167.82.0.0/17",
	"167.82.128.0/20", "167.82.160.0/20", "167.82.224.0/20", "172.111.64.0/18",
	"185.31.16.0/22", "199.27.72.0/21", "199.232.0.0/16",
	"2a04:4e40::/32", "2a04:4e42::/32",
}

// CDNRanges returns the built-in CDN ranges ServerExempt's "cdn" stands for.
func CDNRanges() []netip.Prefix {
	out := make([]netip.Prefix, len(cdnRanges))
	for i, s := range cdnRanges {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// Exempt is the parsed ServerExempt parameter: address ranges paced per
// host only. Like HostRules it is interned, so Params stay comparable.
type Exempt struct{ set *exemptSet }

type exemptSet struct {
	text     string
	prefixes []netip.Prefix
}

// Prefixes returns the ranges (a copy).
func (e Exempt) Prefixes() []netip.Prefix {
	if e.set == nil {
		return nil
	}
	return slices.Clone(e.set.prefixes)
}

// String is the canonical form: "cdn" and CIDRs, comma separated, or "none".
func (e Exempt) String() string {
	if e.set == nil {
		return NoHostRules
	}
	return e.set.text
}

func (e Exempt) contains(a netip.Addr) bool {
	if e.set == nil {
		return false
	}
	for _, p := range e.set.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var internedExempt = struct {
	sync.Mutex
	m map[string]Exempt
}{m: map[string]Exempt{}}

// ParseExempt reads ServerExempt: CIDRs and the word "cdn" (CDNRanges),
// comma separated; "none" or an empty string is no range. A bare address
// is its own /32 or /128.
func ParseExempt(s string) (Exempt, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, NoHostRules) {
		return Exempt{}, nil
	}
	internedExempt.Lock()
	defer internedExempt.Unlock()
	if e, ok := internedExempt.m[s]; ok {
		return e, nil
	}
	set := &exemptSet{}
	var words []string
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == ServerExemptCDN {
			set.prefixes = append(set.prefixes, CDNRanges()...)
			words = append(words, f)
			continue
		}
		p, err := parsePrefix(f)
		if err != nil {
			return Exempt{}, err
		}
		set.prefixes = append(set.prefixes, p)
		words = append(words, p.String())
	}
	set.text = strings.Join(words, ",")
	if len(internedExempt.m) >= 64 {
		clear(internedExempt.m)
	}
	e := Exempt{set: set}
	internedExempt.m[s] = e
	return e, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a range: want CIDR notation such as 192.0.2.0/24, or %q", s, ServerExemptCDN)
		}
		return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a range: want CIDR notation such as 192.0.2.0/24, or %q", s, ServerExemptCDN)
	}
	return p.Masked(), nil
}

// ExemptPrefixes is ServerExempt as address ranges: the addresses paced
// per host only (see ServerExempted for the whole rule).
func (p Params) ExemptPrefixes() []netip.Prefix { return p.ServerExempt.Prefixes() }

// Server is what the gate of one server address keeps for a request to a
// host over it: the least time between two requests' starts (and from the
// end of one to the start of the next), and how many may be in flight.
// The zero Server is no gate (ServerDelay 0, or an exempt address).
type Server struct {
	Delay       time.Duration
	Connections int
}

// Off tells a request the gate lets through at once.
func (s Server) Off() bool { return s.Delay <= 0 && s.Connections <= 0 }

// ServerFor is the one place that decides the gate a request to host over
// addr meets: an address in ServerExempt, or matched by an exempt rule,
// has none, and neither has any with ServerDelay 0. Otherwise the first
// HostRules rule matching the address (by CIDR), else the host's rule (by
// name), may set serverDelay and serverConnections over ServerDelay and
// ServerConnections. ServerDelay itself never asks more of a request than
// its host's own delay (FetchDelay, or its rule's delay): a host alone on
// its address is never slowed by the gate, and an operator who lowers
// FetchDelay lowers it too; a rule's serverDelay is taken as it is. The
// connections hold whatever the delay (the stricter of them and the
// host's own connections wins).
func (p Params) ServerFor(host string, addr netip.Addr) Server {
	if p.ServerExempted(host, addr) || p.ServerDelay <= 0 {
		return Server{}
	}
	s := Server{Delay: p.ServerDelay, Connections: p.ServerConnections}
	hostDelay := p.FetchDelay
	if r, ok := p.HostRules.Match(host); ok && r.HasDelay {
		hostDelay = r.Delay
	}
	explicit := false
	r, ok := p.HostRules.MatchAddr(addr)
	if !ok || !r.hasServer() {
		r, ok = p.HostRules.Match(host)
	}
	if ok {
		if r.HasServerDelay {
			s.Delay, explicit = r.ServerDelay, true
		}
		if r.ServerConnections > 0 {
			s.Connections = r.ServerConnections
		}
	}
	if !explicit {
		s.Delay = min(s.Delay, hostDelay)
	}
	return s
}

// ServerExempted tells whether requests to host over addr are paced per
// host only: the address is in ServerExempt, or the first rule matching
// the address (CIDR), else the host's, says serverExempt.
func (p Params) ServerExempted(host string, addr netip.Addr) bool {
	addr = addr.Unmap()
	if p.ServerExempt.contains(addr) {
		return true
	}
	if r, ok := p.HostRules.MatchAddr(addr); ok {
		return r.ServerExempt
	}
	if r, ok := p.HostRules.Match(host); ok {
		return r.ServerExempt
	}
	return false
}
