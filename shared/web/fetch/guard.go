package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// defaultPorts are the only ports a public web page is normally served on;
// anything else (SSH, Redis, an admin console) is refused unless configured.
var defaultPorts = []int{80, 443}

// CheckAddress decides whether a fetcher with opts may connect to addr: it
// is opts' AddressPolicy's Check on opts.AllowedPorts (see AddressPolicy).
// Fetch runs it on every connection at dial time, after DNS resolution.
func CheckAddress(addr netip.AddrPort, opts Options) error {
	return opts.addressPolicy().Check(addr, opts.AllowedPorts)
}

// addressPolicy is the policy opts ask for: Addresses, with the private
// set opened too when AllowPrivate is set.
func (o Options) addressPolicy() AddressPolicy {
	if o.AllowPrivate {
		return o.Addresses.OpenPrivate()
	}
	return o.Addresses
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
	policy, ports := opts.addressPolicy(), opts.AllowedPorts
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			// Refuse what we cannot read: an unknown form must not pass.
			return deny(fmt.Sprintf("cannot check dial address %q: %v", address, err))
		}
		return policy.Check(ap, ports)
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
