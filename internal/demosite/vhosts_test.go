package demosite

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVHosts: one listener serves any number of names, each its own pages
// and robots.txt, and the counters see each host's requests, connections
// and gaps.
func TestVHosts(t *testing.T) {
	s, err := StartVHosts(VHostOptions{Robots: "User-agent: *\nDisallow: /private\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	target := net.JoinHostPort(s.Addr().String(), itoa(s.Port()))
	// Every name dials the one listener (what a DNS answer would do).
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, target)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dial}, Timeout: 10 * time.Second}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i := range 3 {
		name := VHostName(i)
		for p := range 2 {
			code, body := get(s.URL(name, p))
			host := name + ":" + itoa(s.Port())
			if want := Body(host, "/page/"+itoa(p)); code != 200 || body != want {
				t.Errorf("%s: %d %q, want 200 %q", s.URL(name, p), code, body, want)
			}
		}
	}
	if code, body := get("http://" + VHostName(0) + ":" + itoa(s.Port()) + "/robots.txt"); code != 200 || body == "" {
		t.Errorf("robots.txt: %d %q", code, body)
	}
	if code, _ := get("http://" + VHostName(0) + ":" + itoa(s.Port()) + "/nothing"); code != 404 {
		t.Errorf("an unknown path answered %d, want 404", code)
	}
	st := s.Stats(time.Hour)
	if st.Hosts != 3 || st.Requests != 8 || st.Robots != 1 || st.Overlaps != 0 {
		t.Errorf("stats %+v, want 3 hosts, 8 requests, 1 robots.txt, no overlap", st)
	}
	// Requests one after another: every host's gap is below an hour.
	if st.BelowGap != 3 || st.MinGap < 0 {
		t.Errorf("stats %+v: want 3 hosts with a gap below the delay", st)
	}
	// Keep-alive: the client pools connections by name, so each name
	// opened one and kept it for its next requests.
	if st.Conns != 3 || st.MaxHostConns != 1 || st.OpenPeak != 3 || st.InflightPeak != 1 {
		t.Errorf("stats %+v: want 3 connections, 1 a host", st)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestVHostsOnManyAddrs: a site on several addresses serves every name on
// each, on one port, and AddrOf spreads names over all of them, the same
// address each time; a DNS server answering by AddrOf gives each name
// its address.
func TestVHostsOnManyAddrs(t *testing.T) {
	s, err := StartVHosts(VHostOptions{IP: "127.6.0.1", Addrs: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addrs := s.Addrs()
	if len(addrs) != 4 || addrs[0] != netip.MustParseAddr("127.6.0.1") || addrs[3] != netip.MustParseAddr("127.6.0.4") {
		t.Fatalf("addresses %v, want 127.6.0.1 to 127.6.0.4", addrs)
	}
	used := map[netip.Addr]int{}
	for i := range 100 {
		a := s.AddrOf(VHostName(i))
		if a != s.AddrOf(strings.ToUpper(VHostName(i))+".") {
			t.Fatalf("%s: AddrOf differs with case or a trailing dot", VHostName(i))
		}
		used[a]++
	}
	if len(used) != 4 {
		t.Errorf("100 names on %d of the 4 addresses: %v", len(used), used)
	}
	for _, a := range addrs {
		resp, err := http.Get("http://" + net.JoinHostPort(a.String(), itoa(s.Port())) + "/page/1")
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d, want 200", a, resp.StatusCode)
		}
	}
	dns, err := StartDNSBy(s.AddrOf)
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	r := resolverOf(dns)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 8 {
		got, err := r.LookupNetIP(ctx, "ip4", VHostName(i)+".")
		if err != nil {
			t.Fatal(err)
		}
		if want := s.AddrOf(VHostName(i)); len(got) != 1 || got[0] != want {
			t.Errorf("%s resolved to %v, want %v", VHostName(i), got, want)
		}
	}
}
