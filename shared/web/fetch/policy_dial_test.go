package fetch_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestDialRefusedAfterResolve: a name that resolves to the metadata
// endpoint (the fixed table stands in for DNS, so no query leaves) is
// refused at dial time by the policy of --allow-private, before connect:
// no packet leaves either. A refused address is skipped, and the next one
// the name has is dialed if the policy allows it.
func TestDialRefusedAfterResolve(t *testing.T) {
	var hits atomic.Int32
	srv := startServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "loopback site")
	}), nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	meta := netip.MustParseAddr("169.254.169.254")
	opts := localOptions() // AllowPrivate: the private set, as --allow-private
	opts.Resolve = map[string][]netip.Addr{
		"metadata.test": {meta},
		"mapped.test":   {netip.MustParseAddr("::ffff:169.254.169.254")},
		"two.test":      {meta, netip.MustParseAddr("127.0.0.1")},
	}
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()

	for _, host := range []string{"metadata.test", "mapped.test"} {
		u := "http://" + host + ":" + port + "/latest/meta-data/"
		_, err := f.Fetch(context.Background(), fetch.Request{URL: u})
		want(t, host+" kind", fetch.KindOf(err), fetch.KindDenied)
		want(t, host+" transient", fetch.IsTransient(err), false)
		if err == nil || !strings.Contains(err.Error(), "169.254.169.254, which is link-local") && !strings.Contains(err.Error(), "address 169.254.169.254 is link-local") {
			t.Errorf("%s: error %v, want the metadata endpoint named", host, err)
		}
	}
	resp, err := f.Fetch(context.Background(), fetch.Request{URL: "http://two.test:" + port + "/"})
	if err != nil || string(resp.Body) != "loopback site" {
		t.Fatalf("two.test = %v, %v; want its loopback address after the refused one", resp, err)
	}
	want(t, "requests seen", hits.Load(), int32(1))
}

// netnsChild marks the re-executed test binary running inside its own
// network namespace.
const netnsChild = "URLDOWNLOADER_TEST_NETNS"

// TestNamedMetadataReachedInNetns dials 169.254.169.254 for real, so it
// runs only inside a network namespace of its own (unshare --net, as
// root of a new user namespace) where that address is on lo and there is
// no other interface: no packet can leave the machine. There, the policy
// of --allow-private and a broad --allow-net 169.254.0.0/16 are refused
// before connect (the server sees no connection), and naming
// 169.254.169.254/32 reaches it.
func TestNamedMetadataReachedInNetns(t *testing.T) {
	if os.Getenv(netnsChild) == "" {
		reexecInNetns(t, "^TestNamedMetadataReachedInNetns$")
		return
	}
	// Before touching lo: a namespace of its own has lo alone (this also
	// keeps a stray environment variable from changing the host's lo).
	ifs, err := net.Interfaces()
	if err != nil || len(ifs) != 1 || ifs[0].Flags&net.FlagLoopback == 0 {
		t.Fatalf("namespace interfaces %v (%v): want lo alone, or a packet could leave", ifs, err)
	}
	for _, args := range [][]string{{"link", "set", "lo", "up"}, {"addr", "add", "169.254.169.254/32", "dev", "lo"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}

	var conns atomic.Int32
	srv := startServer(t, "169.254.169.254", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "credentials")
	}), func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	})
	for _, tc := range []struct {
		name   string
		policy fetch.AddressPolicy
		want   string // "" reached
	}{
		{"--allow-private", fetch.PrivatePolicy(), "address 169.254.169.254 is link-local"},
		{"--allow-net 169.254.0.0/16", fetch.AddressPolicy{}.Open(netip.MustParsePrefix("169.254.0.0/16")), "address 169.254.169.254 is link-local"},
		{"--allow-net 169.254.169.254/32", fetch.AddressPolicy{}.Open(netip.MustParsePrefix("169.254.169.254/32")), ""},
	} {
		opts := localOptions()
		opts.AllowPrivate = false
		opts.Addresses = tc.policy
		f := fetch.New(opts, fixedNow)
		before := conns.Load()
		resp, err := f.Fetch(context.Background(), fetch.Request{URL: srv.URL + "/latest/meta-data/"})
		f.CloseIdleConnections()
		if tc.want == "" {
			if err != nil || string(resp.Body) != "credentials" {
				t.Errorf("%s: Fetch = %v, %v; want the endpoint reached", tc.name, resp, err)
			}
			continue
		}
		if fetch.KindOf(err) != fetch.KindDenied || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Fetch = %v, want a denial containing %q", tc.name, err, tc.want)
		}
		if n := conns.Load() - before; n != 0 {
			t.Errorf("%s: the server saw %d connections, want none (refused before connect)", tc.name, n)
		}
	}
}

// reexecInNetns runs the test named by run again in this test binary,
// inside a new network namespace, and fails with its output if it fails.
// Where namespaces are not permitted (no unshare, no ip, or user
// namespaces disabled) it skips, saying so.
func reexecInNetns(t *testing.T, run string) {
	t.Helper()
	if out, err := exec.Command("unshare", "--net", "--map-root-user", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Skipf("skipped: this test dials a non-loopback address and runs only in a network namespace of its own, "+
			"and `unshare --net --map-root-user ip link set lo up` is not permitted here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--net", "--map-root-user", exe, "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), netnsChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("in a network namespace: %v\n%s", err, out)
	}
}
