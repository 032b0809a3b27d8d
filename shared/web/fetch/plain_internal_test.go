package fetch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer is a loopback TCP server whose answers the test writes byte
// for byte: each connection is handed to serve, which reads requests from
// br and writes to conn until it returns (the connection is then closed).
type rawServer struct {
	ln     net.Listener
	conns  atomic.Int32
	closed chan struct{} // a value each time a connection is closed
	wg     sync.WaitGroup
}

func newRawServer(t *testing.T, serve func(conn net.Conn, br *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, closed: make(chan struct{}, 100)}
	s.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			s.wg.Go(func() {
				serve(conn, bufio.NewReader(conn))
				conn.Close()
				s.closed <- struct{}{}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) url(path string) string { return "http://" + s.ln.Addr().String() + path }

// readHead reads one request's head (through the blank line).
func readHead(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		head.WriteString(line)
		if err != nil {
			return head.String(), err
		}
		if line == "\r\n" {
			return head.String(), nil
		}
	}
}

// answering serves every request on a connection with answer, until the
// client closes it or after max requests (0: no limit).
func answering(answer string, max int) func(net.Conn, *bufio.Reader) {
	return func(conn net.Conn, br *bufio.Reader) {
		for n := 0; max == 0 || n < max; n++ {
			if _, err := readHead(br); err != nil {
				return
			}
			if _, err := io.WriteString(conn, answer); err != nil {
				return
			}
		}
	}
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"

func plainFetcher(t *testing.T, opts Options) *Fetcher {
	t.Helper()
	opts.AllowPrivate = true
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	f := New(opts, nil)
	t.Cleanup(f.CloseIdleConnections)
	return f
}

func mustFetch(t *testing.T, f *Fetcher, u string) *Response {
	t.Helper()
	resp, err := f.Fetch(context.Background(), Request{URL: u})
	if err != nil {
		t.Fatalf("Fetch %s: %v", u, err)
	}
	return resp
}

// TestPlainKeepsOneConnection: a host's requests over plain HTTP share one
// connection, kept idle between them, with no goroutine of its own (the
// Transport's read and write loops are what the plain path does away with).
func TestPlainKeepsOneConnection(t *testing.T) {
	srv := newRawServer(t, answering(okAnswer, 0))
	// Counted before and after: connections other tests' Transports
	// still keep (not parallel with this one) are not this fetcher's.
	loopsBefore := transportLoops()
	f := plainFetcher(t, Options{})
	for range 3 {
		if resp := mustFetch(t, f, srv.url("/")); string(resp.Body) != "ok" || resp.HTTPStatus != 200 {
			t.Fatalf("got %d %q, want 200 ok", resp.HTTPStatus, resp.Body)
		}
	}
	if got := srv.conns.Load(); got != 1 {
		t.Errorf("server saw %d connections for 3 requests, want 1", got)
	}
	if s := f.Stats(); s.Dials != 1 || s.OpenConns != 1 {
		t.Errorf("stats %+v, want 1 dial and 1 connection open (idle)", s)
	}
	if after := transportLoops(); after > loopsBefore {
		t.Errorf("%d Transport connection goroutines run after plain requests, %d before", after, loopsBefore)
	}
}

// transportLoops counts the goroutines of net/http Transport connections
// (a read loop each).
func transportLoops() int {
	var stacks strings.Builder
	pprof.Lookup("goroutine").WriteTo(&stacks, 2)
	return strings.Count(stacks.String(), "net/http.(*persistConn).readLoop(")
}

// TestPlainSameBytesAsTransport: the plain path writes the request the
// Transport writes, byte for byte, validators included.
func TestPlainSameBytesAsTransport(t *testing.T) {
	heads := make(chan string, 4)
	srv := newRawServer(t, func(conn net.Conn, br *bufio.Reader) {
		for {
			head, err := readHead(br)
			if err != nil {
				return
			}
			heads <- head
			io.WriteString(conn, okAnswer)
		}
	})
	req := Request{URL: srv.url("/a/b?c=d#frag"), ETag: `"v1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"}
	var got [2]string
	for i, via := range []bool{false, true} {
		f := plainFetcher(t, Options{viaTransport: via})
		if _, err := f.Fetch(context.Background(), req); err != nil {
			t.Fatalf("Fetch (via Transport %v): %v", via, err)
		}
		got[i] = <-heads
	}
	if got[0] != got[1] {
		t.Errorf("plain path wrote\n%q\nTransport wrote\n%q", got[0], got[1])
	}
	if !strings.HasPrefix(got[0], "GET /a/b?c=d HTTP/1.1\r\n") || !strings.Contains(got[0], "If-None-Match: \"v1\"\r\n") {
		t.Errorf("request head %q: want GET /a/b?c=d with If-None-Match", got[0])
	}
}

// TestPlainHostClosedWhileIdle: a connection the host closed while it
// idled is not used: the next request goes on a new one and succeeds, as
// through the Transport, whose read loop notices such a close.
func TestPlainHostClosedWhileIdle(t *testing.T) {
	srv := newRawServer(t, answering(okAnswer, 1)) // one answer, then close
	f := plainFetcher(t, Options{})
	mustFetch(t, f, srv.url("/"))
	<-srv.closed
	// The host's FIN is in flight on loopback for a moment after its
	// close: wait until the kept connection shows it (bounded).
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.conns.mu.Lock()
		var kept *trackedConn
		for c := range f.conns.byHost["127.0.0.1"] {
			kept = c
		}
		f.conns.mu.Unlock()
		if kept == nil {
			t.Fatal("no connection kept after the first request")
		}
		if !idleConnAlive(kept.Conn) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the host's close never showed on the kept connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resp := mustFetch(t, f, srv.url("/")); string(resp.Body) != "ok" {
		t.Errorf("second request got %q, want ok", resp.Body)
	}
	if got := srv.conns.Load(); got != 2 {
		t.Errorf("server saw %d connections, want 2 (the closed one not reused)", got)
	}
}

// TestPlainUnfitConnectionsClosed: a connection is kept only after an
// answer read to its end that did not say Connection: close; otherwise the
// next request opens another, and the one left is closed, not leaked.
func TestPlainUnfitConnectionsClosed(t *testing.T) {
	cases := []struct {
		name   string
		answer string
		max    int // answers a connection gets before the host closes it
		opts   Options
	}{
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 0, Options{}},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, Options{}},
		{"body cut at MaxBodyBytes", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", 0, Options{MaxBodyBytes: 4}},
		// The body ends where the host closes the connection.
		{"body without length", "HTTP/1.1 200 OK\r\n\r\nok", 1, Options{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRawServer(t, answering(tc.answer, tc.max))
			f := plainFetcher(t, tc.opts)
			for range 2 {
				mustFetch(t, f, srv.url("/"))
			}
			if got := srv.conns.Load(); got != 2 {
				t.Errorf("server saw %d connections for 2 requests, want 2", got)
			}
			if got := f.OpenConns(); got != 0 {
				t.Errorf("%d connections left open, want 0", got)
			}
		})
	}
}

// TestPlainAnswerShapes: informational answers before the real one are
// skipped; a chunked body is read whole and its connection kept; a header
// block past maxHeaderBytes fails the request (a protocol error) instead
// of filling memory.
func TestPlainAnswerShapes(t *testing.T) {
	t.Run("103 then 200", func(t *testing.T) {
		srv := newRawServer(t, answering("HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"+okAnswer, 0))
		f := plainFetcher(t, Options{})
		if resp := mustFetch(t, f, srv.url("/")); resp.HTTPStatus != 200 || string(resp.Body) != "ok" {
			t.Errorf("got %d %q, want 200 ok", resp.HTTPStatus, resp.Body)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		srv := newRawServer(t, answering("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", 0))
		f := plainFetcher(t, Options{})
		for range 2 {
			if resp := mustFetch(t, f, srv.url("/")); string(resp.Body) != "abcde" {
				t.Errorf("body %q, want abcde", resp.Body)
			}
		}
		if got := srv.conns.Load(); got != 1 {
			t.Errorf("server saw %d connections, want 1", got)
		}
	})
	t.Run("header too large", func(t *testing.T) {
		huge := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes+10) + "\r\nContent-Length: 2\r\n\r\nok"
		srv := newRawServer(t, answering(huge, 0))
		f := plainFetcher(t, Options{})
		_, err := f.Fetch(context.Background(), Request{URL: srv.url("/")})
		var fe *Error
		if !errors.As(err, &fe) || fe.Kind != KindProtocol || !strings.Contains(err.Error(), "exceeded") {
			t.Fatalf("err %v, want a protocol error saying the headers exceeded the limit", err)
		}
		if got := f.OpenConns(); got != 0 {
			t.Errorf("%d connections left open, want 0", got)
		}
	})
}

// TestPlainIdleTimeout: a connection idle past plainIdleTimeout is closed
// instead of handed to a request.
func TestPlainIdleTimeout(t *testing.T) {
	srv := newRawServer(t, answering(okAnswer, 0))
	f := plainFetcher(t, Options{})
	mustFetch(t, f, srv.url("/"))
	addr := srv.ln.Addr().String()
	if c := f.conns.takePlain("127.0.0.1", addr, time.Now().Add(plainIdleTimeout+time.Second)); c != nil {
		t.Fatal("a connection idle past the timeout was handed out")
	}
	if got := f.OpenConns(); got != 0 {
		t.Errorf("%d connections open, want 0 (the stale one closed)", got)
	}
	if c := f.conns.takePlain("127.0.0.1", "127.0.0.1:1", time.Now()); c != nil {
		t.Error("a connection to another port was handed out")
	}
}

// TestPlainCancelAndTimeout: a request cancelled or timed out mid-answer
// ends with the Transport's kinds of error, and its connection is closed.
func TestPlainCancelAndTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := newRawServer(t, func(conn net.Conn, br *bufio.Reader) {
		readHead(br)
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234")
		<-release
	})
	defer close(release)
	f := plainFetcher(t, Options{Timeout: 200 * time.Millisecond})
	_, err := f.Fetch(context.Background(), Request{URL: srv.url("/")})
	var fe *Error
	if !errors.As(err, &fe) || fe.Kind != KindTimeout || !strings.Contains(err.Error(), "no complete answer within") {
		t.Fatalf("err %v, want a timeout naming the bound", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f2 := plainFetcher(t, Options{})
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err = f2.Fetch(ctx, Request{URL: srv.url("/")})
	if !errors.As(err, &fe) || fe.Kind != KindCanceled {
		t.Fatalf("err %v, want KindCanceled", err)
	}
	if got := f.OpenConns() + f2.OpenConns(); got != 0 {
		t.Errorf("%d connections left open, want 0", got)
	}
}

// TestPlainHTTPSStaysOnTransport: HTTPS still goes through the Transport
// (HTTP/2, TLS resumption), and a plain and a TLS connection to one host
// are never mixed up.
func TestPlainHTTPSStaysOnTransport(t *testing.T) {
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Proto)
	}))
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plain := newRawServer(t, answering(okAnswer, 0))
	f := plainFetcher(t, Options{})
	f.transport.TLSClientConfig.RootCAs = tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	if resp := mustFetch(t, f, plain.url("/")); string(resp.Body) != "ok" {
		t.Fatalf("plain body %q", resp.Body)
	}
	for range 2 {
		if resp := mustFetch(t, f, tlsSrv.URL+"/"); string(resp.Body) != "HTTP/2.0" {
			t.Fatalf("TLS body %q, want HTTP/2.0", resp.Body)
		}
	}
	if resp := mustFetch(t, f, plain.url("/")); string(resp.Body) != "ok" {
		t.Fatalf("plain body %q", resp.Body)
	}
	if s := f.Stats(); s.Dials != 2 {
		t.Errorf("%d dials, want 2 (one plain, one TLS, each kept)", s.Dials)
	}
}
