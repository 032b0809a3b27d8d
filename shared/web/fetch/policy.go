package fetch

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// AddressPolicy decides which addresses the downloader may connect to. It
// is the one place that judges an address: the dial guard asks it about
// every connection after name resolution, and ingest asks it about a URL
// whose host is an IP address (see hostqueue.AddressGuard), so both refuse
// the same addresses with the same words.
//
// A public unicast address is allowed on the allowed ports. Every special
// network (loopback, RFC 1918, CGNAT, link-local, unique local, multicast,
// documentation, benchmarking, reserved, and the IPv6 forms that carry one
// of them: see specialV4, specialV6 and embeddedV4) is refused unless the
// policy opens it, by naming a network that holds the address (Open) or
// with the private set (OpenPrivate: loopback, RFC 1918, CGNAT and unique
// local). The link-local networks and the cloud metadata addresses
// (metadataRanges) are stricter: they open only when named exactly, by a
// network that lies inside the table's entry (169.254.169.254/32 opens the
// metadata endpoint; 169.254.0.0/16 opens the rest of link-local but not
// it; the private set, 0.0.0.0/0 or 160.0.0.0/4 open neither), because one
// submitted URL that reaches them can hand out the machine's credentials.
//
// An address the policy opens is open on every port (a local site listens
// where it likes), unless it was opened as a Network with a port range
// (OpenNetworks): then on those ports only, so a redirect to another port
// of the same network (a database, an admin console) stays refused.
// Public addresses keep the allowed-ports rule, and a network opened on
// some ports adds those to it.
//
// The zero value opens nothing. An AddressPolicy is a value: Open,
// OpenPrivate and WithRemedy return a changed copy.
type AddressPolicy struct {
	nets    []Network // masked, IPv4 as IPv4, sorted, no duplicates
	private bool
	remedy  Remedy
}

// Network is a network an AddressPolicy opens, on every port or on one
// range of ports.
type Network struct {
	Prefix netip.Prefix
	// First and Last are the ports opened, both included; both zero
	// opens every port.
	First, Last uint16
}

// String writes n as ParseNetworkPorts reads it: 127.0.0.0/8,
// 127.0.0.0/8:8080, 127.0.0.0/8:8000-8099.
func (n Network) String() string {
	switch {
	case n.First == 0 && n.Last == 0:
		return n.Prefix.String()
	case n.First == n.Last:
		return fmt.Sprintf("%s:%d", n.Prefix, n.First)
	default:
		return fmt.Sprintf("%s:%d-%d", n.Prefix, n.First, n.Last)
	}
}

// allows reports whether n opens ip on port.
func (n Network) allows(ip netip.Addr, port uint16) bool {
	return n.Prefix.Contains(ip) && (n.everyPort() || port >= n.First && port <= n.Last)
}

func (n Network) everyPort() bool { return n.First == 0 && n.Last == 0 }

// Remedy names, for a denial message, the settings that would open an
// address where the policy came from: local mode's flags, a deployed
// function's environment. The zero Remedy names nothing.
type Remedy struct {
	// Where says whose setting it is: "local mode", "deployed".
	Where string
	// Network is the setting that opens one network, with one %s for the
	// network in CIDR notation: "--allow-net %s".
	Network string
	// Private is the setting that opens the private set:
	// "--allow-private".
	Private string
}

// PrivatePolicy opens the private set and nothing else, as local mode's
// --allow-private does: loopback and private sites, never link-local or a
// metadata address.
func PrivatePolicy() AddressPolicy { return AddressPolicy{}.OpenPrivate() }

// Open returns p with nets opened too (see AddressPolicy for what a named
// network opens).
func (p AddressPolicy) Open(nets ...netip.Prefix) AddressPolicy {
	all := make([]Network, len(nets))
	for i, n := range nets {
		all[i] = Network{Prefix: n}
	}
	return p.OpenNetworks(all...)
}

// OpenNetworks returns p with nets opened too, each on its ports (see
// AddressPolicy).
func (p AddressPolicy) OpenNetworks(nets ...Network) AddressPolicy {
	all := slices.Clone(p.nets)
	for _, n := range nets {
		if n.Prefix.IsValid() {
			n.Prefix = canonicalPrefix(n.Prefix)
			all = append(all, n)
		}
	}
	slices.SortFunc(all, func(a, b Network) int {
		if c := a.Prefix.Addr().Compare(b.Prefix.Addr()); c != 0 {
			return c
		}
		if c := a.Prefix.Bits() - b.Prefix.Bits(); c != 0 {
			return c
		}
		if c := int(a.First) - int(b.First); c != 0 {
			return c
		}
		return int(a.Last) - int(b.Last)
	})
	p.nets = slices.Compact(all)
	return p
}

// OpenPrivate returns p with the private set opened: loopback (127.0.0.0/8,
// ::1), RFC 1918 (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), CGNAT
// (100.64.0.0/10) and unique local (fc00::/7), on every port. The metadata
// addresses inside them (100.100.100.200, fd00:ec2::254, ...) stay closed.
func (p AddressPolicy) OpenPrivate() AddressPolicy {
	p.private = true
	return p
}

// WithRemedy returns p whose denial messages name r's settings.
func (p AddressPolicy) WithRemedy(r Remedy) AddressPolicy {
	p.remedy = r
	return p
}

// Networks returns the networks p opens by name, on any of their ports.
func (p AddressPolicy) Networks() []netip.Prefix {
	var out []netip.Prefix
	for _, n := range p.nets {
		if len(out) == 0 || out[len(out)-1] != n.Prefix {
			out = append(out, n.Prefix)
		}
	}
	return out
}

// Private reports whether p opens the private set.
func (p AddressPolicy) Private() bool { return p.private }

// Equal reports whether p and q open the same addresses and name the same
// remedy.
func (p AddressPolicy) Equal(q AddressPolicy) bool {
	return p.private == q.private && p.remedy == q.remedy && slices.Equal(p.nets, q.nets)
}

// String describes what p opens beyond the public internet, for logs and
// startup lines: "public addresses only", "private networks, 10.1.0.0/16".
func (p AddressPolicy) String() string {
	var parts []string
	if p.private {
		parts = append(parts, "private networks")
	}
	for _, n := range p.nets {
		parts = append(parts, n.String())
	}
	if len(parts) == 0 {
		return "public addresses only"
	}
	return strings.Join(parts, ", ")
}

// ParseNetworks reads a comma-separated list of networks in CIDR notation
// (127.0.0.0/8, ::1/128; a bare address is that one address). Blanks
// around items and empty items are ignored. A network written with host
// bits set (10.1.2.3/8) is refused rather than widened, since it is more
// likely a typo than a wish; the error names the bad item and what was
// expected, for the caller to prefix with its flag or variable name.
func ParseNetworks(list string) ([]netip.Prefix, error) {
	var nets []netip.Prefix
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		n, err := parseNetwork(item)
		if err != nil {
			return nil, err
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// ParseNetworkPorts reads a comma-separated list of networks as
// ParseNetworks does, each optionally followed by the ports it opens:
// 127.0.0.0/8 (every port), 127.0.0.0/8:8080 (one port),
// 127.0.0.0/8:8000-8099 (a range, both ends included). A bare address
// takes a port too: 10.0.0.5:8080, [::1]:8080. The error names the bad
// item.
func ParseNetworkPorts(list string) ([]Network, error) {
	var nets []Network
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		n, err := parseNetworkPorts(item)
		if err != nil {
			return nil, err
		}
		nets = append(nets, n)
	}
	return nets, nil
}

// parseNetworkPorts reads one item of ParseNetworkPorts. The ports follow
// the last colon after the "/" of a CIDR, or the "]" of a bracketed
// address, or the only colon of a bare IPv4 address; an IPv6 address
// without brackets or a "/" has no ports.
func parseNetworkPorts(s string) (Network, error) {
	cidr, ports := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return Network{}, fmt.Errorf("%q is not a network: no ] after [", s)
		}
		cidr, ports = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if rest := s[end+1:]; rest != "" && !strings.HasPrefix(rest, ":") {
			return Network{}, fmt.Errorf("%q is not a network: want [address]:PORT", s)
		}
	case strings.Contains(s, "/"):
		slash := strings.LastIndex(s, "/")
		if c := strings.Index(s[slash:], ":"); c >= 0 {
			cidr, ports = s[:slash+c], s[slash+c+1:]
		}
	case strings.Count(s, ":") == 1:
		cidr, ports, _ = strings.Cut(s, ":")
	}
	prefix, err := parseNetwork(cidr)
	if err != nil {
		return Network{}, err
	}
	n := Network{Prefix: prefix}
	if cidr == s {
		return n, nil
	}
	first, last, ok := strings.Cut(ports, "-")
	if !ok {
		last = first
	}
	a, errA := parsePort(first)
	b, errB := parsePort(last)
	if errA != nil || errB != nil || a > b {
		return Network{}, fmt.Errorf("%q has bad ports %q: want PORT or PORT-PORT, 1 to 65535, e.g. %s:8080 or %s:8000-8099", s, ports, prefix, prefix)
	}
	n.First, n.Last = a, b
	return n, nil
}

func parsePort(s string) (uint16, error) {
	v, err := strconv.ParseUint(s, 10, 16)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("bad port %q", s)
	}
	return uint16(v), nil
}

func parseNetwork(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not a network: want CIDR notation such as 127.0.0.0/8 or ::1/128", s)
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	n, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a network: want CIDR notation such as 127.0.0.0/8 or ::1/128", s)
	}
	if n.Addr().Is4In6() && n.Bits() < 96 {
		return netip.Prefix{}, fmt.Errorf("%q mixes IPv4-mapped and other IPv6 addresses: write the IPv4 network", s)
	}
	if m := n.Masked(); m != n {
		return netip.Prefix{}, fmt.Errorf("%q has bits set past its /%d: did you mean %s?", s, n.Bits(), canonicalPrefix(m))
	}
	return canonicalPrefix(n), nil
}

// canonicalPrefix writes an IPv4-mapped network as the IPv4 network it
// is, since addresses are judged in their IPv4 form too.
func canonicalPrefix(n netip.Prefix) netip.Prefix {
	n = n.Masked()
	if n.Addr().Is4In6() && n.Bits() >= 96 {
		return netip.PrefixFrom(n.Addr().Unmap(), n.Bits()-96)
	}
	return n
}

// Check decides whether the downloader may connect to addr, on one of
// allowedPorts (default 80 and 443) unless p opens addr. It returns nil
// when allowed, or an *Error of KindDenied whose message names the
// address, the rule, and the setting of p's Remedy that would allow it.
// Its signature is hostqueue.AddressGuard's.
func (p AddressPolicy) Check(addr netip.AddrPort, allowedPorts []int) error {
	ip := addr.Addr().WithZone("")
	if !ip.IsValid() {
		return deny("address is not a valid IP address")
	}
	opened, refused := p.judge(ip, addr.Port())
	if refused != nil {
		return deny(refused.message(p.remedy))
	}
	if opened {
		return nil
	}
	if len(allowedPorts) == 0 {
		allowedPorts = defaultPorts
	}
	if !slices.Contains(allowedPorts, int(addr.Port())) {
		return deny(fmt.Sprintf("port %d of %s is not allowed (allowed ports: %s)", addr.Port(), ip, joinPorts(allowedPorts)))
	}
	return nil
}

// refusal is why an address is refused, with what would open it.
type refusal struct {
	addr  netip.Addr // the address dialed
	inner netip.Addr // the IPv4 address inside a transition form, else addr
	form  string     // the transition form ("IPv4-mapped"), "" for none
	why   string     // "loopback"
	// open is the network to name to open it: the special network, or
	// for a link-local or metadata address the address itself; on the
	// port dialed when the policy opens it on other ports only.
	open Network
	// private: the private set opens it too.
	private bool
	// exact: link-local or metadata, which only a network inside it opens.
	exact bool
}

// denialMarker starts the remedy of a denial message; AddressFix finds it.
const denialMarker = ": not allowed ("

func (r *refusal) message(rem Remedy) string {
	var b strings.Builder
	if r.form == "" {
		fmt.Fprintf(&b, "address %s is %s", r.addr, r.why)
	} else {
		fmt.Fprintf(&b, "address %s is the %s form of %s, which is %s", r.addr, r.form, r.inner, r.why)
	}
	if rem.Network == "" {
		b.WriteString(": not allowed")
		return b.String()
	}
	fix := fmt.Sprintf(rem.Network, r.open)
	switch {
	case r.private && rem.Private != "":
		fix += " or " + rem.Private
	case r.exact && rem.Private != "":
		fix += ", named exactly; " + rem.Private + " never opens it"
	}
	fmt.Fprintf(&b, "%s%s: %s)", denialMarker, rem.Where, fix)
	return b.String()
}

// AddressFix returns the remedy an address-policy denial message names
// ("local mode: --allow-net 127.0.0.0/8 or --allow-private"), or "" when
// msg is not one (another denial, or a policy with no Remedy). It reads
// the messages Check writes, also inside a longer error chain, so a
// summary can group results by what would have allowed them.
func AddressFix(msg string) string {
	i := strings.LastIndex(msg, denialMarker)
	if i < 0 || !strings.HasSuffix(msg, ")") {
		return ""
	}
	return msg[i+len(denialMarker) : len(msg)-1]
}

// judge says whether p opens ip (then any port is allowed), or why ip is
// refused; neither for a public address the policy does not name.
func (p AddressPolicy) judge(ip netip.Addr, port uint16) (opened bool, refused *refusal) {
	if ip.Is6() {
		if r := lookup(specialV6Exact, ip); r != nil {
			return p.decide(ip, port, r, false)
		}
		if v4, form, ok := embeddedV4(ip); ok {
			opened, refused = p.judge(v4, port)
			if refused != nil {
				refused.addr, refused.form = ip, form
				return false, refused
			}
			return opened || p.named(ip, port), nil
		}
	}
	if r := lookup(metadataRanges, ip); r != nil {
		return p.decide(ip, port, r, true)
	}
	special := specialV4
	if ip.Is6() {
		special = specialV6
	}
	if r := lookup(special, ip); r != nil {
		return p.decide(ip, port, r, false)
	}
	if ip.Is6() && !globalUnicastV6.Contains(ip) {
		return p.decide(ip, port, &specialRange{prefix: globalUnicastV6, why: "reserved (outside 2000::/3, the IPv6 global unicast space)"}, false)
	}
	return p.named(ip, port), nil
}

// decide applies p to ip and port, where ip lies in the special range r.
func (p AddressPolicy) decide(ip netip.Addr, port uint16, r *specialRange, exact bool) (bool, *refusal) {
	if exact {
		for _, n := range p.nets {
			if n.allows(ip, port) && n.Prefix.Bits() >= r.prefix.Bits() {
				return true, nil
			}
		}
		open := p.onPort(Network{Prefix: netip.PrefixFrom(ip, ip.BitLen())}, ip, port)
		return false, &refusal{addr: ip, inner: ip, why: r.why, open: open, exact: true}
	}
	if (p.private && r.private) || p.named(ip, port) {
		return true, nil
	}
	open := Network{Prefix: r.prefix}
	if open.Prefix == globalUnicastV6 {
		open.Prefix = netip.PrefixFrom(ip, ip.BitLen())
	}
	return false, &refusal{addr: ip, inner: ip, why: r.why, open: p.onPort(open, ip, port), private: r.private}
}

// onPort is open as a remedy names it: on the port dialed when p opens ip
// on other ports only, for the user who chose to open some ports.
func (p AddressPolicy) onPort(open Network, ip netip.Addr, port uint16) Network {
	for _, n := range p.nets {
		if n.Prefix.Contains(ip) && !n.everyPort() {
			open.First, open.Last = port, port
		}
	}
	return open
}

// named reports whether a network p names opens ip on port.
func (p AddressPolicy) named(ip netip.Addr, port uint16) bool {
	for _, n := range p.nets {
		if n.allows(ip, port) {
			return true
		}
	}
	return false
}

// specialRange is a network that is not the public internet, with the
// reason shown in the denial message.
type specialRange struct {
	prefix netip.Prefix
	why    string
	// private: part of the private set (OpenPrivate).
	private bool
}

func lookup(ranges []specialRange, ip netip.Addr) *specialRange {
	for i := range ranges {
		if ranges[i].prefix.Contains(ip) {
			return &ranges[i]
		}
	}
	return nil
}

// metadataRanges are the link-local networks and the addresses where a
// cloud serves instance metadata and credentials. Reaching them from a
// function or a cloud machine hands whoever submitted the URL the
// machine's credentials (SSRF), so they open only when named exactly:
// by a network inside the entry that holds the address (an address of its
// own needs its /32 or /128), never with the private set, even where they
// lie inside it (100.100.100.200 in CGNAT, fd00:ec2::254 in unique
// local). docs/politeness.md's "Address guard" lists the same
// table.
//
//	169.254.169.254    AWS IMDS; also GCP, Azure, Oracle Cloud, OpenStack,
//	                   DigitalOcean and most others
//	169.254.170.2      AWS ECS task metadata and credentials
//	169.254.170.23     AWS EKS Pod Identity credentials
//	169.254.0.23       Tencent Cloud metadata
//	169.254.42.42      Scaleway metadata
//	169.254.0.0/16     the rest of IPv4 link-local
//	fe80::a9fe:a9fe    OpenStack metadata over IPv6
//	fe80::/10          the rest of IPv6 link-local
//	fd00:ec2::254      AWS IMDS over IPv6
//	fd00:ec2::23       AWS EKS Pod Identity over IPv6
//	fd20:ce::254       Google Cloud metadata server over IPv6
//	fd00:42::42        Scaleway metadata over IPv6
//	100.100.100.200    Alibaba Cloud metadata
//	192.0.0.192        Oracle Cloud Classic metadata
//	168.63.129.16      Azure WireServer (a public address, but only ever
//	                   the host's platform endpoint inside Azure)
var metadataRanges = []specialRange{
	{prefix: netip.MustParsePrefix("169.254.169.254/32"), why: "link-local (the cloud instance metadata endpoint: AWS, GCP, Azure, Oracle, OpenStack)"},
	{prefix: netip.MustParsePrefix("169.254.170.2/32"), why: "link-local (AWS ECS task metadata and credentials)"},
	{prefix: netip.MustParsePrefix("169.254.170.23/32"), why: "link-local (AWS EKS Pod Identity credentials)"},
	{prefix: netip.MustParsePrefix("169.254.0.23/32"), why: "link-local (the Tencent Cloud metadata endpoint)"},
	{prefix: netip.MustParsePrefix("169.254.42.42/32"), why: "link-local (the Scaleway metadata endpoint)"},
	{prefix: netip.MustParsePrefix("169.254.0.0/16"), why: "link-local (where clouds serve instance metadata)"},
	{prefix: netip.MustParsePrefix("fd00:ec2::254/128"), why: "the AWS instance metadata endpoint (IPv6)"},
	{prefix: netip.MustParsePrefix("fd00:ec2::23/128"), why: "the AWS EKS Pod Identity endpoint (IPv6)"},
	{prefix: netip.MustParsePrefix("fd20:ce::254/128"), why: "the Google Cloud metadata server (IPv6)"},
	{prefix: netip.MustParsePrefix("fd00:42::42/128"), why: "the Scaleway metadata endpoint (IPv6)"},
	{prefix: netip.MustParsePrefix("fe80::a9fe:a9fe/128"), why: "link-local (the OpenStack metadata endpoint, IPv6)"},
	{prefix: netip.MustParsePrefix("fe80::/10"), why: "link-local"},
	{prefix: netip.MustParsePrefix("100.100.100.200/32"), why: "the Alibaba Cloud metadata endpoint"},
	{prefix: netip.MustParsePrefix("192.0.0.192/32"), why: "the Oracle Cloud Classic metadata endpoint"},
	{prefix: netip.MustParsePrefix("168.63.129.16/32"), why: "the Azure platform endpoint (WireServer)"},
}

// specialV4 lists the IPv4 networks that are not the public internet
// (IANA's special-purpose registry, RFC 6890). Reaching them from a Lambda
// would expose the VPC or the function's own host to whoever submits
// URLs. More specific prefixes come first so the message names the
// narrowest reason. Link-local is in metadataRanges.
var specialV4 = []specialRange{
	{prefix: netip.MustParsePrefix("255.255.255.255/32"), why: "broadcast"},
	{prefix: netip.MustParsePrefix("0.0.0.0/8"), why: "unspecified (this network)"},
	{prefix: netip.MustParsePrefix("10.0.0.0/8"), why: "private (RFC 1918)", private: true},
	{prefix: netip.MustParsePrefix("100.64.0.0/10"), why: "shared address space (CGNAT)", private: true},
	{prefix: netip.MustParsePrefix("127.0.0.0/8"), why: "loopback", private: true},
	{prefix: netip.MustParsePrefix("172.16.0.0/12"), why: "private (RFC 1918)", private: true},
	{prefix: netip.MustParsePrefix("192.0.0.0/24"), why: "IETF protocol assignments"},
	{prefix: netip.MustParsePrefix("192.0.2.0/24"), why: "documentation (TEST-NET-1)"},
	{prefix: netip.MustParsePrefix("192.88.99.0/24"), why: "the deprecated 6to4 relay anycast"},
	{prefix: netip.MustParsePrefix("192.168.0.0/16"), why: "private (RFC 1918)", private: true},
	{prefix: netip.MustParsePrefix("198.18.0.0/15"), why: "benchmarking"},
	{prefix: netip.MustParsePrefix("198.51.100.0/24"), why: "documentation (TEST-NET-2)"},
	{prefix: netip.MustParsePrefix("203.0.113.0/24"), why: "documentation (TEST-NET-3)"},
	{prefix: netip.MustParsePrefix("224.0.0.0/4"), why: "multicast"},
	{prefix: netip.MustParsePrefix("240.0.0.0/4"), why: "reserved"},
}

// specialV6Exact are judged before the transition forms, which would read
// them as IPv4-compatible forms of 0.0.0.0 and 0.0.0.1.
var specialV6Exact = []specialRange{
	{prefix: netip.MustParsePrefix("::/128"), why: "unspecified"},
	{prefix: netip.MustParsePrefix("::1/128"), why: "loopback", private: true},
}

// specialV6 lists the IPv6 networks that are never a public web server.
// The forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4)
// are judged by the IPv4 address inside, see embeddedV4; any address
// outside 2000::/3 not listed here is reserved.
var specialV6 = []specialRange{
	{prefix: netip.MustParsePrefix("fec0::/10"), why: "site-local (deprecated)"},
	{prefix: netip.MustParsePrefix("fc00::/7"), why: "unique local (private)", private: true},
	{prefix: netip.MustParsePrefix("ff00::/8"), why: "multicast"},
	{prefix: netip.MustParsePrefix("100::/64"), why: "discard-only"},
	// Local-use NAT64 (RFC 8215) translates into whatever IPv4 network the
	// operator chose, so no embedded address can be trusted.
	{prefix: netip.MustParsePrefix("64:ff9b:1::/48"), why: "local-use NAT64"},
	{prefix: netip.MustParsePrefix("2001:2::/48"), why: "benchmarking"},
	{prefix: netip.MustParsePrefix("2001:db8::/32"), why: "documentation"},
	// Teredo (2001::/32) hides an IPv4 address; the rest are protocol
	// anycasts and identifiers, never a web site.
	{prefix: netip.MustParsePrefix("2001::/23"), why: "IETF protocol assignments (Teredo and others)"},
	{prefix: netip.MustParsePrefix("3fff::/20"), why: "documentation"},
}

var (
	globalUnicastV6    = netip.MustParsePrefix("2000::/3")
	prefixV4Compatible = netip.MustParsePrefix("::/96")
	prefixV4Translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	prefixNAT64        = netip.MustParsePrefix("64:ff9b::/96")
	prefix6to4         = netip.MustParsePrefix("2002::/16")
)

// embeddedV4 returns the IPv4 address carried inside an IPv6 address by the
// transition forms a kernel or a NAT64 gateway would turn into a
// connection to that IPv4 address: IPv4-mapped (::ffff:a.b.c.d),
// IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64
// (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::). Checking the embedded
// address closes the "::ffff:169.254.169.254" bypass, and opening an IPv4
// network opens its mapped forms with it.
func embeddedV4(a netip.Addr) (netip.Addr, string, bool) {
	b := a.As16()
	switch {
	case a.Is4In6():
		return a.Unmap(), "IPv4-mapped", true
	case prefixV4Translated.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "IPv4-translated", true
	case prefixNAT64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "NAT64", true
	case prefixV4Compatible.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "IPv4-compatible", true
	case prefix6to4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "6to4", true
	}
	return netip.Addr{}, "", false
}
