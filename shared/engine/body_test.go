package engine_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// gzipBomb is a gzip stream of n zero bytes (a few KiB per MiB).
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zero := make([]byte, 64<<10)
	for written := 0; written < n; written += len(zero) {
		if _, err := zw.Write(zero); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestResponses checks how single responses end: slow bodies and headers
// time out and are retried until fetch_error, bodies are capped and decoded,
// conditional GETs send the validators, binary bodies go out as base64.
func TestResponses(t *testing.T) {
	t.Parallel()
	bomb := gzipBomb(t, 32<<20)
	binary := []byte{0xff, 0xfe, 0x00, 0x80, 'a', 0xc3}
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		entry   func(*hostqueue.Entry)
		// tries is how many requests the server must see for /x.
		tries int
		check func(t *testing.T, res result.Result, s *site)
	}{
		{
			name: "slow body beyond FetchTimeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = w.Write([]byte("first part "))
				http.NewResponseController(w).Flush()
				select {
				case <-r.Context().Done():
				case <-time.After(3 * time.Second):
				}
			},
			tries: 2,
			check: func(t *testing.T, res result.Result, s *site) {
				if res.Status != result.StatusFetchError || res.Attempts != 2 || !strings.Contains(res.Error, "within 300ms") {
					t.Errorf("%s attempts=%d err=%q, want fetch_error after 2 attempts naming the timeout", res.Status, res.Attempts, res.Error)
				}
			},
		},
		{
			name: "slow headers beyond FetchTimeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(3 * time.Second):
				}
			},
			tries: 2,
			check: func(t *testing.T, res result.Result, s *site) {
				if res.Status != result.StatusFetchError || res.Attempts != 2 || !strings.Contains(res.Error, "within") {
					t.Errorf("%s attempts=%d err=%q, want fetch_error after 2 attempts naming the timeout", res.Status, res.Attempts, res.Error)
				}
			},
		},
		{
			name: "gzip bomb",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = w.Write(bomb)
			},
			tries: 1,
			check: func(t *testing.T, res result.Result, s *site) {
				if res.Status != result.StatusFetched || !res.Truncated || res.Bytes != 64<<10 {
					t.Errorf("%s truncated=%v bytes=%d, want fetched, truncated at MaxBodyBytes %d", res.Status, res.Truncated, res.Bytes, 64<<10)
				}
				if res.Data != strings.Repeat("\x00", 64<<10) {
					t.Errorf("data is not the decoded zeros (%d chars, encoding %q)", len(res.Data), res.Encoding)
				}
				if !strings.Contains(s.header(1).Get("Accept-Encoding"), "gzip") {
					t.Errorf("Accept-Encoding %q, want gzip offered", s.header(1).Get("Accept-Encoding"))
				}
			},
		},
		{
			name: "plain body over the cap",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write(bytes.Repeat([]byte("a"), 100<<10))
			},
			tries: 1,
			check: func(t *testing.T, res result.Result, s *site) {
				if res.Status != result.StatusFetched || !res.Truncated || res.Bytes != 64<<10 || len(res.Data) != 64<<10 {
					t.Errorf("%s truncated=%v bytes=%d len=%d, want cut at %d", res.Status, res.Truncated, res.Bytes, len(res.Data), 64<<10)
				}
			},
		},
		{
			name: "304 with validators sent",
			entry: func(e *hostqueue.Entry) {
				e.ETag, e.LastModified = `"v1"`, "Wed, 01 Jan 2025 00:00:00 GMT"
			},
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("If-None-Match") == `"v1"` {
					w.Header().Set("ETag", `"v1"`)
					w.WriteHeader(http.StatusNotModified)
					return
				}
				page(w, r)
			},
			tries: 1,
			check: func(t *testing.T, res result.Result, s *site) {
				if res.Status != result.StatusNotModified || res.HTTPStatus != 304 || res.Data != "" || res.ETag != `"v1"` {
					t.Errorf("%s http=%d etag=%q data=%q, want not_modified with the etag", res.Status, res.HTTPStatus, res.ETag, res.Data)
				}
				h := s.header(1)
				if h.Get("If-None-Match") != `"v1"` || h.Get("If-Modified-Since") != "Wed, 01 Jan 2025 00:00:00 GMT" {
					t.Errorf("server saw If-None-Match %q If-Modified-Since %q", h.Get("If-None-Match"), h.Get("If-Modified-Since"))
				}
				if s.header(0).Get("If-None-Match") != "" {
					t.Errorf("robots.txt request carried the page's If-None-Match")
				}
			},
		},
		{
			name: "200 carries validators for next time",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("ETag", `W/"abc"`)
				w.Header().Set("Last-Modified", "Thu, 02 Jan 2025 10:00:00 GMT")
				page(w, r)
			},
			tries: 1,
			check: func(t *testing.T, res result.Result, s *site) {
				if res.Status != result.StatusFetched || res.ETag != `W/"abc"` || res.LastModified != "Thu, 02 Jan 2025 10:00:00 GMT" {
					t.Errorf("%s etag=%q lastModified=%q, want both validators", res.Status, res.ETag, res.LastModified)
				}
				if s.header(1).Get("If-None-Match") != "" || s.header(1).Get("If-Modified-Since") != "" {
					t.Errorf("unconditional entry sent validators: %v", s.header(1))
				}
			},
		},
		{
			name: "non-UTF-8 body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = w.Write(binary)
			},
			tries: 1,
			check: func(t *testing.T, res result.Result, s *site) {
				sum := sha256.Sum256(binary)
				if res.Status != result.StatusFetched || res.Encoding != result.EncodingBase64 ||
					res.Data != base64.StdEncoding.EncodeToString(binary) || res.Bytes != int64(len(binary)) ||
					res.SHA256 != hex.EncodeToString(sum[:]) || res.ContentType != "application/octet-stream" {
					t.Errorf("got %+v, want the body base64-encoded with its size and hash", res)
				}
			},
		},
		{
			name: "404 is final at once",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.NotFound(w, r)
			},
			tries: 1,
			check: func(t *testing.T, res result.Result, s *site) {
				if res.Status != result.StatusFetchError || res.HTTPStatus != 404 || res.Attempts != 1 || !strings.Contains(res.Error, "404") {
					t.Errorf("%s http=%d attempts=%d err=%q, want fetch_error 404 on attempt 1", res.Status, res.HTTPStatus, res.Attempts, res.Error)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.FetchTimeout = 300 * time.Millisecond
				p.MaxAttempts = 2
				e := newEnv(t, p)
				s := newSite(t, withRobots(404, "", tc.handler))
				e.seedEntries(tc.entry, s.url("/x"))
				e.runUntil(1, 10*time.Second)
				if n := s.count("/x"); n != tc.tries {
					t.Errorf("/x requested %d times, want %d; requests %v", n, tc.tries, s.paths())
				}
				tc.check(t, e.pub.one(t, s.url("/x")), s)
			})
		})
	}
}

// TestAddressGuardDenies checks that without AllowPrivate a loopback URL
// ends as denied by the fetcher's address guard and never reaches the
// server, robots.txt included.
func TestAddressGuardDenies(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		guarded := fetch.New(fetch.Options{UserAgent: p.UserAgent, Timeout: p.FetchTimeout, AllowedPorts: []int{1, 65535}}, time.Now)
		e.wrap = func(engine.Fetcher) engine.Fetcher { return guarded }
		s := newSite(t, page)
		e.seed(s.url("/x"))
		e.runUntil(1, 10*time.Second)
		if got := s.paths(); len(got) != 0 {
			t.Errorf("guarded fetcher reached the server: %v", got)
		}
		if res := e.pub.one(t, s.url("/x")); res.Status != result.StatusDenied || res.Error == "" {
			t.Errorf("%s %q, want denied by the address guard", res.Status, res.Error)
		}
	})
}
