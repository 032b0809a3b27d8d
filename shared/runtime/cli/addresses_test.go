package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// parseAllowNet parses args as the runner's flag set reads --allow-net.
func parseAllowNet(args ...string) (NetworksFlag, error) {
	var nets NetworksFlag
	fs := flag.NewFlagSet("localrun", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(&nets, "allow-net", "")
	err := fs.Parse(args)
	return nets, err
}

// TestAllowNetFlag: --allow-net takes CIDRs comma-separated and repeated;
// a bad value fails the parse naming the flag, the value and what is
// wanted.
func TestAllowNetFlag(t *testing.T) {
	if flag.Lookup("allow-net") == nil || flag.Lookup("allow-private") == nil {
		t.Fatal("the runner does not register --allow-net and --allow-private")
	}
	nets, err := parseAllowNet("--allow-net", "127.0.0.0/8,::1/128", "--allow-net=169.254.169.254")
	if err != nil {
		t.Fatal(err)
	}
	if got := nets.String(); got != "127.0.0.0/8,::1/128,169.254.169.254/32" {
		t.Errorf("--allow-net read %s", got)
	}
	for _, tc := range []struct {
		value string
		want  []string
	}{
		{"10.0.0.0/33", []string{`invalid value "10.0.0.0/33" for flag -allow-net`, `"10.0.0.0/33" is not a network: want CIDR notation`}},
		{"127.0.0.0/8,intranet", []string{`invalid value "127.0.0.0/8,intranet" for flag -allow-net`, `"intranet" is not a network`}},
		{"10.1.2.3/8", []string{"-allow-net", "did you mean 10.0.0.0/8?"}},
		{",", []string{"-allow-net", `no network in ","`}},
	} {
		if _, err := parseAllowNet("--allow-net", tc.value); err == nil {
			t.Errorf("--allow-net %q accepted", tc.value)
		} else {
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("--allow-net %q: error %q does not say %q", tc.value, err, w)
				}
			}
		}
	}
}

// TestFlagsPolicy: what each flag opens, and that the denials name them.
func TestFlagsPolicy(t *testing.T) {
	meta, _ := parseAllowNet("--allow-net", "169.254.169.254/32")
	tests := []struct {
		name    string
		nets    NetworksFlag
		private bool
		demo    bool
		addr    string
		want    string // "" allowed
	}{
		{"nothing: loopback refused, naming both flags", nil, false, false, "127.0.0.1:8080", "(local mode: --allow-net 127.0.0.0/8 or --allow-private)"},
		{"nothing: public allowed", nil, false, false, "93.184.216.34:443", ""},
		{"--allow-private: loopback on any port", nil, true, false, "127.0.0.1:8080", ""},
		{"--allow-private: RFC 1918", nil, true, false, "192.168.1.10:80", ""},
		{"--allow-private: unique local", nil, true, false, "[fd12::1]:80", ""},
		{"--allow-private: CGNAT", nil, true, false, "100.64.1.1:80", ""},
		{"--allow-private: never link-local", nil, true, false, "169.254.1.1:80", "--allow-net 169.254.1.1/32, named exactly; --allow-private never opens it"},
		{"--allow-private: never the metadata endpoint", nil, true, false, "169.254.169.254:80", "--allow-private never opens it"},
		{"--allow-private: never AWS IPv6 metadata", nil, true, false, "[fd00:ec2::254]:80", "--allow-net fd00:ec2::254/128, named exactly"},
		{"--allow-private: never Alibaba metadata", nil, true, false, "100.100.100.200:80", "named exactly"},
		{"--allow-net metadata named exactly", meta, false, false, "169.254.169.254:80", ""},
		{"--allow-net metadata only", meta, false, false, "127.0.0.1:80", "is loopback"},
		{"demo: loopback", nil, false, true, "127.0.3.7:41234", ""},
		{"demo: not private networks", nil, false, true, "10.0.0.1:80", "--allow-net 10.0.0.0/8 or --allow-private"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := AddressPolicy(tc.nets, tc.private, tc.demo).Check(netip.MustParseAddrPort(tc.addr), nil)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s refused: %v", tc.addr, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s: %v, want a denial containing %q", tc.addr, err, tc.want)
			}
		})
	}
}

// TestDenialsSummary: the end of a run groups the URLs the address policy
// denied by the flag that would allow them; other denials are not its
// business, and a run with none prints nothing.
func TestDenialsSummary(t *testing.T) {
	var d AddressDenials
	var buf bytes.Buffer
	d.Print(&buf)
	if buf.Len() != 0 {
		t.Errorf("no denials printed %q", buf.String())
	}
	loop := "check address: address 127.0.0.1 is loopback: not allowed (local mode: --allow-net 127.0.0.0/8 or --allow-private)"
	d.Add(result.Result{URL: "http://127.0.0.1/a", Status: result.StatusDenied, Error: loop})
	d.Add(result.Result{URL: "http://127.0.0.1/b", Status: result.StatusDenied, Error: "get http://site.test/b: dial: dial tcp 127.0.0.1:80: " + loop})
	d.Add(result.Result{URL: "http://meta.test/", Status: result.StatusDenied,
		Error: "check address: address 169.254.169.254 is link-local (x): not allowed (local mode: --allow-net 169.254.169.254/32, named exactly; --allow-private never opens it)"})
	d.Add(result.Result{URL: "http://site.test/private", Status: result.StatusDenied, Error: "disallowed by robots.txt"})
	d.Add(result.Result{URL: "http://93.184.216.34:22/", Status: result.StatusDenied, Error: "check address: port 22 of 93.184.216.34 is not allowed (allowed ports: 80, 443)"})
	d.Add(result.Result{URL: "http://site.test/", Status: result.StatusFetched})
	d.Print(&buf)
	want := "urldownloader: 3 urls were denied by the address policy; to allow them, run again with:\n" +
		"urldownloader:   --allow-net 127.0.0.0/8 or --allow-private  (2 urls, e.g. http://127.0.0.1/a)\n" +
		"urldownloader:   --allow-net 169.254.169.254/32, named exactly; --allow-private never opens it  (1 url, e.g. http://meta.test/)\n" +
		"urldownloader:   and a new --state (their denied results are written; add --overwrite to replace --out, or give another --out)\n"
	if buf.String() != want {
		t.Errorf("summary\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestLocalModeDeniesNamingTheFlag runs local mode on a loopback site
// without and with --allow-net: without it, an IP-literal URL is denied at
// ingest and a name resolved to loopback (fixed table, no DNS) at dial,
// both naming the flag, and the summary says which flag would have
// allowed them; with --allow-net 127.0.0.0/8 both are fetched.
func TestLocalModeDeniesNamingTheFlag(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "page")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	literal := "http://127.0.0.1:" + port + "/literal"
	named := "http://site.test:" + port + "/named"
	loopbackNet, _ := parseAllowNet("--allow-net", "127.0.0.0/8")

	for _, tc := range []struct {
		name string
		nets NetworksFlag
		want result.Status
	}{
		{"no flag", nil, result.StatusDenied},
		{"--allow-net 127.0.0.0/8", loopbackNet, result.StatusFetched},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			denials := &AddressDenials{}
			rt, err := localmode.Open(context.Background(), localmode.Options{
				Out: &out, Addresses: AddressPolicy(tc.nets, false, false), ShardCount: 1,
				Resolve:  map[string][]netip.Addr{"site.test": {netip.MustParseAddr("127.0.0.1")}},
				Params:   map[string]string{"FetchDelay": "10ms"},
				OnResult: denials.Add,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			// Bounds a hang only: the run ends as soon as both URLs have results.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			in := &localmode.Input{Name: "test", R: strings.NewReader(literal + "\n" + named + "\n")}
			if _, err := rt.Run(ctx, localmode.RunOptions{Input: in}); err != nil {
				t.Fatal(err)
			}
			got := map[string]result.Result{}
			for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
				var r result.Result
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("result line %q: %v", line, err)
				}
				got[r.URL] = r
			}
			for _, u := range []string{literal, named} {
				r := got[u]
				if r.Status != tc.want {
					t.Errorf("%s: %s (%s), want %s", u, r.Status, r.Error, tc.want)
				}
				if tc.want == result.StatusDenied && !strings.HasSuffix(r.Error, "address 127.0.0.1 is loopback: not allowed (local mode: --allow-net 127.0.0.0/8 or --allow-private)") {
					t.Errorf("%s: error %q does not name the flag", u, r.Error)
				}
			}
			var summary bytes.Buffer
			denials.Print(&summary)
			if tc.want == result.StatusDenied && !strings.Contains(summary.String(), "urldownloader:   --allow-net 127.0.0.0/8 or --allow-private  (2 urls") {
				t.Errorf("summary %q does not name the flag for both urls", summary.String())
			}
			if tc.want != result.StatusDenied && summary.Len() != 0 {
				t.Errorf("summary %q, want nothing when nothing was denied", summary.String())
			}
		})
	}
}

// TestAllowNetPorts: --allow-net takes ports after a network; a network
// opened on some ports refuses the others, naming the flag with the port,
// where a network without ports is open on every port.
func TestAllowNetPorts(t *testing.T) {
	nets, err := parseAllowNet("--allow-net", "127.0.0.0/8:8080,10.0.0.0/8:8000-8099", "--allow-net=[::1]:9000,192.168.1.5:443,fd12::/16")
	if err != nil {
		t.Fatal(err)
	}
	if got := nets.String(); got != "127.0.0.0/8:8080,10.0.0.0/8:8000-8099,::1/128:9000,192.168.1.5/32:443,fd12::/16" {
		t.Errorf("--allow-net read %s", got)
	}
	for _, bad := range []string{"127.0.0.0/8:0", "127.0.0.0/8:65536", "127.0.0.0/8:9000-8000", "127.0.0.0/8:http", "[::1:80", "127.0.0.0/8:"} {
		if _, err := parseAllowNet("--allow-net", bad); err == nil || !strings.Contains(err.Error(), "-allow-net") {
			t.Errorf("--allow-net %q: %v, want a usage error naming the flag", bad, err)
		}
	}
	for _, tc := range []struct {
		addr, want string // want "" allowed
	}{
		{"127.0.0.1:8080", ""},
		{"127.0.0.1:5432", "(local mode: --allow-net 127.0.0.0/8:5432 or --allow-private)"},
		{"10.1.2.3:8000", ""},
		{"10.1.2.3:8099", ""},
		{"10.1.2.3:8100", "--allow-net 10.0.0.0/8:8100"},
		{"[::1]:9000", ""},
		{"[::1]:22", "--allow-net ::1/128:22"},
		{"192.168.1.5:443", ""},
		{"192.168.1.5:80", "is private"},
		{"[fd12::5]:6379", ""},
	} {
		err := AddressPolicy(nets, false, false).Check(netip.MustParseAddrPort(tc.addr), nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s refused: %v", tc.addr, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a denial containing %q", tc.addr, err, tc.want)
		}
	}
}

// TestAllowNetPortsStopARedirect runs local mode on a loopback site opened
// with --allow-net on its own port only: a redirect from it to another
// port of loopback (where a raw socket stands for a database or an admin
// console) is denied at dial, and nothing connects there. Opened without
// ports, the same redirect reaches the other port.
func TestAllowNetPortsStopARedirect(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	reached := make(chan struct{}, 10)
	go func() {
		for {
			c, err := inner.Accept()
			if err != nil {
				return
			}
			reached <- struct{}{}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecret")
			c.Close()
		}
	}()
	_, innerPort, _ := net.SplitHostPort(inner.Addr().String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, "http://127.0.0.1:"+innerPort+"/admin", http.StatusFound)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	start := "http://127.0.0.1:" + port + "/start"
	for _, tc := range []struct {
		allow string
		want  result.Status
	}{
		{"127.0.0.0/8:" + port, result.StatusDenied},
		{"127.0.0.0/8", result.StatusFetched},
	} {
		t.Run(tc.allow, func(t *testing.T) {
			for len(reached) > 0 {
				<-reached
			}
			nets, err := parseAllowNet("--allow-net", tc.allow)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			rt, err := localmode.Open(context.Background(), localmode.Options{
				Out: &out, Addresses: AddressPolicy(nets, false, false), ShardCount: 1,
				Params: map[string]string{"FetchDelay": "10ms"},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			// Bounds a hang only: the run ends as soon as the URL has its result.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			in := &localmode.Input{Name: "test", R: strings.NewReader(start + "\n")}
			if _, err := rt.Run(ctx, localmode.RunOptions{Input: in}); err != nil {
				t.Fatal(err)
			}
			// The redirect ends the first URL; its target, on another
			// host:port, is queued and ends in a result of its own.
			admin := "http://127.0.0.1:" + innerPort + "/admin"
			var r result.Result
			for line := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
				var one result.Result
				if err := json.Unmarshal([]byte(line), &one); err != nil {
					t.Fatalf("result line %q: %v", line, err)
				}
				if one.URL == admin {
					r = one
				}
			}
			if r.Status != tc.want {
				t.Errorf("%s: %s (%s), want %s", r.URL, r.Status, r.Error, tc.want)
			}
			if tc.want == result.StatusDenied {
				if len(reached) != 0 {
					t.Errorf("the other port was connected to %d times, want never", len(reached))
				}
				if !strings.Contains(r.Error, "--allow-net 127.0.0.0/8:"+innerPort) {
					t.Errorf("error %q does not name --allow-net with the port", r.Error)
				}
			}
		})
	}
}
