package demosite

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// TestDNS: every name resolves to the one address (A), none has an AAAA,
// and the server counts the messages and the names.
func TestDNS(t *testing.T) {
	want := netip.MustParseAddr("127.0.0.9")
	s, err := StartDNS(want)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := resolverOf(s)
	// Only bounds a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{VHostName(1) + ".", VHostName(2) + "."} {
		got, err := r.LookupNetIP(ctx, "ip", name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, []netip.Addr{want}) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if s.Names() != 2 || s.Queries() < 4 {
		t.Errorf("%d names, %d queries; want 2 names asked A and AAAA each", s.Names(), s.Queries())
	}
}

// resolverOf is Go's own resolver asking only s, over UDP.
func resolverOf(s *DNSServer) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", s.Addr())
	}}
}
