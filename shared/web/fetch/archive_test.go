package fetch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/internal/warctest"
	"github.com/urldownloader/urldownloader/shared/web/coding"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

func archiveWriter(t *testing.T) *warc.Writer {
	t.Helper()
	w, err := warc.Create(warc.Options{Path: filepath.Join(t.TempDir(), "f.warc.gz"), Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func b32(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + base32.StdEncoding.EncodeToString(sum[:])
}

// TestArchiveExchange: with an Archive, every answer is kept as it went
// over the wire: the request with the fields the transport wrote, the
// status line and headers, the payload still gzip-encoded (the result's
// body is decoded), the address reached; a cut body says so, a chunked
// one is kept without its chunking, a 304 to a conditional GET is a
// revisit, a redirect is a response like any other. warcio reads all of
// them and checks their digests.
func TestArchiveExchange(t *testing.T) {
	page := bytes.Repeat([]byte("<p>archived page</p>\n"), 200)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/gz":
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "text/html")
			w.Header().Add("X-Two", "first")
			w.Header().Add("X-Two", "second")
			w.Write(gzipped(t, page))
		case "/big":
			w.Write(bytes.Repeat([]byte("b"), 3000))
		case "/chunked":
			w.Write([]byte("part one, "))
			w.(http.Flusher).Flush()
			w.Write([]byte("part two"))
		case "/same":
			if r.Header.Get("If-None-Match") == `"v1"` {
				w.WriteHeader(http.StatusNotModified)
				return
			}
			w.Header().Set("ETag", `"v1"`)
			w.Write([]byte("v1"))
		case "/moved":
			http.Redirect(w, r, "/gz", http.StatusMovedPermanently)
		}
	}))
	aw := archiveWriter(t)
	opts := localOptions()
	opts.Archive = aw
	opts.MaxBodyBytes = 1000
	f := fetch.New(opts, fixedNow)
	ctx := context.Background()
	get := func(req fetch.Request) *fetch.Response {
		t.Helper()
		resp, err := f.Fetch(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", req.URL, err)
		}
		if resp.Warc == nil {
			t.Fatalf("%s: no archive reference", req.URL)
		}
		return resp
	}
	gz := get(fetch.Request{URL: srv.URL + "/gz", MaxBodyBytes: 1 << 20})
	big := get(fetch.Request{URL: srv.URL + "/big"})
	chunked := get(fetch.Request{URL: srv.URL + "/chunked"})
	same := get(fetch.Request{URL: srv.URL + "/same", ETag: `"v1"`})
	moved := get(fetch.Request{URL: srv.URL + "/moved"})
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	file := gz.Warc.File
	checked := warctest.Check(t, file)
	if len(checked) != 1+2*5 {
		t.Fatalf("warcio check saw %d records, want a warcinfo and 5 exchanges", len(checked))
	}

	if !bytes.Equal(gz.Body, page) {
		t.Fatal("the result's body is not the decoded page")
	}
	h := warctest.Headers(t, file, gz.Warc.Offset)
	for _, want := range []string{
		"WARC-Type: response", "WARC-IP-Address: 127.0.0.1", "WARC-Target-URI: " + srv.URL + "/gz",
		"WARC-Payload-Digest: " + b32(gzipped(t, page)), "WARC-Protocol: http/1.1",
		"HTTP/1.1 200 OK", "Content-Encoding: gzip", "X-Two: first\r\nX-Two: second",
	} {
		if !strings.Contains(h, want) {
			t.Errorf("gz record lacks %q:\n%s", want, h)
		}
	}
	// warcio undoes the content coding, as a replay does.
	if got := warctest.Payload(t, file, gz.Warc.Offset); !bytes.Equal(got, page) {
		t.Errorf("warcio extract: %d bytes, want the %d of the page", len(got), len(page))
	}
	// The request record is the member just before the response.
	var reqAt int64 = -1
	for i, c := range checked {
		if c.Offset == gz.Warc.Offset && i > 0 && checked[i-1].Type == "request" {
			reqAt = checked[i-1].Offset
		}
	}
	if reqAt < 0 {
		t.Fatalf("no request record before the response at %d: %+v", gz.Warc.Offset, checked)
	}
	rh := warctest.Headers(t, file, reqAt)
	for _, want := range []string{"GET /gz HTTP/1.1", "Host: " + strings.TrimPrefix(srv.URL, "http://"),
		"User-Agent: urldownloader/test", "Accept-Encoding: " + coding.Accept, "WARC-Concurrent-To: "} {
		if !strings.Contains(rh, want) {
			t.Errorf("request record lacks %q:\n%s", want, rh)
		}
	}

	if !big.Truncated || !strings.Contains(warctest.Headers(t, file, big.Warc.Offset), "WARC-Truncated: length") {
		t.Error("a cut body's record does not say WARC-Truncated: length")
	}
	ch := warctest.Headers(t, file, chunked.Warc.Offset)
	if strings.Contains(strings.ToLower(ch), "transfer-encoding") {
		t.Errorf("a dechunked payload's record still names its transfer coding:\n%s", ch)
	}
	if got := warctest.Payload(t, file, chunked.Warc.Offset); string(got) != "part one, part two" {
		t.Errorf("chunked payload %q", got)
	}
	sh := warctest.Headers(t, file, same.Warc.Offset)
	if !strings.Contains(sh, "WARC-Type: revisit") || !strings.Contains(sh, warc.ProfileServerNotModified) ||
		!strings.Contains(sh, "HTTP/1.1 304 Not Modified") {
		t.Errorf("304 record:\n%s", sh)
	}
	if mh := warctest.Headers(t, file, moved.Warc.Offset); !strings.Contains(mh, "HTTP/1.1 301 Moved Permanently") ||
		!strings.Contains(mh, "Location: /gz") {
		t.Errorf("redirect record:\n%s", mh)
	}
}

type failingArchive struct{}

func (failingArchive) Exchange(context.Context, *warc.Exchange) (warc.Ref, error) {
	return warc.Ref{}, errors.New("disk full")
}

// TestArchiveFailure: an answer that cannot be archived is the fetcher's
// own failure (KindLocal: the URL stays queued), never a response without
// its record.
func TestArchiveFailure(t *testing.T) {
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "page") }))
	opts := localOptions()
	opts.Archive = failingArchive{}
	resp, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: srv.URL + "/"})
	if resp != nil || fetch.KindOf(err) != fetch.KindLocal || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v, %v; want no response and a KindLocal error", resp, err)
	}
	// Without an Archive nothing is captured.
	resp, err = fetch.New(localOptions(), fixedNow).Fetch(context.Background(), fetch.Request{URL: srv.URL + "/"})
	if err != nil || resp.Warc != nil {
		t.Fatalf("no archive: %v, warc %v", err, resp.Warc)
	}
}
