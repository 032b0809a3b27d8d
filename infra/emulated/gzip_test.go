package emulated_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestGzipBodies: ResultBodyEncoding=gzip set in SSM reaches the check
// function: a page rides gzip-compressed in a message a fraction of its
// size and reads back as the body its bytes and sha256 describe; a body
// that does not shrink (random bytes, over InlineBodyBytes as base64)
// goes to the bucket as with plain, as does one longer than
// InlineBodyBytes (streamed before it could be compressed).
func TestGzipBodies(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	h := site.Hosts()[0]
	const inline = params.DefaultInlineBodyBytes
	page, noise, long := demosite.TextURL(h, 200_000), demosite.LargeURL(h, 200_000, 7), demosite.TextURL(h, inline+1)
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: map[string]string{
		"FetchDelay": "100ms", "CheckHostPeriod": "2s", "ResultBodyEncoding": "gzip",
	}})
	_, byID := runAll(t, p, inputs([]string{page, noise, long}), 2*time.Minute)
	got := map[string]result.Result{}
	for _, r := range byID {
		got[r.URL] = r
	}
	reader := wholebody.Reader{S3: stack.NewS3(p.AWS)}
	read := func(r result.Result) []byte {
		t.Helper()
		rc, err := reader.Open(t.Context(), r)
		if err != nil {
			t.Fatalf("%s: open body: %v", r.URL, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("%s: read body: %v", r.URL, err)
		}
		return b
	}

	r := got[page]
	if r.Status != result.StatusFetched || r.Body != nil || r.Encoding != result.EncodingGzipBase64 || r.Truncated {
		t.Fatalf("page: %s, encoding %q, body %+v, truncated %v: want it inline as gzip+base64", r.Status, r.Encoding, r.Body, r.Truncated)
	}
	if len(r.Data) > 2000 {
		t.Errorf("page of 200,000 repeated bytes: %d bytes of data, want it compressed to a few hundred", len(r.Data))
	}
	want := demosite.TextBody(200_000)
	if b := read(r); !bytes.Equal(b, want) || r.Bytes != 200_000 || r.SHA256 != sha(want) {
		t.Errorf("page: read back %d bytes, result says %d bytes sha256 %s; want the 200,000-byte page, %s", len(b), r.Bytes, r.SHA256, sha(want))
	}

	for _, u := range []string{noise, long} {
		r := got[u]
		if r.Status != result.StatusFetched || r.Body == nil || r.Body.Bucket != p.Stack.BodyBucket || r.Data != "" {
			t.Errorf("%s: %s, body %+v, %d bytes inline: want it in the bucket", u, r.Status, r.Body, len(r.Data))
			continue
		}
		if b := read(r); int64(len(b)) != r.Bytes || sha(b) != r.SHA256 {
			t.Errorf("%s: read back %d bytes sha256 %s, result says %d %s", u, len(b), sha(b), r.Bytes, r.SHA256)
		}
	}
	if r := got[noise]; r.Bytes != 200_000 || r.SHA256 != demosite.LargeSHA256(200_000, 7) {
		t.Errorf("random body: %d bytes %s, want 200,000 %s", r.Bytes, r.SHA256, demosite.LargeSHA256(200_000, 7))
	}
}
