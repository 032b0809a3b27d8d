package fetch

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// errNoSuchHost is the text Go's resolver gives an NXDOMAIN answer; a name
// missing from a fixed table fails with the same words, so logs and result
// messages read the same as in production.
const errNoSuchHost = "no such host"

// hostTable resolves names from a fixed table instead of DNS (Options.Resolve).
type hostTable map[string][]netip.Addr

// newHostTable copies t with its names in the form lookups use (lowercase,
// no trailing dot), so a caller that changes its map afterwards cannot
// change where the fetcher connects.
func newHostTable(t map[string][]netip.Addr) hostTable {
	if t == nil {
		return nil
	}
	out := make(hostTable, len(t))
	for name, addrs := range t {
		out[tableKey(name)] = slices.Clone(addrs)
	}
	return out
}

func tableKey(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// dialContext returns a DialContext that looks host names up in the table
// and dials their addresses in order through d, whose Control hook (the
// address guard) judges each one, as it judges addresses from DNS. IP
// literals are dialed as they are. A name the table lacks fails exactly as
// Go's resolver reports NXDOMAIN: a *net.OpError "dial" around a
// *net.DNSError with IsNotFound, so KindOf, IsTransient and the message
// cannot tell the two apart.
func (t hostTable) dialContext(d Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return d.DialContext(ctx, network, address)
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, address)
		}
		var addrs []netip.Addr
		for _, a := range t[tableKey(host)] {
			if network == "tcp4" && !a.Unmap().Is4() || network == "tcp6" && !a.Is6() {
				continue
			}
			addrs = append(addrs, a)
		}
		if len(addrs) == 0 {
			return nil, &net.OpError{Op: "dial", Net: network,
				Err: &net.DNSError{Err: errNoSuchHost, Name: host, IsNotFound: true}}
		}
		var first error
		for _, a := range addrs {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
			if err == nil {
				return c, nil
			}
			if first == nil {
				first = err
			}
			if ctx.Err() != nil {
				break
			}
		}
		return nil, first
	}
}
