package fetch_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

func TestCheckAddress(t *testing.T) {
	def := fetch.Options{}
	tests := []struct {
		name    string
		addr    string
		opts    fetch.Options
		wantMsg string // empty: allowed
	}{
		// Public addresses on the default ports pass.
		{"public v4 on 80", "93.184.216.34:80", def, ""},
		{"public v4 on 443", "93.184.216.34:443", def, ""},
		{"public v6", "[2606:2800:220:1:248:1893:25c8:1946]:443", def, ""},
		{"IPv4-mapped public", "[::ffff:93.184.216.34]:80", def, ""},
		{"NAT64 of a public v4", "[64:ff9b::5db8:d822]:443", def, ""},
		{"6to4 of a public v4", "[2002:5db8:d822::1]:80", def, ""},
		// Just outside the blocked ranges.
		{"below 172.16/12", "172.15.255.255:80", def, ""},
		{"above 172.16/12", "172.32.0.1:80", def, ""},
		{"below CGNAT", "100.63.255.255:80", def, ""},
		{"above CGNAT", "100.128.0.0:80", def, ""},
		{"below link-local", "169.253.255.255:80", def, ""},
		{"above 10/8", "11.0.0.1:80", def, ""},
		{"below multicast", "223.255.255.255:80", def, ""},

		// IPv4 ranges.
		{"loopback", "127.0.0.1:80", def, "127.0.0.1 is loopback"},
		{"loopback top", "127.255.255.254:443", def, "is loopback"},
		{"RFC1918 10/8", "10.1.2.3:80", def, "is private (RFC 1918)"},
		{"RFC1918 172.16/12 low", "172.16.0.1:80", def, "is private (RFC 1918)"},
		{"RFC1918 172.16/12 high", "172.31.255.255:80", def, "is private (RFC 1918)"},
		{"RFC1918 192.168/16", "192.168.1.1:443", def, "is private (RFC 1918)"},
		{"metadata endpoint", "169.254.169.254:80", def,
			"address 169.254.169.254 is link-local (the cloud instance metadata endpoint: AWS, GCP, Azure, Oracle, OpenStack): not allowed"},
		{"CGNAT low", "100.64.0.1:80", def, "is shared address space (CGNAT)"},
		{"CGNAT high", "100.127.255.255:80", def, "CGNAT"},
		{"unspecified", "0.0.0.0:80", def, "is unspecified"},
		{"this network", "0.1.2.3:80", def, "is unspecified"},
		{"multicast", "224.0.0.1:80", def, "is multicast"},
		{"multicast SSDP", "239.255.255.250:80", def, "is multicast"},
		{"broadcast", "255.255.255.255:80", def, "is broadcast"},
		{"reserved 240/4", "240.0.0.1:80", def, "is reserved"},
		{"IETF protocol assignments", "192.0.0.170:80", def, "IETF protocol assignments"},
		{"benchmarking", "198.18.0.1:80", def, "benchmarking"},

		// IPv6 ranges.
		{"v6 loopback", "[::1]:80", def, "address ::1 is loopback"},
		{"v6 unspecified", "[::]:80", def, "is unspecified"},
		{"v6 link-local", "[fe80::1]:80", def, "is link-local"},
		{"v6 link-local with zone", "[fe80::1%eth0]:80", def, "is link-local"},
		{"v6 unique local", "[fc00::1]:80", def, "is unique local"},
		{"v6 unique local fd", "[fd12:3456::1]:443", def, "is unique local"},
		{"AWS IPv6 metadata endpoint", "[fd00:ec2::254]:80", def, "is the AWS instance metadata endpoint (IPv6)"},
		{"v6 multicast", "[ff02::1]:80", def, "is multicast"},
		{"v6 site-local", "[fec0::1]:80", def, "site-local"},
		{"v6 discard-only", "[100::1]:80", def, "discard-only"},
		{"local-use NAT64", "[64:ff9b:1::a00:1]:80", def, "local-use NAT64"},

		// IPv4 hidden inside IPv6.
		{"IPv4-mapped loopback", "[::ffff:127.0.0.1]:80", def, "IPv4-mapped form of 127.0.0.1, which is loopback"},
		{"IPv4-mapped metadata", "[::ffff:169.254.169.254]:80", def, "IPv4-mapped form of 169.254.169.254, which is link-local (the cloud instance metadata endpoint"},
		{"IPv4-mapped private", "[::ffff:10.0.0.1]:443", def, "IPv4-mapped form of 10.0.0.1"},
		{"IPv4-mapped in hex", "[::ffff:a9fe:a9fe]:80", def, "169.254.169.254, which is link-local"},
		{"IPv4-compatible loopback", "[::127.0.0.1]:80", def, "IPv4-compatible form of 127.0.0.1"},
		{"IPv4-compatible metadata", "[::169.254.169.254]:80", def, "IPv4-compatible form of 169.254.169.254"},
		{"NAT64 of private", "[64:ff9b::10.0.0.1]:80", def, "NAT64 form of 10.0.0.1"},
		{"NAT64 of metadata", "[64:ff9b::a9fe:a9fe]:80", def, "NAT64 form of 169.254.169.254"},
		{"6to4 of metadata", "[2002:a9fe:a9fe::1]:80", def, "6to4 form of 169.254.169.254"},

		// Ports.
		{"port 8080 by default", "93.184.216.34:8080", def, "port 8080 of 93.184.216.34 is not allowed (allowed ports: 80, 443)"},
		{"port 22 by default", "93.184.216.34:22", def, "port 22"},
		{"configured port allowed", "93.184.216.34:8080", fetch.Options{AllowedPorts: []int{8080}}, ""},
		{"unlisted port refused", "93.184.216.34:80", fetch.Options{AllowedPorts: []int{8080}}, "allowed ports: 8080"},
		{"private address checked before port", "10.0.0.1:22", def, "is private"},

		// AllowPrivate opens the private set on every port, never the
		// metadata endpoint; the policy in Addresses adds to it.
		{"AllowPrivate loopback", "127.0.0.1:22", fetch.Options{AllowPrivate: true}, ""},
		{"AllowPrivate metadata", "169.254.169.254:80", fetch.Options{AllowPrivate: true}, "is link-local"},
		{"AllowPrivate v6 mapped", "[::ffff:127.0.0.1]:6379", fetch.Options{AllowPrivate: true}, ""},
		{"AllowPrivate public port", "93.184.216.34:22", fetch.Options{AllowPrivate: true}, "port 22"},
		{"Addresses with AllowPrivate", "169.254.169.254:80",
			fetch.Options{AllowPrivate: true, Addresses: fetch.AddressPolicy{}.Open(netip.MustParsePrefix("169.254.169.254/32"))}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ap := netip.MustParseAddrPort(tc.addr)
			err := fetch.CheckAddress(ap, tc.opts)
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("CheckAddress(%s) = %v, want allowed", tc.addr, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckAddress(%s) allowed, want %q", tc.addr, tc.wantMsg)
			}
			if fetch.KindOf(err) != fetch.KindDenied {
				t.Errorf("kind = %v, want denied", fetch.KindOf(err))
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
}
