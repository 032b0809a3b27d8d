package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
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
