package fetch

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lateNetwork dials loopback for real, but while late is set a
// connection's failed read waits for thaw before returning: the
// transport's read loop then learns of a close only later, as when it is
// not scheduled at once.
type lateNetwork struct {
	late atomic.Bool
	thaw chan struct{}
}

func (n *lateNetwork) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &lateConn{Conn: c, net: n}, nil
}

type lateConn struct {
	net.Conn
	net *lateNetwork
}

func (c *lateConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.net.late.Load() {
		<-c.net.thaw
	}
	return n, err
}

// TestStaleConnSentAgain: a request handed a connection CloseHost closed
// before the transport's pool noticed is sent once more on a new
// connection: it succeeds, and the host sees it once. Only the Transport's
// pool (HTTPS, WARC capture) can hand a stale connection out, so the
// request goes through it; the plain path takes idle connections from the
// tracker itself, where a closed one is gone.
func TestStaleConnSentAgain(t *testing.T) {
	var served, opened atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	n := &lateNetwork{thaw: make(chan struct{})}
	var once sync.Once
	thaw := func() { once.Do(func() { close(n.thaw) }) }
	defer thaw()
	f := New(Options{AllowPrivate: true, Timeout: 5 * time.Second, Network: n, viaTransport: true}, nil)
	defer f.CloseIdleConnections()
	get := func() {
		t.Helper()
		resp, err := f.Fetch(context.Background(), Request{URL: srv.URL + "/"})
		if err != nil || string(resp.Body) != "ok" {
			t.Fatalf("Fetch: %v, %v", resp, err)
		}
	}
	get()
	n.late.Store(true)
	f.CloseHost("127.0.0.1")
	get()
	thaw()
	if got := f.Stats().StaleRetries; got != 1 {
		t.Errorf("stale retries %d, want 1 (the request was handed the closed connection)", got)
	}
	if served.Load() != 2 || opened.Load() != 2 {
		t.Errorf("server served %d requests on %d connections, want 2 on 2", served.Load(), opened.Load())
	}
}

// TestTLSResumption: a connection opened again to a host, after CloseHost,
// resumes its TLS session instead of a full handshake (HTTP/1.1 and
// HTTP/2), as the server sees it and the fetcher counts it.
func TestTLSResumption(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("HTTP/2 %v", h2), func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "HTTP/%d resumed=%v", r.ProtoMajor, r.TLS.DidResume)
			}))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			f := New(Options{AllowPrivate: true, Timeout: 5 * time.Second}, nil)
			defer f.CloseIdleConnections()
			f.transport.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
			proto := 1
			if h2 {
				proto = 2
			}
			var got []string
			for range 2 {
				resp, err := f.Fetch(context.Background(), Request{URL: srv.URL + "/"})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(resp.Body))
				f.CloseHost("127.0.0.1")
			}
			wantBodies := fmt.Sprintf("[HTTP/%d resumed=false HTTP/%d resumed=true]", proto, proto)
			if fmt.Sprint(got) != wantBodies {
				t.Errorf("server saw %v, want %s", got, wantBodies)
			}
			st := f.Stats()
			if st.TLSFull != 1 || st.TLSResumed != 1 || st.Dials != 2 {
				t.Errorf("stats %+v, want 1 full handshake, 1 resumed, 2 dials", st)
			}
		})
	}
}

// TestHostKey: CloseHost names a host as a URL's Hostname does; the
// transport dials its IDNA ASCII form.
func TestHostKey(t *testing.T) {
	for in, out := range map[string]string{
		"WWW.Site.Test.": "www.site.test",
		"bücher.test":    "xn--bcher-kva.test",
		"[::1]":          "::1",
		"::1":            "::1",
		"127.0.0.1":      "127.0.0.1",
	} {
		if got := hostKey(in); got != out {
			t.Errorf("hostKey(%q) = %q, want %q", in, got, out)
		}
	}
}

// TestFailedRequestForgetsItsConn: a request whose connection the
// transport closed (here: no answer in time) leaves nothing behind among
// the idle or the tracked.
func TestFailedRequestForgetsItsConn(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(srv.Close)
	defer close(release)
	f := New(Options{AllowPrivate: true, Timeout: 200 * time.Millisecond}, nil)
	if _, err := f.Fetch(context.Background(), Request{URL: srv.URL + "/"}); KindOf(err) != KindTimeout {
		t.Fatalf("Fetch: %v, want a timeout", err)
	}
	f.conns.mu.Lock()
	idle, hosts := f.conns.idle.Len(), len(f.conns.byHost)
	f.conns.mu.Unlock()
	if idle != 0 || hosts != 0 || f.OpenConns() != 0 {
		t.Errorf("after a failed request: %d idle, %d hosts tracked, %d open; want none", idle, hosts, f.OpenConns())
	}
}
