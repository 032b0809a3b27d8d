package fetch_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestResolveTable: with Options.Resolve, names come from the table and
// never from DNS (no query leaves the machine: every name here is either in
// the table or must fail without one).
func TestResolveTable(t *testing.T) {
	var hits, conns atomic.Int32
	var lastHost atomic.Value
	srv := startServer(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		lastHost.Store(r.Host)
		io.WriteString(w, "served")
	}), func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	})
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	site := netip.MustParseAddr("127.0.0.2")
	// Nothing listens on 127.0.0.3 at the server's port: a dead address.
	dead := netip.MustParseAddr("127.0.0.3")

	tests := []struct {
		name    string
		table   map[string][]netip.Addr
		guard   bool // address guard on (AllowPrivate false, the port allowed)
		host    string
		want    fetch.Kind // KindOther: a response
		msg     string
		reaches bool // the server sees the request
	}{
		{name: "name in the table", table: map[string][]netip.Addr{"www.site.test": {site}}, host: "www.site.test", reaches: true},
		{name: "case and trailing dot ignored", table: map[string][]netip.Addr{"WWW.Site.test.": {site}}, host: "www.SITE.test.", reaches: true},
		{name: "next address after a refused one", table: map[string][]netip.Addr{"two.site.test": {dead, site}}, host: "two.site.test", reaches: true},
		{name: "IP literal bypasses the table", table: map[string][]netip.Addr{"other.test": {dead}}, host: "127.0.0.2", reaches: true},
		{name: "name missing is no such host", table: map[string][]netip.Addr{"www.site.test": {site}}, host: "nxdomain.site.test",
			want: fetch.KindDNS, msg: "dial tcp: lookup nxdomain.site.test: no such host"},
		{name: "empty table knows no name", table: map[string][]netip.Addr{}, host: "www.site.test",
			want: fetch.KindDNS, msg: "lookup www.site.test: no such host"},
		{name: "every address refused", table: map[string][]netip.Addr{"dead.site.test": {dead}}, host: "dead.site.test",
			want: fetch.KindConnection, msg: "127.0.0.3:" + portStr + ": connect: connection refused"},
		{name: "guard judges the table's address", table: map[string][]netip.Addr{"www.site.test": {site}}, guard: true, host: "www.site.test",
			want: fetch.KindDenied, msg: "address 127.0.0.2 is loopback: not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			conns.Store(0)
			opts := localOptions()
			opts.Resolve = tc.table
			if tc.guard {
				opts.AllowPrivate = false
				opts.AllowedPorts = []int{port}
			}
			f := fetch.New(opts, fixedNow)
			defer f.CloseIdleConnections()
			u := "http://" + net.JoinHostPort(tc.host, portStr) + "/page"
			resp, err := f.Fetch(context.Background(), fetch.Request{URL: u})
			if tc.want == fetch.KindOther {
				if err != nil {
					t.Fatalf("Fetch %s: %v", u, err)
				}
				want(t, "body", string(resp.Body), "served")
				if h, _ := lastHost.Load().(string); h != net.JoinHostPort(tc.host, portStr) {
					t.Errorf("server saw Host %q, want the URL's name", h)
				}
			} else {
				if err == nil {
					t.Fatalf("Fetch %s answered %d, want a %s error", u, resp.HTTPStatus, tc.want)
				}
				want(t, "kind", fetch.KindOf(err), tc.want)
				if !strings.Contains(err.Error(), tc.msg) {
					t.Errorf("error %q does not contain %q", err, tc.msg)
				}
			}
			want(t, "requests seen", hits.Load() == 1, tc.reaches)
			if !tc.reaches {
				want(t, "connections seen", conns.Load(), int32(0))
			}
		})
	}
}

// TestResolveMissingNameIsNXDOMAIN: a name missing from the table is, for
// every reader of the error, the NXDOMAIN Go's resolver reports: same
// kind, permanent, a *net.DNSError saying not found, the same text.
func TestResolveMissingNameIsNXDOMAIN(t *testing.T) {
	opts := localOptions()
	opts.Resolve = map[string][]netip.Addr{}
	_, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: "http://gone.example.test/a"})
	// What net.Dialer returns for an NXDOMAIN answer (minus the server
	// address, which a table has not got).
	real := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "gone.example.test", IsNotFound: true}}
	want(t, "kind", fetch.KindOf(err), fetch.KindOf(real))
	want(t, "kind", fetch.KindOf(err), fetch.KindDNS)
	want(t, "transient", fetch.IsTransient(err), fetch.IsTransient(real))
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound || de.IsTemporary || de.IsTimeout {
		t.Fatalf("error %v carries DNS error %+v, want one that is not found and not temporary", err, de)
	}
	if !strings.HasSuffix(err.Error(), real.Error()) {
		t.Errorf("error %q does not end as the resolver's %q", err, real.Error())
	}
}

// TestResolveTableIsCopied: the fetcher keeps its own copy of the table, so
// the caller cannot redirect it afterwards.
func TestResolveTableIsCopied(t *testing.T) {
	var hits atomic.Int32
	srv := startServer(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }), nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	table := map[string][]netip.Addr{"www.site.test": {netip.MustParseAddr("127.0.0.2")}}
	opts := localOptions()
	opts.Resolve = table
	f := fetch.New(opts, fixedNow)
	defer f.CloseIdleConnections()
	table["www.site.test"][0] = netip.MustParseAddr("127.0.0.3")
	delete(table, "www.site.test")
	if _, err := f.Fetch(context.Background(), fetch.Request{URL: "http://www.site.test:" + port + "/"}); err != nil {
		t.Fatalf("Fetch after the caller changed its table: %v", err)
	}
	want(t, "requests seen", hits.Load(), int32(1))
}

// TestRequestBodyCap: a request's own MaxBodyBytes replaces the fetcher's
// (robots.txt is read further than pages).
func TestRequestBodyCap(t *testing.T) {
	body := strings.Repeat("x", 5000)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }))
	opts := localOptions()
	opts.MaxBodyBytes = 1000
	f := fetch.New(opts, fixedNow)
	tests := []struct {
		name      string
		cap       int64
		wantLen   int
		truncated bool
	}{
		{"fetcher's cap", 0, 1000, true},
		{"larger request cap", 4000, 4000, true},
		{"request cap above the body", 10000, 5000, false},
		{"smaller request cap", 10, 10, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := f.Fetch(context.Background(), fetch.Request{URL: srv.URL + "/robots.txt", MaxBodyBytes: tc.cap})
			if err != nil {
				t.Fatal(err)
			}
			want(t, "len", len(resp.Body), tc.wantLen)
			want(t, "truncated", resp.Truncated, tc.truncated)
		})
	}
}
