package hostqueue_test

import (
	"net/netip"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// TestPlace: a host is placed by the lowest of its addresses (IPv4 before
// IPv6), whatever order the answer lists them in; by name when it has
// none or that address is exempt; an IPv4-mapped IPv6 address places as
// its IPv4 one.
func TestPlace(t *testing.T) {
	a := netip.MustParseAddr
	cdn := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	const key = "www.example.test"
	cases := []struct {
		name  string
		addrs []netip.Addr
		want  netip.Addr // invalid: by name
	}{
		{"one address", []netip.Addr{a("192.0.2.7")}, a("192.0.2.7")},
		{"several: the lowest", []netip.Addr{a("192.0.2.9"), a("192.0.2.7"), a("192.0.2.8")}, a("192.0.2.7")},
		{"IPv4 before IPv6", []netip.Addr{a("2001:db8::1"), a("203.0.113.5")}, a("203.0.113.5")},
		{"IPv4-mapped", []netip.Addr{a("::ffff:192.0.2.7")}, a("192.0.2.7")},
		{"exempt", []netip.Addr{a("198.51.100.4"), a("198.51.100.9")}, netip.Addr{}},
		{"lowest exempt", []netip.Addr{a("203.0.113.5"), a("198.51.100.4")}, netip.Addr{}},
		{"none", nil, netip.Addr{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := hostqueue.PlaceAddr(c.addrs, cdn)
			if ok != c.want.IsValid() || ok && got != c.want {
				t.Errorf("PlaceAddr(%v) = %v, %v; want %v", c.addrs, got, ok, c.want)
			}
			want := hostqueue.VirtualShard(key)
			if c.want.IsValid() {
				want = hostqueue.PlaceShard(key, c.want, true)
			}
			if vs := hostqueue.Place(key, c.addrs, cdn); vs != want {
				t.Errorf("Place = shard %d, want %d", vs, want)
			}
		})
	}
	// Every name of one server shares its shard; names alone spread.
	byName := map[int]bool{}
	for _, k := range []string{"a.test", "b.test", "c.test", "d.test", "e.test", "f.test"} {
		if vs := hostqueue.Place(k, []netip.Addr{a("192.0.2.7")}, nil); vs != hostqueue.PlaceShard("", a("192.0.2.7"), true) {
			t.Errorf("%s: shard %d, want its server's", k, vs)
		}
		byName[hostqueue.VirtualShard(k)] = true
	}
	if len(byName) < 2 {
		t.Errorf("six names hash to one shard: the check above shows nothing")
	}
}
