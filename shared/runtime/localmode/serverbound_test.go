package localmode

import (
	"net/netip"
	"testing"
	"time"
)

// Hosts that share a server address wait on its gate: the address's
// requests × ServerDelay bound the job when that is longer than any one
// host's URLs × its delay. Exempt or unknown addresses bound nothing.
func TestServerBound(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	var hosts []HostLoad
	for range 40 {
		hosts = append(hosts, HostLoad{Key: "s.test", URLs: 5, Delay: time.Second, Addr: a, ServerDelay: 200 * time.Millisecond})
	}
	hosts = append(hosts,
		HostLoad{Key: "alone.test", URLs: 30, Delay: time.Second, Addr: b, ServerDelay: 200 * time.Millisecond},
		HostLoad{Key: "cdn.test", URLs: 500, Copies: 0, Delay: time.Second, Addr: netip.MustParseAddr("104.16.0.1")},
		HostLoad{Key: "unknown.test", URLs: 500, Delay: time.Second, ServerDelay: 200 * time.Millisecond})
	got, worst := ServerBound(hosts)
	if got != 40*time.Second || worst.Addr != a || worst.Hosts != 40 || worst.Fetches != 200 {
		t.Errorf("ServerBound = %v, %+v; want 40s on %v (40 hosts, 200 requests × 200ms)", got, worst, a)
	}
	if hb, _ := Bound(hosts); hb != 500*time.Second {
		t.Errorf("Bound = %v, want the per-host bound unchanged (500s)", hb)
	}
	if got, _ := ServerBound(nil); got != 0 {
		t.Errorf("ServerBound(nil) = %v", got)
	}
}
