package wholebody_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/embedded/dirbody"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestReadAll reads inline bodies (text, base64 and gzip+base64) and stored ones (a
// local folder here; S3 in shared/aws/s3body's and infra/emulated's tests), and
// refuses a body that is not the one fetched or was cut to fit a message.
func TestReadAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var r wholebody.Reader
	for _, body := range [][]byte{[]byte("<p>hello</p>"), {0xff, 0x00, 0xfe}, nil} {
		res := result.Result{ID: "i", Status: result.StatusFetched}
		res.SetBody(body)
		got, err := r.ReadAll(ctx, res)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("inline %q: read %q, %v", body, got, err)
		}
	}

	// ResultBodyEncoding=gzip: the same bodies, and a page that shrinks.
	page := bytes.Repeat([]byte("<p>a page that compresses well</p>\n"), 2000)
	for _, body := range [][]byte{page, []byte("<p>hello</p>"), {0xff, 0x00, 0xfe}} {
		res := result.Result{ID: "z", Status: result.StatusFetched}
		res.SetInline(body, result.Pack(body, params.BodyGzip))
		got, err := r.ReadAll(ctx, res)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("inline gzip %.20q (%s): read %d bytes, %v; want %d", body, res.Encoding, len(got), err, len(body))
		}
	}
	zres := result.Result{ID: "zcut", Status: result.StatusFetched}
	zres.SetInline(page, result.Pack(page, params.BodyGzip))
	zres.Data, zres.Truncated = zres.Data[:len(zres.Data)/8*4], true
	if _, err := r.ReadAll(ctx, zres); !errors.Is(err, wholebody.ErrCut) {
		t.Errorf("a gzip body cut to fit: %v, want ErrCut", err)
	}
	zres.SetInline(page, result.Pack(page, params.BodyGzip))
	zres.Data = base64.StdEncoding.EncodeToString([]byte("not the page"))
	if _, err := r.ReadAll(ctx, zres); err == nil {
		t.Error("gzip+base64 data that is not gzip: read, want an error")
	}

	res := result.Result{ID: "cut", Status: result.StatusFetched}
	res.SetBody(bytes.Repeat([]byte("a"), 100))
	res.Data, res.Truncated = res.Data[:40], true // as result.Encode cuts to fit
	if _, err := r.ReadAll(ctx, res); !errors.Is(err, wholebody.ErrCut) {
		t.Errorf("a body cut to fit: %v, want ErrCut", err)
	}

	store, err := dirbody.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("stored "), 10000)
	ref, err := store.Put(ctx, bytes.NewReader(data), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	stored := result.Result{ID: "s", Status: result.StatusFetched}
	stored.SetStored(ref)
	if got, err := r.ReadAll(ctx, stored); err != nil || !bytes.Equal(got, data) {
		t.Errorf("stored: read %d bytes, %v; want the %d put", len(got), err, len(data))
	}
	// Someone replaced the file: same length, other bytes.
	if err := os.WriteFile(ref.Path, bytes.Repeat([]byte("x"), len(data)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAll(ctx, stored); !errors.Is(err, wholebody.ErrMismatch) {
		t.Errorf("a replaced body: %v, want ErrMismatch", err)
	}
	if _, err := r.ReadAll(ctx, result.Result{ID: "d", Status: result.StatusDenied}); !errors.Is(err, wholebody.ErrNoBody) {
		t.Errorf("a denied result: %v, want ErrNoBody", err)
	}
	s3ref := stored
	b := *stored.Body
	b.Path, b.Bucket, b.Key = "", "bucket", "sha256/"+b.SHA256
	s3ref.Body = &b
	if _, err := r.ReadAll(ctx, s3ref); err == nil {
		t.Errorf("an S3 reference without an S3 client was read")
	}
}
