package main

// --dns-server: the nameservers local mode asks instead of the system's
// (/etc/resolv.conf), as curl's --dns-servers: a resolver of one's own, a
// split-horizon server for an internal site, or a test server on loopback.

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

var dnsServerFlag dnsServersFlag

func init() {
	flag.Var(&dnsServerFlag, "dns-server", "local backend: ask this nameserver, `IP[:PORT]`[,IP[:PORT]...] (port 53 by default), repeatable, instead of those of /etc/resolv.conf; each is asked in turn until one answers")
}

// dnsServersFlag is --dns-server: "ip:port" nameservers, comma-separated,
// the flag repeatable. A bad item fails the flag, and the flag package
// names the flag and the value in the usage error.
type dnsServersFlag []string

func (d *dnsServersFlag) String() string {
	if d == nil {
		return ""
	}
	return strings.Join(*d, ",")
}

func (d *dnsServersFlag) Set(v string) error {
	var out []string
	for _, item := range strings.Split(v, ",") {
		s, err := parseDNSServer(strings.TrimSpace(item))
		if err != nil {
			return err
		}
		out = append(out, s)
	}
	*d = append(*d, out...)
	return nil
}

// parseDNSServer reads IP or IP:PORT ([IPv6]:PORT) as "ip:port". A name
// is refused: resolving the resolver would need a resolver.
func parseDNSServer(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("empty nameserver: want IP[:PORT], e.g. 127.0.0.1:5353")
	}
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return net.JoinHostPort(ip.String(), "53"), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		return "", fmt.Errorf("nameserver %q: want an IP address with an optional port, IP[:PORT], e.g. 127.0.0.1:5353", s)
	}
	return ap.String(), nil
}
