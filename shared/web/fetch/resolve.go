package fetch

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"
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

// lookup resolves host from the table for a dial on network. A name the
// table lacks fails exactly as Go's resolver reports NXDOMAIN: a
// *net.DNSError with IsNotFound, so KindOf, IsTransient and the message
// cannot tell the two apart.
func (t hostTable) lookup(_ context.Context, network, host string) ([]netip.Addr, error) {
	return forNetwork(t[tableKey(host)], network, host)
}

// lookupFunc finds the addresses to dial for host on network ("tcp",
// "tcp4" or "tcp6"), in the order to try them.
type lookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// resolvingDial returns a dialFunc that looks host names up with lookup
// and dials their addresses in order through d, whose Control hook (the
// address guard) judges each one: a table's address, a DNS answer and a
// cached one alike. IP literals are dialed as they are. A failed lookup
// comes back as the dial error Go's own dialer gives, a *net.OpError
// "dial" around the *net.DNSError.
func resolvingDial(lookup lookupFunc, d Dialer) dialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return d.DialContext(ctx, network, address)
		}
		if _, err := netip.ParseAddr(host); err == nil {
			return d.DialContext(ctx, network, address)
		}
		addrs, err := lookup(ctx, network, host)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		var first error
		for i, a := range addrs {
			c, err := dialPart(ctx, d, network, net.JoinHostPort(a.String(), port), len(addrs)-i)
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

// dialPart dials one of the remaining addresses with its share of the
// time left, as Go's dialer does, so an address that never answers leaves
// time for the next.
func dialPart(ctx context.Context, d Dialer, network, address string, remaining int) (net.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok && remaining > 1 {
		left := time.Until(deadline)
		share := left / time.Duration(remaining)
		// Go's dialer's floor: a slow but working address still connects.
		const floor = 2 * time.Second
		if share < floor {
			share = min(floor, left)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, share)
		defer cancel()
	}
	return d.DialContext(ctx, network, address)
}
