package main

import (
	"slices"
	"testing"
)

func TestDNSServerFlag(t *testing.T) {
	var f dnsServersFlag
	for _, v := range []string{"127.0.0.1:5353", "10.0.0.2, [::1]:53", "::1"} {
		if err := f.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if want := []string{"127.0.0.1:5353", "10.0.0.2:53", "[::1]:53", "[::1]:53"}; !slices.Equal(f, want) {
		t.Errorf("servers %q, want %q", f, want)
	}
	for _, bad := range []string{"", "ns.example:53", "127.0.0.1:0", "127.0.0.1:99999", "127.0.0.1,"} {
		var g dnsServersFlag
		if err := g.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted %q, want an error", bad, g)
		}
	}
}
