package params

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestServerExemptParse(t *testing.T) {
	tests := []struct {
		in, want string
		bad      string
	}{
		{in: "none", want: "none"},
		{in: "", want: "none"},
		{in: "cdn", want: "cdn"},
		{in: " CDN , 192.0.2.7/24, 2001:db8::1", want: "cdn,192.0.2.0/24,2001:db8::1/128"},
		{in: "192.0.2.0/33", bad: "not a range"},
		{in: "example.com", bad: "not a range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(map[string]string{NameServerExempt: tt.in}, Defaults())
			if tt.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.bad) || !strings.Contains(err.Error(), NameServerExempt) {
					t.Fatalf("Parse(%q) error = %v, want one naming %s and %q", tt.in, err, NameServerExempt, tt.bad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.ServerExempt.String(); got != tt.want {
				t.Errorf("ServerExempt = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestServerParamsBounds(t *testing.T) {
	for _, raw := range []map[string]string{
		{NameServerDelay: "-1s"}, {NameServerDelay: "2m"},
		{NameServerConnections: "0"}, {NameServerConnections: "17"},
	} {
		_, err := Parse(raw, Defaults())
		if err == nil {
			t.Errorf("Parse(%v) took an out-of-bounds value", raw)
		}
	}
	p, err := Parse(map[string]string{NameServerDelay: "0", NameServerConnections: "2"}, Defaults())
	if err != nil || p.ServerDelay != 0 || p.ServerConnections != 2 {
		t.Fatalf("Parse(0, 2) = %v, %v", p.ServerDelay, err)
	}
}

// The default exempt list holds the CDNs' edges and nothing of a shared
// host's, and one function decides for every caller.
func TestServerFor(t *testing.T) {
	rules, err := ParseHostRules(`[
		{"match": "198.51.100.0/24", "serverDelay": "2s", "serverConnections": 2},
		{"match": "203.0.113.0/24", "serverExempt": true},
		{"match": "slow.example", "delay": "3s", "serverDelay": "1s"},
		{"match": "big.example", "serverExempt": true}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	p := Defaults()
	p.HostRules = rules
	def := Server{Delay: DefaultServerDelay, Connections: DefaultServerConnections}
	addr := netip.MustParseAddr
	tests := []struct {
		name string
		host string
		a    netip.Addr
		want Server
	}{
		{"shared host", "a.example", addr("192.0.2.1"), def},
		{"cloudflare edge", "a.example", addr("104.16.1.1"), Server{}},
		{"fastly edge v6", "a.example", addr("2a04:4e42::1"), Server{}},
		{"fastly edge mapped", "a.example", addr("::ffff:151.101.1.1"), Server{}},
		{"range rule", "a.example", addr("198.51.100.9"), Server{Delay: 2 * time.Second, Connections: 2}},
		{"range exempt", "a.example", addr("203.0.113.9"), Server{}},
		{"host rule", "www.slow.example", addr("192.0.2.1"), Server{Delay: time.Second, Connections: 1}},
		{"host exempt", "big.example", addr("192.0.2.1"), Server{}},
		{"range over host", "www.slow.example", addr("198.51.100.9"), Server{Delay: 2 * time.Second, Connections: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.ServerFor(tt.host, tt.a); got != tt.want {
				t.Errorf("ServerFor(%s, %s) = %+v, want %+v", tt.host, tt.a, got, tt.want)
			}
		})
	}
	// A host's own delay caps ServerDelay (not a rule's serverDelay): a
	// host alone on its address is never slowed by its gate.
	fast := p
	fast.FetchDelay = 100 * time.Millisecond
	if got := fast.ServerFor("a.example", addr("192.0.2.1")); got != (Server{Delay: 100 * time.Millisecond, Connections: 1}) {
		t.Errorf("FetchDelay 100ms: ServerFor = %+v, want the delay capped at 100ms", got)
	}
	if got := fast.ServerFor("a.example", addr("198.51.100.9")); got.Delay != 2*time.Second {
		t.Errorf("FetchDelay 100ms: a range rule's serverDelay became %v, want its 2s", got.Delay)
	}
	fast.FetchDelay = 0
	if got := fast.ServerFor("a.example", addr("192.0.2.1")); got != (Server{Connections: 1}) || got.Off() {
		t.Errorf("FetchDelay 0: ServerFor = %+v, want no delay and still one connection", got)
	}
	p.ServerDelay = 0
	if got := p.ServerFor("a.example", addr("192.0.2.1")); !got.Off() {
		t.Errorf("ServerDelay 0: ServerFor = %+v, want the gate off", got)
	}
	if n := len(p.ExemptPrefixes()); n != len(cdnRanges) {
		t.Errorf("ExemptPrefixes() has %d ranges, want the %d CDN ones", n, len(cdnRanges))
	}
}

// A range rule matches addresses only: host matching, and every rule
// without server fields, behave as before.
func TestHostRulesRanges(t *testing.T) {
	rules, err := ParseHostRules(`[{"match": "192.0.2.9/24", "serverDelay": 1}, {"match": "example.com", "delay": "5s"}]`)
	if err != nil {
		t.Fatal(err)
	}
	if got := rules.String(); got != `[{"match":"192.0.2.0/24","serverDelay":"1s"},{"match":"example.com","delay":"5s"}]` {
		t.Errorf("String() = %s", got)
	}
	if r, ok := rules.Match("192.0.2.1"); ok {
		t.Errorf("Match(192.0.2.1) = %+v: a range must not match a host name", r)
	}
	if r, ok := rules.Match("www.example.com"); !ok || r.Delay != 5*time.Second {
		t.Errorf("Match(www.example.com) = %+v, %v", r, ok)
	}
	if _, ok := rules.MatchAddr(netip.MustParseAddr("192.0.2.200")); !ok {
		t.Error("MatchAddr(192.0.2.200) found no rule")
	}
	for _, bad := range []string{
		`[{"match": "192.0.2.0/24", "delay": "1s"}]`,
		`[{"match": "192.0.2.0/99", "serverDelay": "1s"}]`,
		`[{"match": "a.example", "serverConnections": 0}]`,
		`[{"match": "a.example", "serverExempt": "yes"}]`,
		`[{"match": "a.example", "serverDelay": "2m"}]`,
	} {
		if _, err := ParseHostRules(bad); err == nil {
			t.Errorf("ParseHostRules(%s) took it", bad)
		}
	}
}
