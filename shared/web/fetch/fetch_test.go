package fetch_test

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/net/http/httpproxy"

	"github.com/urldownloader/urldownloader/shared/web/coding"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// clock is the injected "now": Retry-After dates are measured against it,
// not against the machine's time.
var clock = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedNow() time.Time { return clock }

// localOptions lets the fetcher reach httptest servers on loopback; the guard
// itself is tested with AllowPrivate false in TestGuard and TestCheckAddress.
func localOptions() fetch.Options {
	return fetch.Options{UserAgent: "urldownloader/test", Timeout: 5 * time.Second, MaxBodyBytes: 1 << 20, AllowPrivate: true}
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	return startServer(t, "127.0.0.1", h, nil)
}

// startServer starts a server on a loopback address: 127.0.0.2 is a
// different host from 127.0.0.1 as far as URLs are concerned. connState, if
// set, is installed before the server starts (setting it later would race).
func startServer(t *testing.T, ip string, h http.Handler, connState func(net.Conn, http.ConnState)) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ConnState = connState
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func brotlied(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := brotli.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstded(t *testing.T, b []byte) []byte {
	t.Helper()
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.EncodeAll(b, nil)
}

func zlibbed(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func rawDeflated(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func encoded(encoding string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", encoding)
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	}
}

// wait blocks for d or until the client has gone away, so a slow handler
// does not hold up srv.Close after the client timed out.
func wait(r *http.Request, d time.Duration) {
	select {
	case <-time.After(d):
	case <-r.Context().Done():
	}
}

func TestFetchResponses(t *testing.T) {
	text := "hello, polite world\n"
	binary := make([]byte, 512)
	for i := range binary {
		binary[i] = byte(i)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 8<<10) // 128 KiB
	var followed atomic.Int32

	tests := []struct {
		name    string
		handler http.HandlerFunc
		path    string
		request func(base string) fetch.Request
		opts    func(*fetch.Options)
		check   func(t *testing.T, base string, r *fetch.Response)
	}{
		{
			name: "200 text body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.Header().Set("ETag", `"v1"`)
				w.Header().Set("Last-Modified", "Sat, 01 Mar 2025 10:00:00 GMT")
				io.WriteString(w, text)
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 200)
				want(t, "body", string(r.Body), text)
				want(t, "content type", r.ContentType, "text/plain; charset=utf-8")
				want(t, "truncated", r.Truncated, false)
				want(t, "etag", r.ETag, `"v1"`)
				want(t, "last modified", r.LastModified, "Sat, 01 Mar 2025 10:00:00 GMT")
				want(t, "retry-after set", r.RetryAfterSet, false)
			},
		},
		{
			name: "binary body kept byte for byte",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(binary)
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				if !bytes.Equal(r.Body, binary) {
					t.Errorf("body differs: got %d bytes", len(r.Body))
				}
			},
		},
		{
			name:    "body over the cap is truncated",
			handler: func(w http.ResponseWriter, r *http.Request) { w.Write(big) },
			opts:    func(o *fetch.Options) { o.MaxBodyBytes = 1000 },
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "len", len(r.Body), 1000)
				want(t, "truncated", r.Truncated, true)
				if !bytes.Equal(r.Body, big[:1000]) {
					t.Error("truncated body is not the start of the real body")
				}
			},
		},
		{
			name:    "body exactly at the cap is not truncated",
			handler: func(w http.ResponseWriter, r *http.Request) { w.Write(big[:1000]) },
			opts:    func(o *fetch.Options) { o.MaxBodyBytes = 1000 },
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "len", len(r.Body), 1000)
				want(t, "truncated", r.Truncated, false)
			},
		},
		{
			name: "500 is a response with Retry-After in seconds",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "120")
				http.Error(w, "boom", http.StatusInternalServerError)
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 500)
				want(t, "retry-after", r.RetryAfter, 120*time.Second)
				want(t, "retry-after set", r.RetryAfterSet, true)
				want(t, "body", string(r.Body), "boom\n")
			},
		},
		{
			name:    "404 is a response without Retry-After",
			handler: http.NotFound,
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 404)
				want(t, "retry-after set", r.RetryAfterSet, false)
			},
		},
		{
			name: "429 with Retry-After as an HTTP-date relative to the injected clock",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", clock.Add(90*time.Second).Format(http.TimeFormat))
				w.WriteHeader(http.StatusTooManyRequests)
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 429)
				want(t, "retry-after", r.RetryAfter, 90*time.Second)
				want(t, "retry-after set", r.RetryAfterSet, true)
			},
		},
		{
			name: "503 with Retry-After date in the past means now",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", clock.Add(-time.Hour).Format(http.TimeFormat))
				w.WriteHeader(http.StatusServiceUnavailable)
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "retry-after", r.RetryAfter, time.Duration(0))
				want(t, "retry-after set", r.RetryAfterSet, true)
			},
		},
		{
			name: "429 with an invalid Retry-After ignores it",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "soon, maybe")
				w.WriteHeader(http.StatusTooManyRequests)
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 429)
				want(t, "retry-after set", r.RetryAfterSet, false)
				want(t, "retry-after", r.RetryAfter, time.Duration(0))
			},
		},
		{
			name: "302 is not followed and a relative Location is made absolute",
			path: "/dir/page?q=1",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/dir/next" {
					followed.Add(1)
					return
				}
				w.Header().Set("Location", "next?x=2")
				w.WriteHeader(http.StatusFound)
			},
			check: func(t *testing.T, base string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 302)
				want(t, "location", r.Location, base+"/dir/next?x=2")
				want(t, "requests to the target", followed.Load(), int32(0))
			},
		},
		{
			name: "301 to another host keeps the absolute Location",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "https://127.0.0.2:8443/moved#frag", http.StatusMovedPermanently)
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 301)
				want(t, "location", r.Location, "https://127.0.0.2:8443/moved#frag")
			},
		},
		{
			name: "gzip body is decoded and compression was asked for",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Accept-Encoding") != coding.Accept {
					http.Error(w, "Accept-Encoding "+r.Header.Get("Accept-Encoding"), 400)
					return
				}
				encoded("gzip", gzipped(t, []byte(text)))(w, r)
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 200)
				want(t, "body", string(r.Body), text)
			},
		},
		{
			name:    "deflate body in a zlib wrapper is decoded",
			handler: encoded("deflate", zlibbed(t, []byte(text))),
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "body", string(r.Body), text)
			},
		},
		{
			name:    "raw deflate body is decoded",
			handler: encoded("deflate", rawDeflated(t, []byte(text))),
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "body", string(r.Body), text)
			},
		},
		{
			name:    "brotli body is decoded",
			handler: encoded("br", brotlied(t, []byte(text))),
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "body", string(r.Body), text)
				want(t, "encoding left on", r.Encoding, "")
			},
		},
		{
			name:    "zstd body is decoded",
			handler: encoded("zstd", zstded(t, []byte(text))),
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "body", string(r.Body), text)
				want(t, "encoding left on", r.Encoding, "")
			},
		},
		{
			name:    "codings applied one after another are undone last first",
			handler: encoded("gzip, br", brotlied(t, gzipped(t, []byte(text)))),
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "body", string(r.Body), text)
			},
		},
		{
			name:    "a coding it does not undo is passed on as sent, and named",
			handler: encoded("x-squash", []byte("\x00squashed\xff")),
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "body", string(r.Body), "\x00squashed\xff")
				want(t, "encoding left on", r.Encoding, "x-squash")
			},
		},
		{
			name:    "gzip body over the cap is truncated after decoding",
			handler: encoded("gzip", gzipped(t, big)),
			opts:    func(o *fetch.Options) { o.MaxBodyBytes = 4096 },
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "len", len(r.Body), 4096)
				want(t, "truncated", r.Truncated, true)
				if !bytes.Equal(r.Body, big[:4096]) {
					t.Error("body is not the decoded prefix")
				}
			},
		},
		{
			name: "conditional GET sends validators and returns 304",
			request: func(base string) fetch.Request {
				return fetch.Request{URL: base + "/", ETag: `"abc"`, LastModified: "Sat, 01 Mar 2025 10:00:00 GMT"}
			},
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("If-None-Match") == `"abc"` && r.Header.Get("If-Modified-Since") == "Sat, 01 Mar 2025 10:00:00 GMT" {
					w.Header().Set("ETag", `"abc"`)
					w.Header().Set("Content-Encoding", "gzip") // no body: must not be a decode error
					w.WriteHeader(http.StatusNotModified)
					return
				}
				io.WriteString(w, "full body")
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "status", r.HTTPStatus, 304)
				want(t, "body", len(r.Body), 0)
				want(t, "etag", r.ETag, `"abc"`)
			},
		},
		{
			name: "unconditional GET sends no validators",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, r.Header.Get("If-None-Match")+"|"+r.Header.Get("If-Modified-Since"))
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "body", string(r.Body), "|")
			},
		},
		{
			name: "user agent is sent",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, r.UserAgent())
			},
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "echoed user agent", string(r.Body), "urldownloader/test")
			},
		},
		{
			name: "default user agent names the downloader",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, r.UserAgent())
			},
			opts: func(o *fetch.Options) { o.UserAgent = "" },
			check: func(t *testing.T, _ string, r *fetch.Response) {
				want(t, "echoed user agent", string(r.Body), fetch.DefaultUserAgent)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.handler)
			opts := localOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			req := fetch.Request{URL: srv.URL + tc.path}
			if tc.path == "" {
				req.URL = srv.URL + "/"
			}
			if tc.request != nil {
				req = tc.request(srv.URL)
			}
			resp, err := fetch.New(opts, fixedNow).Fetch(context.Background(), req)
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			tc.check(t, srv.URL, resp)
		})
	}
}

func want[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// TestGzipBomb checks that 10 MB of zeros compressed to ~10 KB cost only the
// cap: exactly MaxBodyBytes decoded bytes, quickly.
func TestGzipBomb(t *testing.T) {
	bomb := gzipped(t, make([]byte, 10<<20))
	if len(bomb) > 100<<10 {
		t.Fatalf("bomb is %d bytes, expected a small file", len(bomb))
	}
	srv := newServer(t, encoded("gzip", bomb))
	opts := localOptions()
	opts.MaxBodyBytes = 64 << 10

	start := time.Now()
	resp, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: srv.URL + "/bomb"})
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	want(t, "decoded bytes kept", len(resp.Body), 64<<10)
	want(t, "truncated", resp.Truncated, true)
	if elapsed > 2*time.Second {
		t.Errorf("took %v: the bomb was inflated past the cap", elapsed)
	}
}

func TestFetchTimeouts(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{
			name: "slow headers",
			handler: func(w http.ResponseWriter, r *http.Request) {
				wait(r, 5*time.Second)
			},
		},
		{
			name: "slow body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "1000")
				io.WriteString(w, "first part")
				w.(http.Flusher).Flush()
				wait(r, 5*time.Second)
			},
		},
		{
			name: "slow gzip body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "gzip")
				gz := gzip.NewWriter(w)
				io.WriteString(gz, "first part")
				gz.Flush()
				w.(http.Flusher).Flush()
				wait(r, 5*time.Second)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.handler)
			opts := localOptions()
			opts.Timeout = 300 * time.Millisecond
			start := time.Now()
			resp, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: srv.URL + "/slow"})
			elapsed := time.Since(start)
			if err == nil {
				t.Fatalf("Fetch returned %d, want a timeout", resp.HTTPStatus)
			}
			want(t, "kind", fetch.KindOf(err), fetch.KindTimeout)
			want(t, "transient", fetch.IsTransient(err), true)
			if !strings.Contains(err.Error(), "within 300ms") {
				t.Errorf("error %q does not say which timeout ran out", err)
			}
			if elapsed > 3*time.Second {
				t.Errorf("took %v, want about the 300ms timeout", elapsed)
			}
		})
	}
}

func TestFetchCanceled(t *testing.T) {
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { wait(r, 5*time.Second) }))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := fetch.New(localOptions(), fixedNow).Fetch(ctx, fetch.Request{URL: srv.URL + "/"})
	want(t, "kind", fetch.KindOf(err), fetch.KindCanceled)
	want(t, "transient", fetch.IsTransient(err), false)
}

func TestFetchConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	_, err = fetch.New(localOptions(), fixedNow).Fetch(context.Background(), fetch.Request{URL: "http://" + addr + "/"})
	want(t, "kind", fetch.KindOf(err), fetch.KindConnection)
	want(t, "transient", fetch.IsTransient(err), true)
	var fe *fetch.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not a *fetch.Error", err)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("error %v does not wrap ECONNREFUSED", err)
	}
}

// rawServer accepts connections on loopback and answers each with reply,
// whatever was asked: a way to send bytes net/http's server never would.
func rawServer(t *testing.T, reply []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for { // read the request head
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				c.Write(reply)
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

func TestFetchProtocolErrors(t *testing.T) {
	hugeHeaders := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Filler: "+strings.Repeat("a", 1000)+"\r\n", 400) + "\r\n"
	tests := []struct {
		name  string
		reply string
		kind  fetch.Kind
	}{
		{"malformed status line", "HELLO THERE\r\n\r\n", fetch.KindProtocol},
		{"headers too large", hugeHeaders, fetch.KindProtocol},
		{"corrupt gzip", "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 12\r\n\r\nnot gzip!!!!", fetch.KindProtocol},
		{"closed before answering", "", fetch.KindConnection},
		{"closed in the middle of the body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", fetch.KindConnection},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := rawServer(t, []byte(tc.reply))
			resp, err := fetch.New(localOptions(), fixedNow).Fetch(context.Background(), fetch.Request{URL: u})
			if err == nil {
				t.Fatalf("Fetch returned %d, want an error", resp.HTTPStatus)
			}
			want(t, "kind", fetch.KindOf(err), tc.kind)
		})
	}
}

func TestFetchUntrustedTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	_, err := fetch.New(localOptions(), fixedNow).Fetch(context.Background(), fetch.Request{URL: srv.URL + "/"})
	want(t, "kind", fetch.KindOf(err), fetch.KindTLS)
	want(t, "transient", fetch.IsTransient(err), false)
}

func TestFetchRefusedURLs(t *testing.T) {
	tests := []struct {
		name string
		url  string
		kind fetch.Kind
	}{
		{"file scheme", "file:///etc/passwd", fetch.KindDenied},
		{"ftp scheme", "ftp://127.0.0.1/x", fetch.KindDenied},
		{"gopher scheme", "gopher://127.0.0.1:6379/_FLUSHALL", fetch.KindDenied},
		{"no scheme", "example.com/page", fetch.KindDenied},
		{"unparseable", "http://[::1/", fetch.KindBadURL},
		{"no host", "http:///path", fetch.KindBadURL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fetch.New(localOptions(), fixedNow).Fetch(context.Background(), fetch.Request{URL: tc.url})
			want(t, "kind", fetch.KindOf(err), tc.kind)
		})
	}
}

// TestGuard fetches from real loopback servers with the guard on: the dial
// is refused before connect, so the server must see no request at all.
func TestGuard(t *testing.T) {
	tests := []struct {
		name         string
		ip           string
		allowPrivate bool
		wantKind     fetch.Kind
		wantMsg      string
	}{
		{"loopback refused", "127.0.0.1", false, fetch.KindDenied, "address 127.0.0.1 is loopback: not allowed"},
		{"another loopback host refused", "127.0.0.2", false, fetch.KindDenied, "address 127.0.0.2 is loopback"},
		{"loopback allowed with AllowPrivate", "127.0.0.1", true, fetch.KindOther, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			var conns atomic.Int32
			srv := startServer(t, tc.ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				io.WriteString(w, "secret")
			}), func(net.Conn, http.ConnState) { conns.Add(1) })
			opts := localOptions()
			opts.AllowPrivate = tc.allowPrivate
			resp, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: srv.URL + "/admin"})
			if tc.wantKind == fetch.KindOther {
				if err != nil {
					t.Fatalf("Fetch: %v", err)
				}
				want(t, "body", string(resp.Body), "secret")
				want(t, "requests seen", hits.Load(), int32(1))
				return
			}
			if err == nil {
				t.Fatalf("Fetch returned %d, want a denial", resp.HTTPStatus)
			}
			want(t, "kind", fetch.KindOf(err), tc.wantKind)
			want(t, "transient", fetch.IsTransient(err), false)
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
			want(t, "requests seen", hits.Load(), int32(0))
			want(t, "connections seen", conns.Load(), int32(0))
		})
	}
}

// TestGuardOnLocalhostName checks the guard runs on the resolved address,
// not on the URL's host name.
func TestGuardOnLocalhostName(t *testing.T) {
	var hits atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	opts := localOptions()
	opts.AllowPrivate = false
	opts.AllowedPorts = nil
	_, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: "http://localhost:" + port + "/"})
	want(t, "kind", fetch.KindOf(err), fetch.KindDenied)
	want(t, "requests seen", hits.Load(), int32(0))
}

// TestNoProxy checks that HTTP_PROXY is ignored. Loopback targets are never
// proxied by Go's environment rules, so the target is 0.0.0.0, which Linux
// delivers to the local host yet the rules do proxy; the first assertion
// proves that, so the test cannot pass vacuously.
func TestNoProxy(t *testing.T) {
	var proxyHits, targetHits atomic.Int32
	proxy := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxyHits.Add(1)
		io.WriteString(w, "via proxy")
	}))
	target := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
		io.WriteString(w, "direct")
	}))
	_, port, _ := net.SplitHostPort(target.Listener.Addr().String())
	targetURL := "http://0.0.0.0:" + port + "/page"

	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	u, _ := url.Parse(targetURL)
	viaEnv, err := httpproxy.FromEnvironment().ProxyFunc()(u)
	if err != nil || viaEnv == nil {
		t.Fatalf("environment proxy rules would not proxy %s (%v, %v): test setup is vacuous", targetURL, viaEnv, err)
	}

	// 0.0.0.0 is unspecified, outside the private set: the policy names it.
	opts := localOptions()
	opts.Addresses = fetch.AddressPolicy{}.Open(netip.MustParsePrefix("0.0.0.0/32"))
	resp, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: targetURL})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	want(t, "body", string(resp.Body), "direct")
	want(t, "proxy requests", proxyHits.Load(), int32(0))
	want(t, "target requests", targetHits.Load(), int32(1))
}

// TestKeepAlive checks that one Fetcher reuses its connection to a host.
func TestKeepAlive(t *testing.T) {
	var newConns atomic.Int32
	srv := startServer(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
		func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				newConns.Add(1)
			}
		})
	f := fetch.New(localOptions(), fixedNow)
	defer f.CloseIdleConnections()
	for i := 0; i < 3; i++ {
		if _, err := f.Fetch(context.Background(), fetch.Request{URL: srv.URL + "/"}); err != nil {
			t.Fatalf("Fetch %d: %v", i, err)
		}
	}
	want(t, "connections opened", newConns.Load(), int32(1))
}
