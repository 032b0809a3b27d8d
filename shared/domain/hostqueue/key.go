package hostqueue

import (
	"net"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// QueueKey returns the politeness queue of a normalised host (host[:port]):
// the host itself, or in domain mode its registrable domain (with the port,
// which names a different server), so all hosts of one site share one delay.
// IP literals and names without a registrable domain stay as they are.
func QueueKey(host string, byDomain bool) string {
	if !byDomain {
		return host
	}
	name, port := host, ""
	if h, p, err := net.SplitHostPort(host); err == nil {
		name, port = h, p
	}
	if net.ParseIP(strings.Trim(name, "[]")) != nil {
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(name)
	if err != nil || d == "" {
		return host
	}
	if port != "" {
		return net.JoinHostPort(d, port)
	}
	return d
}
