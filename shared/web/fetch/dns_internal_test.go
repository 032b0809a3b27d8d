package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestDNSCacheBounded: past MaxEntries the expired answers go first.
func TestDNSCacheBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewDNSCache(DNSCacheOptions{Servers: []string{}, MaxEntries: 10, Now: func() time.Time { return now }})
	c.system = func(_ context.Context, name string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
	}
	for i := range 9 {
		c.Lookup(context.Background(), fmt.Sprintf("old%d.test", i))
	}
	now = now.Add(time.Hour) // all nine expired
	for i := range 5 {
		c.Lookup(context.Background(), fmt.Sprintf("new%d.test", i))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) != 5 {
		t.Errorf("%d names kept, want the 5 fresh ones", len(c.entries))
	}
	for i := range 5 {
		if c.entries[fmt.Sprintf("new%d.test", i)] == nil {
			t.Errorf("fresh answer new%d.test dropped", i)
		}
	}
}

// TestDNSCacheSystemFallback: with no nameserver every name goes to the
// system resolver: an answer is kept MinTTL, "not found" NegativeTTL, a
// temporary failure not at all.
func TestDNSCacheSystemFallback(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewDNSCache(DNSCacheOptions{Servers: []string{}, MinTTL: time.Minute, NegativeTTL: 5 * time.Second, Now: func() time.Time { return now }})
	asked := map[string]int{}
	c.system = func(_ context.Context, name string) ([]netip.Addr, error) {
		asked[name]++
		switch name {
		case "gone.test":
			return nil, &net.DNSError{Err: errNoSuchHost, Name: name, IsNotFound: true}
		case "flaky.test":
			return nil, &net.DNSError{Err: errServerMisbehaving, Name: name, IsTemporary: true}
		}
		return []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.1")}, nil
	}
	ctx := context.Background()
	addrs, err := c.Lookup(ctx, "site.test")
	if err != nil || fmt.Sprint(addrs) != "[192.0.2.1 2001:db8::1]" {
		t.Fatalf("Lookup = %v, %v; want IPv4 first", addrs, err)
	}
	for range 2 {
		_, err := c.Lookup(ctx, "gone.test")
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Fatalf("gone.test: %v, want not found", err)
		}
		c.Lookup(ctx, "flaky.test")
	}
	now = now.Add(59 * time.Second)
	c.Lookup(ctx, "site.test")
	if asked["site.test"] != 1 || asked["gone.test"] != 1 || asked["flaky.test"] != 2 {
		t.Errorf("system asked %v, want site.test and gone.test once, flaky.test each time", asked)
	}
	now = now.Add(2 * time.Second)
	c.Lookup(ctx, "site.test")
	c.Lookup(ctx, "gone.test")
	if asked["site.test"] != 2 || asked["gone.test"] != 2 {
		t.Errorf("system asked %v after MinTTL, want site.test and gone.test twice", asked)
	}
	if got := c.Stats().SystemLookups; got != 6 {
		t.Errorf("system lookups %d, want 6", got)
	}
}

func TestParseDNSServers(t *testing.T) {
	got, err := ParseDNSServers(" 127.0.0.1:5353, 10.0.0.2,,[::1]:53, ::1 ")
	if err != nil || fmt.Sprint(got) != "[127.0.0.1:5353 10.0.0.2:53 [::1]:53 [::1]:53]" {
		t.Errorf("ParseDNSServers = %v, %v", got, err)
	}
	for _, bad := range []string{"dns.test", "127.0.0.1:x", "1.2.3.4:99999"} {
		if _, err := ParseDNSServers(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseDNSServers(%q) = %v, want an error naming it", bad, err)
		}
	}
	c := NewDNSCache(DNSCacheOptions{Servers: []string{"127.0.0.9"}})
	if fmt.Sprint(c.servers) != "[127.0.0.9:53]" {
		t.Errorf("servers %v, want port 53 added", c.servers)
	}
}

func TestDNSCacheOnion(t *testing.T) {
	c := NewDNSCache(DNSCacheOptions{Servers: []string{"127.0.0.9:1"}})
	_, err := c.Lookup(context.Background(), "hidden.onion")
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound || c.Stats().Queries != 0 {
		t.Errorf("hidden.onion: %v after %d queries, want not found and none", err, c.Stats().Queries)
	}
}
