package fetch_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

var (
	localFlags = fetch.Remedy{Where: "local mode", Network: "--allow-net %s", Private: "--allow-private"}
	deployed   = fetch.Remedy{Where: "deployed", Network: "ALLOW_NETWORKS=%s", Private: "ALLOW_PRIVATE_NETWORKS=true"}
)

// opening is a policy that opens the networks named in list (as
// --allow-net reads them), with local mode's remedy.
func opening(t *testing.T, list string) fetch.AddressPolicy {
	t.Helper()
	nets, err := fetch.ParseNetworks(list)
	if err != nil {
		t.Fatalf("ParseNetworks(%q): %v", list, err)
	}
	return fetch.AddressPolicy{}.Open(nets...).WithRemedy(localFlags)
}

// TestAddressPolicy judges an address of every special range, in IPv4,
// IPv6 and the IPv6 forms that carry an IPv4 address, under the strict
// policy, the private set (--allow-private) and named networks
// (--allow-net): what opens each, and the metadata addresses only when
// named exactly.
func TestAddressPolicy(t *testing.T) {
	strict := fetch.AddressPolicy{}.WithRemedy(localFlags)
	private := fetch.PrivatePolicy().WithRemedy(localFlags)
	type verdict struct {
		policy string // "strict", "private", or the networks opened
		want   string // "" allowed, else a substring of the denial
	}
	tests := []struct {
		name     string
		addr     string // on port 80 unless it has one
		verdicts []verdict
	}{
		// Public unicast: allowed on the default ports by every policy.
		{"public v4", "93.184.216.34", []verdict{{"strict", ""}, {"private", ""}, {"127.0.0.0/8", ""}}},
		{"public v6", "2606:2800:220:1:248:1893:25c8:1946", []verdict{{"strict", ""}, {"private", ""}}},
		{"IPv4-mapped public", "::ffff:93.184.216.34", []verdict{{"strict", ""}}},
		{"NAT64 of a public v4", "64:ff9b::5db8:d822", []verdict{{"strict", ""}}},
		{"6to4 of a public v4", "2002:5db8:d822::1", []verdict{{"strict", ""}}},
		{"just below 10/8", "9.255.255.255", []verdict{{"strict", ""}}},
		{"just above 192.168/16", "192.169.0.1", []verdict{{"strict", ""}}},

		// The private set: each refused by default, naming its network and
		// --allow-private; opened by either.
		{"loopback", "127.0.0.1", []verdict{
			{"strict", "address 127.0.0.1 is loopback: not allowed (local mode: --allow-net 127.0.0.0/8 or --allow-private)"},
			{"private", ""}, {"127.0.0.0/8", ""}, {"127.0.0.1", ""}, {"127.0.0.2/32", "is loopback"}, {"10.0.0.0/8", "is loopback"}}},
		{"loopback top", "127.255.255.254", []verdict{{"strict", "is loopback"}, {"private", ""}}},
		{"RFC 1918 10/8", "10.1.2.3", []verdict{{"strict", "is private (RFC 1918): not allowed (local mode: --allow-net 10.0.0.0/8 or --allow-private)"},
			{"private", ""}, {"10.1.0.0/16", ""}, {"10.2.0.0/16", "is private"}}},
		{"RFC 1918 172.16/12", "172.31.255.255", []verdict{{"strict", "--allow-net 172.16.0.0/12 or --allow-private"}, {"private", ""}}},
		{"RFC 1918 192.168/16", "192.168.1.1", []verdict{{"strict", "--allow-net 192.168.0.0/16 or --allow-private"}, {"private", ""}}},
		{"CGNAT", "100.64.0.1", []verdict{{"strict", "is shared address space (CGNAT)"}, {"private", ""}, {"100.64.0.0/10", ""}}},
		{"v6 loopback", "::1", []verdict{{"strict", "address ::1 is loopback: not allowed (local mode: --allow-net ::1/128 or --allow-private)"},
			{"private", ""}, {"::1/128", ""}, {"127.0.0.0/8", "is loopback"}}},
		{"unique local", "fd12:3456::1", []verdict{{"strict", "is unique local (private): not allowed (local mode: --allow-net fc00::/7 or --allow-private)"},
			{"private", ""}, {"fd12:3456::/32", ""}}},

		// Special ranges outside the private set: only naming them opens.
		{"unspecified", "0.0.0.0", []verdict{{"strict", "is unspecified (this network): not allowed (local mode: --allow-net 0.0.0.0/8)"},
			{"private", "is unspecified"}, {"0.0.0.0/32", ""}}},
		{"this network", "0.1.2.3", []verdict{{"strict", "is unspecified"}}},
		{"broadcast", "255.255.255.255", []verdict{{"strict", "is broadcast"}, {"private", "is broadcast"}}},
		{"multicast", "239.255.255.250", []verdict{{"strict", "is multicast: not allowed (local mode: --allow-net 224.0.0.0/4)"}, {"private", "multicast"}, {"224.0.0.0/4", ""}}},
		{"reserved 240/4", "240.0.0.1", []verdict{{"strict", "is reserved"}}},
		{"IETF protocol assignments", "192.0.0.170", []verdict{{"strict", "IETF protocol assignments"}, {"private", "IETF"}}},
		{"TEST-NET-1", "192.0.2.1", []verdict{{"strict", "documentation"}}},
		{"TEST-NET-2", "198.51.100.7", []verdict{{"strict", "documentation"}}},
		{"TEST-NET-3", "203.0.113.9", []verdict{{"strict", "documentation"}, {"203.0.113.0/24", ""}}},
		{"benchmarking", "198.19.255.1", []verdict{{"strict", "benchmarking"}, {"private", "benchmarking"}}},
		{"6to4 relay anycast", "192.88.99.1", []verdict{{"strict", "6to4 relay"}}},
		{"v6 unspecified", "::", []verdict{{"strict", "is unspecified"}, {"private", "is unspecified"}}},
		{"v6 multicast", "ff02::1", []verdict{{"strict", "is multicast"}, {"private", "is multicast"}}},
		{"v6 site-local", "fec0::1", []verdict{{"strict", "site-local"}}},
		{"v6 discard-only", "100::1", []verdict{{"strict", "discard-only"}}},
		{"local-use NAT64", "64:ff9b:1::a00:1", []verdict{{"strict", "local-use NAT64"}, {"private", "local-use NAT64"}}},
		{"v6 documentation", "2001:db8::1", []verdict{{"strict", "documentation"}}},
		{"v6 documentation 3fff", "3fff::1", []verdict{{"strict", "documentation"}}},
		{"v6 benchmarking", "2001:2::1", []verdict{{"strict", "benchmarking"}}},
		{"Teredo", "2001::1", []verdict{{"strict", "IETF protocol assignments"}}},
		{"outside 2000::/3", "4000::1", []verdict{{"strict", "reserved (outside 2000::/3"}, {"4000::/3", ""}}},

		// Link-local and metadata: never the private set nor a broad
		// network; only a network inside the table's entry.
		{"AWS metadata", "169.254.169.254", []verdict{
			{"strict", "address 169.254.169.254 is link-local (the cloud instance metadata endpoint: AWS, GCP, Azure, Oracle, OpenStack): not allowed (local mode: --allow-net 169.254.169.254/32, named exactly; --allow-private never opens it)"},
			{"private", "is link-local"}, {"0.0.0.0/0", "is link-local"}, {"160.0.0.0/4", "is link-local"},
			{"169.254.0.0/16", "is link-local"}, {"169.254.169.0/24", "is link-local"},
			{"169.254.169.254/32", ""}, {"169.254.169.254", ""}, {"127.0.0.0/8,169.254.169.254/32", ""}}},
		{"ECS task credentials", "169.254.170.2", []verdict{{"strict", "ECS task metadata"}, {"169.254.0.0/16", "ECS"}, {"169.254.170.2/32", ""}}},
		{"EKS Pod Identity", "169.254.170.23", []verdict{{"strict", "EKS Pod Identity"}, {"169.254.170.23/32", ""}}},
		{"Tencent metadata", "169.254.0.23", []verdict{{"strict", "Tencent"}, {"169.254.0.0/16", "Tencent"}}},
		{"other link-local", "169.254.7.7", []verdict{{"strict", "--allow-net 169.254.7.7/32, named exactly"},
			{"private", "link-local"}, {"0.0.0.0/0", "link-local"}, {"169.254.0.0/16", ""}, {"169.254.7.0/24", ""}}},
		{"v6 link-local", "fe80::1", []verdict{{"strict", "is link-local: not allowed (local mode: --allow-net fe80::1/128, named exactly"},
			{"private", "link-local"}, {"::/0", "link-local"}, {"fe80::/10", ""}}},
		{"v6 link-local with zone", "fe80::1%eth0", []verdict{{"strict", "address fe80::1 is link-local"}, {"fe80::/64", ""}}},
		{"OpenStack v6 metadata", "fe80::a9fe:a9fe", []verdict{{"strict", "OpenStack"}, {"fe80::/10", "OpenStack"}, {"fe80::a9fe:a9fe/128", ""}}},
		{"AWS v6 metadata", "fd00:ec2::254", []verdict{{"strict", "is the AWS instance metadata endpoint (IPv6)"},
			{"private", "AWS instance metadata"}, {"fc00::/7", "AWS instance metadata"}, {"fd00:ec2::254/128", ""}}},
		{"AWS v6 beside the metadata", "fd00:ec2::1", []verdict{{"strict", "unique local"}, {"private", ""}}},
		{"EKS v6", "fd00:ec2::23", []verdict{{"private", "EKS Pod Identity"}, {"fd00:ec2::23/128", ""}}},
		{"GCP v6 metadata", "fd20:ce::254", []verdict{{"private", "Google Cloud metadata"}, {"fd20:ce::254/128", ""}}},
		{"Scaleway v6 metadata", "fd00:42::42", []verdict{{"private", "Scaleway"}}},
		{"Alibaba metadata", "100.100.100.200", []verdict{{"strict", "Alibaba Cloud metadata"},
			{"private", "Alibaba"}, {"100.64.0.0/10", "Alibaba"}, {"100.100.100.200/32", ""}}},
		{"beside Alibaba metadata", "100.100.100.201", []verdict{{"private", ""}}},
		{"Oracle Classic metadata", "192.0.0.192", []verdict{{"strict", "Oracle Cloud Classic"}, {"192.0.0.0/24", "Oracle"}, {"192.0.0.192/32", ""}}},
		{"Azure WireServer", "168.63.129.16", []verdict{{"strict", "Azure platform endpoint"}, {"0.0.0.0/0", "Azure"}, {"168.63.129.16/32", ""}}},

		// IPv4 inside IPv6: judged, and opened, as the IPv4 address.
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", []verdict{
			{"strict", "address ::ffff:127.0.0.1 is the IPv4-mapped form of 127.0.0.1, which is loopback: not allowed (local mode: --allow-net 127.0.0.0/8 or --allow-private)"},
			{"private", ""}, {"127.0.0.0/8", ""}}},
		{"IPv4-mapped metadata", "::ffff:169.254.169.254", []verdict{{"strict", "IPv4-mapped form of 169.254.169.254, which is link-local"},
			{"private", "IPv4-mapped"}, {"169.254.0.0/16", "IPv4-mapped"}, {"::ffff:0:0/96", "IPv4-mapped"}, {"169.254.169.254/32", ""}}},
		{"IPv4-mapped in hex", "::ffff:a9fe:a9fe", []verdict{{"strict", "169.254.169.254, which is link-local"}}},
		{"IPv4-translated metadata", "::ffff:0:a9fe:a9fe", []verdict{{"strict", "IPv4-translated form of 169.254.169.254"}, {"private", "IPv4-translated"}}},
		{"IPv4-compatible loopback", "::127.0.0.1", []verdict{{"strict", "IPv4-compatible form of 127.0.0.1"}, {"private", ""}}},
		{"NAT64 of private", "64:ff9b::10.0.0.1", []verdict{{"strict", "NAT64 form of 10.0.0.1, which is private (RFC 1918): not allowed (local mode: --allow-net 10.0.0.0/8 or --allow-private)"},
			{"private", ""}}},
		{"NAT64 of metadata", "64:ff9b::a9fe:a9fe", []verdict{{"strict", "NAT64 form of 169.254.169.254"}, {"private", "NAT64"}, {"64:ff9b::/96", "NAT64"}}},
		{"6to4 of metadata", "2002:a9fe:a9fe::1", []verdict{{"strict", "6to4 form of 169.254.169.254"}, {"private", "6to4"}, {"2002::/16", "6to4"}}},

		// Ports: an opened address is open on every port; a public one
		// keeps the allowed ports unless a named network holds it.
		{"opened loopback on any port", "127.0.0.1:6379", []verdict{{"private", ""}, {"127.0.0.0/8", ""}}},
		{"public on a port not allowed", "93.184.216.34:22", []verdict{{"strict", "port 22 of 93.184.216.34 is not allowed (allowed ports: 80, 443)"},
			{"private", "port 22"}, {"93.184.216.0/24", ""}}},
		{"refused address checked before its port", "10.0.0.1:22", []verdict{{"strict", "is private"}}},
		{"metadata on any port once named", "169.254.169.254:8080", []verdict{{"169.254.169.254/32", ""}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ap, err := netip.ParseAddrPort(tc.addr)
			if err != nil {
				a, err := netip.ParseAddr(tc.addr)
				if err != nil {
					t.Fatalf("test address %q: %v", tc.addr, err)
				}
				ap = netip.AddrPortFrom(a, 80)
			}
			for _, v := range tc.verdicts {
				var p fetch.AddressPolicy
				switch v.policy {
				case "strict":
					p = strict
				case "private":
					p = private
				default:
					p = opening(t, v.policy)
				}
				err := p.Check(ap, nil)
				switch {
				case v.want == "" && err != nil:
					t.Errorf("policy %s: Check(%s) = %v, want allowed", v.policy, ap, err)
				case v.want != "" && err == nil:
					t.Errorf("policy %s: Check(%s) allowed, want %q", v.policy, ap, v.want)
				case err != nil && (fetch.KindOf(err) != fetch.KindDenied || fetch.IsTransient(err)):
					t.Errorf("policy %s: Check(%s) = %v of kind %s, want a permanent denial", v.policy, ap, err, fetch.KindOf(err))
				case err != nil && !strings.Contains(err.Error(), v.want):
					t.Errorf("policy %s: Check(%s) = %q, want it to contain %q", v.policy, ap, err, v.want)
				}
			}
		})
	}
}

// TestAddressPolicyRemedy: each setting names its own remedy; without one
// the message says only what was refused.
func TestAddressPolicyRemedy(t *testing.T) {
	loop := netip.MustParseAddrPort("127.0.0.1:80")
	meta := netip.MustParseAddrPort("169.254.169.254:80")
	tests := []struct {
		name   string
		remedy fetch.Remedy
		addr   netip.AddrPort
		want   string
	}{
		{"none", fetch.Remedy{}, loop, "check address: address 127.0.0.1 is loopback: not allowed"},
		{"local mode", localFlags, loop, "check address: address 127.0.0.1 is loopback: not allowed (local mode: --allow-net 127.0.0.0/8 or --allow-private)"},
		{"deployed", deployed, loop, "check address: address 127.0.0.1 is loopback: not allowed (deployed: ALLOW_NETWORKS=127.0.0.0/8 or ALLOW_PRIVATE_NETWORKS=true)"},
		{"deployed metadata", deployed, meta, "not allowed (deployed: ALLOW_NETWORKS=169.254.169.254/32, named exactly; ALLOW_PRIVATE_NETWORKS=true never opens it)"},
		{"no private setting", fetch.Remedy{Where: "here", Network: "open %s"}, meta, "not allowed (here: open 169.254.169.254/32)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := fetch.AddressPolicy{}.WithRemedy(tc.remedy).Check(tc.addr, nil)
			if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("Check(%s) = %v, want it to end %q", tc.addr, err, tc.want)
			}
		})
	}
}

// TestAddressFix reads the remedy back from a denial, also as a result's
// error carries it (inside the fetch error chain), and nothing from other
// errors.
func TestAddressFix(t *testing.T) {
	err := fetch.AddressPolicy{}.WithRemedy(localFlags).Check(netip.MustParseAddrPort("10.0.0.1:80"), nil)
	tests := []struct {
		name, msg, want string
	}{
		{"denial", err.Error(), "local mode: --allow-net 10.0.0.0/8 or --allow-private"},
		{"in a result's error", "get http://10.0.0.1/: dial: dial tcp 10.0.0.1:80: " + err.Error(), "local mode: --allow-net 10.0.0.0/8 or --allow-private"},
		{"no remedy", "check address: address 10.0.0.1 is private (RFC 1918): not allowed", ""},
		{"port", "check address: port 22 of 1.2.3.4 is not allowed (allowed ports: 80, 443)", ""},
		{"robots", "disallowed by robots.txt", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fetch.AddressFix(tc.msg); got != tc.want {
				t.Errorf("AddressFix(%q) = %q, want %q", tc.msg, got, tc.want)
			}
		})
	}
}

// TestParseNetworks: lists as --allow-net and ALLOW_NETWORKS take them,
// and every kind of bad item refused by name.
func TestParseNetworks(t *testing.T) {
	good := []struct {
		list string
		want string // the networks, comma-joined
	}{
		{"", ""},
		{"127.0.0.0/8", "127.0.0.0/8"},
		{" 127.0.0.0/8 , ::1/128 ,", "127.0.0.0/8,::1/128"},
		{"169.254.169.254", "169.254.169.254/32"},
		{"fd00:ec2::254", "fd00:ec2::254/128"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"0.0.0.0/0", "0.0.0.0/0"},
	}
	for _, tc := range good {
		nets, err := fetch.ParseNetworks(tc.list)
		if err != nil {
			t.Errorf("ParseNetworks(%q): %v", tc.list, err)
			continue
		}
		var got []string
		for _, n := range nets {
			got = append(got, n.String())
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("ParseNetworks(%q) = %v, want %s", tc.list, got, tc.want)
		}
	}
	bad := []struct {
		list string
		want string
	}{
		{"localhost", `"localhost" is not a network: want CIDR notation such as 127.0.0.0/8 or ::1/128`},
		{"127.0.0.0/8,10.0.0.0/33", `"10.0.0.0/33" is not a network`},
		{"10.1.2.3/8", `"10.1.2.3/8" has bits set past its /8: did you mean 10.0.0.0/8?`},
		{"fe80::1%eth0", `"fe80::1%eth0" is not a network`},
		{"127.0.0.0/", `"127.0.0.0/" is not a network`},
		{"::ffff:0:0/95", "write the IPv4 network"},
		{"127.0.0.0/8;10.0.0.0/8", `"127.0.0.0/8;10.0.0.0/8" is not a network`},
	}
	for _, tc := range bad {
		_, err := fetch.ParseNetworks(tc.list)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseNetworks(%q) = %v, want an error containing %q", tc.list, err, tc.want)
		}
	}
}

// TestAddressPolicyValue: Open copies, sorts and deduplicates; Equal and
// String see what is opened.
func TestAddressPolicyValue(t *testing.T) {
	a := opening(t, "10.0.0.0/8,127.0.0.0/8")
	b := opening(t, "127.0.0.0/8, 10.0.0.0/8, 10.0.0.0/8")
	if !a.Equal(b) {
		t.Errorf("%s and %s differ, want equal", a, b)
	}
	if a.Equal(a.OpenPrivate()) || a.Equal(a.WithRemedy(fetch.Remedy{})) {
		t.Errorf("Equal ignores the private set or the remedy")
	}
	if got := a.OpenPrivate().String(); got != "private networks, 10.0.0.0/8, 127.0.0.0/8" {
		t.Errorf("String = %q", got)
	}
	if got := (fetch.AddressPolicy{}).String(); got != "public addresses only" {
		t.Errorf("zero String = %q", got)
	}
	nets := a.Networks()
	nets[0] = netip.MustParsePrefix("0.0.0.0/0")
	if err := a.Check(netip.MustParseAddrPort("192.168.0.1:80"), nil); err == nil {
		t.Errorf("changing Networks' slice opened the policy")
	}
	if !fetch.PrivatePolicy().Private() || a.Private() {
		t.Errorf("Private() wrong")
	}
}

// TestNetworkPorts: networks read with their ports, and a policy that
// opens a network on some ports refuses the others, metadata addresses
// included (named exactly, on the port named).
func TestNetworkPorts(t *testing.T) {
	nets, err := fetch.ParseNetworkPorts("127.0.0.0/8:8080, 10.0.0.0/8:8000-8099,[::1]:9000,169.254.169.254:80,fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nets {
		got = append(got, n.String())
	}
	if s := strings.Join(got, " "); s != "127.0.0.0/8:8080 10.0.0.0/8:8000-8099 ::1/128:9000 169.254.169.254/32:80 fd00::/8" {
		t.Errorf("read %s", s)
	}
	for _, bad := range []string{"127.0.0.0/8:0", "127.0.0.0/8:70000", "127.0.0.0/8:90-80", "[::1]x", "10.1.2.3/8:80"} {
		if _, err := fetch.ParseNetworkPorts(bad); err == nil {
			t.Errorf("ParseNetworkPorts(%q) accepted", bad)
		}
	}
	p := fetch.AddressPolicy{}.OpenNetworks(nets...)
	for addr, allowed := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.1:8081": false, "10.9.9.9:8050": true, "10.9.9.9:22": false,
		"[::1]:9000": true, "[::1]:9001": false, "169.254.169.254:80": true, "169.254.169.254:8080": false,
		"[::ffff:127.0.0.1]:8080": true, "[::ffff:127.0.0.1]:22": false, "[fd00::1]:5432": true,
	} {
		if err := p.Check(netip.MustParseAddrPort(addr), nil); (err == nil) != allowed {
			t.Errorf("Check(%s) = %v, want allowed %v", addr, err, allowed)
		}
	}
}
