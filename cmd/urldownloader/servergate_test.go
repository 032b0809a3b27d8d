package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// recordingServer is one server address carrying many host names: it
// records when each request started and ended, as the server saw it.
type recordingServer struct {
	srv  *http.Server
	port int
	mu   sync.Mutex
	reqs []served
}

type served struct {
	host       string
	start, end time.Time
}

func startRecording(t *testing.T, ip string) *recordingServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Skipf("listen on %s: %v", ip, err)
	}
	s := &recordingServer{port: ln.Addr().(*net.TCPAddr).Port}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if r.URL.Path == "/robots.txt" {
			w.WriteHeader(http.StatusNotFound)
		} else {
			fmt.Fprintf(w, "page %s%s\n", r.Host, r.URL.Path)
		}
		s.mu.Lock()
		s.reqs = append(s.reqs, served{host: r.Host, start: start, end: time.Now()})
		s.mu.Unlock()
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// served returns the requests in start order.
func (s *recordingServer) served() []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.reqs)
	slices.SortFunc(out, func(a, b served) int { return a.start.Compare(b.start) })
	return out
}

// gateJob writes a list of pages per name on srv's port and runs the
// command on it through the DNS server dns, with extra flags; it returns
// the exit code, the results and stderr.
func gateJob(t *testing.T, dns *demosite.DNSServer, srv *recordingServer, names []string, pages int, extra ...string) (int, []result.Result, string) {
	t.Helper()
	dir := t.TempDir()
	var urls []string
	for p := range pages {
		for _, n := range names {
			urls = append(urls, fmt.Sprintf("http://%s:%d/p/%d", n, srv.port, p))
		}
	}
	in := filepath.Join(dir, "urls.txt")
	if err := os.WriteFile(in, []byte(strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.jsonl")
	args := append([]string{"--urls", in, "--out", out, "--state", filepath.Join(dir, "state.db"),
		"--dns-server", dns.Addr(), "--allow-private"}, extra...)
	code, _, stderr := runCmd(t, args...)
	b, _ := os.ReadFile(out)
	var rs []result.Result
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r result.Result
		if line != "" && json.Unmarshal([]byte(line), &r) == nil {
			rs = append(rs, r)
		}
	}
	if code != 0 || len(rs) != len(urls) {
		t.Fatalf("exit %d, %d results for %d urls; stderr:\n%s", code, len(rs), len(urls), stderr)
	}
	for _, r := range rs {
		if r.Status != result.StatusFetched {
			t.Errorf("%s: %s (%s), want fetched", r.URL, r.Status, r.Error)
		}
	}
	return code, rs, stderr
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d.gate.test", prefix, i)
	}
	return out
}

// TestServerGateLocalMode is issue 40's acceptance test in local mode: 40
// names that resolve to one loopback address, 5 pages each, ServerDelay
// 200ms and ServerConnections 1: the server never sees two requests
// starting closer than 200ms, nor two at once, and every URL is fetched.
// The progress line says what the job waits on.
func TestServerGateLocalMode(t *testing.T) {
	if testing.Short() {
		t.Skip("240 requests 200ms apart: at least 48s")
	}
	srv := startRecording(t, "127.0.0.2")
	dns, err := demosite.StartDNS(netip.MustParseAddr("127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	const delay = 200 * time.Millisecond
	_, _, stderr := gateJob(t, dns, srv, names("s", 40), 5,
		"--param", "ServerDelay=200ms", "--param", "ServerConnections=1")
	reqs := srv.served()
	if len(reqs) != 40*6 {
		t.Errorf("the server saw %d requests, want 240 (200 pages, 40 robots.txt)", len(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		prev, cur := reqs[i-1], reqs[i]
		if gap := cur.start.Sub(prev.start); gap < delay {
			t.Errorf("requests to %s and %s started %v apart, want at least %v", prev.host, cur.host, gap, delay)
		}
		if cur.start.Before(prev.end) {
			t.Errorf("requests to %s and %s were in flight together", prev.host, cur.host)
		}
	}
	if !strings.Contains(stderr, "hosts waiting on 127.0.0.2 (ServerDelay 200ms)") {
		t.Errorf("no progress line says the job waits on the server's gate; stderr:\n%s", stderr)
	}
	if !strings.Contains(stderr, "ServerWait") {
		t.Errorf("the metrics count no gate wait; stderr:\n%s", stderr)
	}
	if !strings.Contains(stderr, "hosts waiting on 127.0.0.2: 200 requests × 200ms ServerDelay") {
		t.Errorf("the summary's bound is not the server's; stderr:\n%s", stderr)
	}
}

// TestServerGateExempt: an exempted range (a CDN's, say) is paced per host
// only: no request waits at the gate, while the hosts keep FetchDelay.
func TestServerGateExempt(t *testing.T) {
	srv := startRecording(t, "127.0.0.3")
	dns, err := demosite.StartDNS(netip.MustParseAddr("127.0.0.3"))
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	const fetchDelay = 300 * time.Millisecond
	_, _, stderr := gateJob(t, dns, srv, names("e", 10), 3, "--param", "FetchDelay=300ms",
		"--param", "ServerDelay=1s", "--param", "ServerExempt=cdn,127.0.0.0/30")
	if strings.Contains(stderr, "ServerWait") {
		t.Errorf("requests to an exempted range waited at its gate; stderr:\n%s", stderr)
	}
	last := map[string]time.Time{}
	for _, r := range srv.served() {
		if prev, ok := last[r.host]; ok && r.start.Sub(prev) < fetchDelay {
			t.Errorf("%s: requests %v apart, want at least FetchDelay %v", r.host, r.start.Sub(prev), fetchDelay)
		}
		last[r.host] = r.end
	}
	// Without the exemption the same job meets the gate.
	srv2 := startRecording(t, "127.0.0.3")
	_, _, stderr = gateJob(t, dns, srv2, names("f", 10), 3, "--param", "FetchDelay=300ms",
		"--param", "ServerDelay=1s", "--param", "ServerExempt=none")
	if !strings.Contains(stderr, "ServerWait") {
		t.Errorf("requests to one address met no gate; stderr:\n%s", stderr)
	}
}

// TestServerGateStricterWins: a host rule giving a host four connections
// does not get past ServerConnections 1.
func TestServerGateStricterWins(t *testing.T) {
	srv := startRecording(t, "127.0.0.4")
	dns, err := demosite.StartDNS(netip.MustParseAddr("127.0.0.4"))
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Close()
	rules := `[{"match": "gate.test", "delay": "100ms", "connections": 4}]`
	gateJob(t, dns, srv, names("c", 1), 12, "--param", "HostRules="+rules,
		"--param", "ServerDelay=50ms", "--param", "ServerConnections=1")
	reqs := srv.served()
	for i := 1; i < len(reqs); i++ {
		if reqs[i].start.Before(reqs[i-1].end) {
			t.Errorf("requests %d and %d in flight together: the host's 4 connections got past ServerConnections 1", i-1, i)
		}
		if gap := reqs[i].start.Sub(reqs[i-1].start); gap < 50*time.Millisecond {
			t.Errorf("requests %d and %d started %v apart, want at least ServerDelay 50ms", i-1, i, gap)
		}
	}
}
