package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
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

// TestDNSServerLocalMode: local mode with --dns-server resolves its hosts'
// names through that server (on loopback here), one lookup a name however
// many URLs it has, and the address guard still judges the answers: the
// loopback address the server gives needs --allow-private.
func TestDNSServerLocalMode(t *testing.T) {
	site, err := demosite.StartVHosts(demosite.VHostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	dns, err := demosite.StartDNS(site.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	dir := t.TempDir()
	var urls []string
	for h := range 3 {
		for p := range 3 {
			urls = append(urls, site.URL(demosite.VHostName(h), p))
		}
	}
	in := filepath.Join(dir, "urls.txt")
	if err := os.WriteFile(in, []byte(strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, extra ...string) (int, []result.Result, string) {
		out := filepath.Join(dir, name+".jsonl")
		args := append([]string{"--urls", in, "--out", out, "--state", filepath.Join(dir, name+".db"), "--dns-server", dns.Addr(), "--param", "FetchDelay=20ms"}, extra...)
		code, _, stderr := runCmd(t, args...)
		b, _ := os.ReadFile(out)
		var rs []result.Result
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r result.Result
			if line != "" && json.Unmarshal([]byte(line), &r) == nil {
				rs = append(rs, r)
			}
		}
		return code, rs, stderr
	}
	code, rs, stderr := run("allowed", "--allow-private")
	if code != 0 || len(rs) != len(urls) {
		t.Fatalf("exit %d, %d results for %d urls; stderr:\n%s", code, len(rs), len(urls), stderr)
	}
	for _, r := range rs {
		if r.Status != result.StatusFetched {
			t.Errorf("%s: %s (%s), want fetched", r.URL, r.Status, r.Error)
		}
	}
	// One lookup (A and AAAA) a name: the robots.txt and the pages share it.
	if dns.Names() != 3 || dns.Queries() > 6 {
		t.Errorf("the server was asked %d names in %d messages, want 3 names, at most 6 messages", dns.Names(), dns.Queries())
	}
	code, rs, stderr = run("guarded")
	if code != 1 || len(rs) != len(urls) {
		t.Fatalf("without --allow-private: exit %d, %d results; stderr:\n%s", code, len(rs), stderr)
	}
	for _, r := range rs {
		if r.Status != result.StatusDenied {
			t.Errorf("without --allow-private %s ended %s, want denied (its name resolves to loopback)", r.URL, r.Status)
		}
	}
	if code, _, stderr := runCmd(t, "--backend", "moto", "--dns-server", "127.0.0.1"); code != 2 || !strings.Contains(stderr, "make emulated") {
		t.Errorf("--backend moto: exit %d, %q; want 2 naming make emulated", code, stderr)
	}
}
