package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/warctest"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// TestHTTP2 checks that the custom dialer did not switch HTTP/2 off. The
// test server's certificate is trusted by reaching into the transport: the
// public API deliberately has no way to weaken TLS verification.
func TestHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "HTTP/%d", r.ProtoMajor)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	f := New(Options{AllowPrivate: true}, nil)
	f.transport.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	resp, err := f.Fetch(context.Background(), Request{URL: srv.URL + "/"})
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	if got := string(resp.Body); got != "HTTP/2" {
		t.Errorf("server saw %s, want HTTP/2", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		value   string
		want    time.Duration
		wantSet bool
	}{
		{"absent", "", 0, false},
		{"seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"padded", " 30 ", 30 * time.Second, true},
		{"IMF-fixdate", "Sat, 01 Mar 2025 12:01:30 GMT", 90 * time.Second, true},
		{"RFC 850 date", "Saturday, 01-Mar-25 12:00:10 GMT", 10 * time.Second, true},
		{"asctime date", "Sat Mar  1 12:00:05 2025", 5 * time.Second, true},
		{"date in the past", "Sat, 01 Mar 2025 11:00:00 GMT", 0, true},
		{"negative", "-5", 0, false},
		{"fractional", "1.5", 0, false},
		{"words", "tomorrow", 0, false},
		{"huge seconds", "99999999999999999999", time.Duration(math.MaxInt64), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, set := parseRetryAfter(tc.value, now)
			if got != tc.want || set != tc.wantSet {
				t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.value, got, set, tc.want, tc.wantSet)
			}
		})
	}
}

// TestClassify covers errors that loopback servers cannot produce, such as
// DNS failures (tests never query a real resolver).
func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		kind      Kind
		transient bool
	}{
		{"nil", nil, KindOther, false},
		{"no such host", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}, KindDNS, false},
		{"temporary DNS failure", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "server misbehaving", Name: "x", IsTemporary: true}}, KindDNS, true},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}, KindTimeout, true},
		{"deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), KindTimeout, true},
		{"canceled", fmt.Errorf("read: %w", context.Canceled), KindCanceled, false},
		{"unexpected EOF", io.ErrUnexpectedEOF, KindConnection, true},
		{"dial failure", &net.OpError{Op: "dial", Err: errors.New("address in use")}, KindConnection, true},
		// Out of descriptors or socket memory here is no fault of the host.
		{"socket: too many open files", &net.OpError{Op: "dial", Err: os.NewSyscallError("socket", syscall.EMFILE)}, KindLocal, false},
		{"socket: file table full", &net.OpError{Op: "dial", Err: os.NewSyscallError("socket", syscall.ENFILE)}, KindLocal, false},
		{"no buffer space", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ENOBUFS)}, KindLocal, false},
		{"accept: too many open files", &net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, KindLocal, false},
		{"connection cap", &net.OpError{Op: "dial", Err: fmt.Errorf("%w: 4 open", ErrConnLimit)}, KindLocal, false},
		{"TLS alert from server", &net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}, KindTLS, false},
		{"local TLS failure", fmt.Errorf("wrapped: %w", errors.New("tls: no supported versions")), KindTLS, false},
		{"untyped net/http complaint", errors.New(`malformed HTTP response "x"`), KindProtocol, false},
		{"guard denial", &Error{Kind: KindDenied, Op: "check address", Err: errors.New("no")}, KindDenied, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := KindOf(tc.err); got != tc.kind {
				t.Errorf("KindOf = %v, want %v", got, tc.kind)
			}
			if got := IsTransient(tc.err); got != tc.transient {
				t.Errorf("IsTransient = %v, want %v", got, tc.transient)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k := KindOther; k <= KindLocal; k++ {
		if s := k.String(); s == "" || s == "unknown" {
			t.Errorf("Kind(%d) has no name", k)
		}
	}
	if s := Kind(99).String(); s != "unknown" {
		t.Errorf("Kind(99) = %q", s)
	}
}

// TestReadBodyBuffer: a body of announced size is read into one buffer of
// that size (not grown by doubling, which may hold twice the body); one of
// unknown size grows up to the cap; either is cut at the cap.
func TestReadBodyBuffer(t *testing.T) {
	const size = 100_000
	tests := []struct {
		name          string
		contentLength int64
		max           int64
		wantLen       int
		wantTruncated bool
		maxCap        int
	}{
		{"announced", size, 1 << 20, size, false, size + 1},
		{"unknown length", -1, 1 << 20, size, false, 2 * size},
		{"announced, above the cap", size, 50_000, 50_000, true, 50_001},
		{"unknown, above the cap", -1, 50_000, 50_000, true, 50_001},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{Header: http.Header{}, ContentLength: tc.contentLength,
				Body: io.NopCloser(strings.NewReader(strings.Repeat("x", size)))}
			data, truncated, err := readBody(resp, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) != tc.wantLen || truncated != tc.wantTruncated {
				t.Errorf("read %d bytes, truncated %v; want %d, %v", len(data), truncated, tc.wantLen, tc.wantTruncated)
			}
			if cap(data) > tc.maxCap {
				t.Errorf("buffer of %d bytes for a %d-byte body, want at most %d", cap(data), len(data), tc.maxCap)
			}
		})
	}
}

// TestArchiveHTTP2: an h2 exchange is archived in the HTTP/1.1 form WARC
// readers parse, its WARC-Protocol saying h2, the request's :authority
// as its Host.
func TestArchiveHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "HTTP/%d", r.ProtoMajor)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	aw, err := warc.Create(warc.Options{Path: filepath.Join(t.TempDir(), "h2.warc.gz")})
	if err != nil {
		t.Fatal(err)
	}
	defer aw.Close()
	var got *warc.Exchange
	f := New(Options{AllowPrivate: true, Archive: archiveFunc(func(ctx context.Context, ex *warc.Exchange) (warc.Ref, error) {
		got = ex
		return aw.Exchange(ctx, ex)
	})}, nil)
	f.transport.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	resp, err := f.Fetch(context.Background(), Request{URL: srv.URL + "/x?q=1"})
	if err != nil || string(resp.Body) != "HTTP/2" || resp.Warc == nil {
		t.Fatalf("Fetch: %v %+v", err, resp)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	if got.Protocol != "h2" || !strings.HasPrefix(string(got.Response), "HTTP/1.1 200 OK\r\n") ||
		!strings.HasPrefix(string(got.Request), "GET /x?q=1 HTTP/1.1\r\n") ||
		!strings.Contains(string(got.Request), "\r\nHost: "+host+"\r\n") || strings.Contains(string(got.Request), ":path") {
		t.Fatalf("h2 exchange: %s\n%q\n%q", got.Protocol, got.Request, got.Response)
	}
	aw.Close()
	warctest.Check(t, resp.Warc.File)
}

type archiveFunc func(context.Context, *warc.Exchange) (warc.Ref, error)

func (f archiveFunc) Exchange(ctx context.Context, ex *warc.Exchange) (warc.Ref, error) {
	return f(ctx, ex)
}
