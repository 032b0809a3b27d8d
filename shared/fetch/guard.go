package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// defaultPorts are the only ports a public web page is normally served on;
// anything else (SSH, Redis, an admin console) is refused unless configured.
var defaultPorts = []int{80, 443}

// blockedRange is a network the downloader must never connect to, with the
// reason shown in the denial message.
type blockedRange struct {
	prefix netip.Prefix
	why    string
}

// blockedV4 lists IPv4 networks that are not the public internet. Reaching
// them from a Lambda would expose the VPC, the metadata endpoint or the
// function's own host to whoever submits URLs (SSRF). More specific prefixes
// come first so the message names the narrowest reason.
var blockedV4 = []blockedRange{
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (this network)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (metadata endpoint)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// blockedV6 lists IPv6 networks that are never a public web server. The
// forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4) are
// not here: they are judged by the IPv4 address inside, see embeddedV4.
var blockedV6 = []blockedRange{
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	// Local-use NAT64 (RFC 8215) translates into whatever IPv4 network the
	// operator chose, so no embedded address can be trusted.
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
}

var (
	prefixV4Compatible = netip.MustParsePrefix("::/96")
	prefixNAT64        = netip.MustParsePrefix("64:ff9b::/96")
	prefix6to4         = netip.MustParsePrefix("2002::/16")
)

// embeddedV4 returns the IPv4 address carried inside an IPv6 address by the
// transition forms a kernel or a NAT64 gateway would turn into a
// connection to that IPv4 address: IPv4-mapped (::ffff:a.b.c.d),
// IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4
// (2002:aabb:ccdd::). Checking the embedded address closes the
// "::ffff:169.254.169.254" bypass.
func embeddedV4(a netip.Addr) (netip.Addr, string, bool) {
	b := a.As16()
	switch {
	case a.Is4In6():
		return a.Unmap(), "IPv4-mapped", true
	case prefixNAT64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case prefixV4Compatible.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "IPv4-compatible", true
	case prefix6to4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	}
	return netip.Addr{}, "", false
}

// CheckAddress decides whether the downloader may connect to addr. It returns
// nil when allowed, or an *Error of KindDenied whose message names the
// address and the rule. With opts.AllowPrivate every address and port is
// allowed (local testing only). Fetch runs it on every connection at dial
// time, after DNS resolution; it is exported so the policy can be tested
// and reused (for example to reject a literal IP before queueing it).
func CheckAddress(addr netip.AddrPort, opts Options) error {
	if opts.AllowPrivate {
		return nil
	}
	ip := addr.Addr().WithZone("")
	if !ip.IsValid() {
		return deny("address is not a valid IP address")
	}
	if why := blockedReason(ip); why != "" {
		return deny(fmt.Sprintf("address %s is %s and private networks are not allowed", ip, why))
	}
	ports := opts.AllowedPorts
	if len(ports) == 0 {
		ports = defaultPorts
	}
	if !slices.Contains(ports, int(addr.Port())) {
		return deny(fmt.Sprintf("port %d of %s is not allowed (allowed ports: %s)", addr.Port(), ip, joinPorts(ports)))
	}
	return nil
}

// blockedReason returns why ip is refused, or "" when it is a public address.
func blockedReason(ip netip.Addr) string {
	if ip.Is4() {
		for _, r := range blockedV4 {
			if r.prefix.Contains(ip) {
				return r.why
			}
		}
		return ""
	}
	for _, r := range blockedV6 {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	if v4, form, ok := embeddedV4(ip); ok {
		if why := blockedReason(v4); why != "" {
			return fmt.Sprintf("the %s form of %s, which is %s", form, v4, why)
		}
	}
	return ""
}

func deny(msg string) error {
	return &Error{Kind: KindDenied, Op: "check address", Err: errors.New(msg)}
}

func joinPorts(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// dialControl is the net.Dialer Control hook. It runs after name resolution
// and before connect(2), on every connection the transport opens, so the
// guard holds for redirect targets the caller fetches later and against DNS
// rebinding (the name is resolved once, and the checked address is the one
// dialed).
func dialControl(opts Options) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			// Refuse what we cannot read: an unknown form must not pass.
			return deny(fmt.Sprintf("cannot check dial address %q: %v", address, err))
		}
		return CheckAddress(ap, opts)
	}
}

// guardedNetwork dials through a test's Network after the address guard
// has judged the address, as the Control hook of a real socket would.
type guardedNetwork struct {
	net     Dialer
	control func(network, address string, _ syscall.RawConn) error
}

func (g guardedNetwork) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if err := g.control(network, address, nil); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	return g.net.DialContext(ctx, network, address)
}
