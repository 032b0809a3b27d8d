package wholebody_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/warc"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestReadFromWarc: a body kept in its WARC record alone (a body
// reference with no object or file, and a warc reference) reads back
// whole and verified: its content coding undone, cut where the result's
// body was cut; a record that is not the result's body is ErrMismatch.
func TestReadFromWarc(t *testing.T) {
	t.Parallel()
	w, err := warc.Create(warc.Options{Path: filepath.Join(t.TempDir(), "b.warc.gz")})
	if err != nil {
		t.Fatal(err)
	}
	page := bytes.Repeat([]byte("<p>a page kept in its record</p>\n"), 3000)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(page)
	zw.Close()
	write := func(payload []byte, headers string) warc.Ref {
		p := warc.NewPayload()
		defer p.Close()
		p.Write(payload)
		ref, err := w.Exchange(context.Background(), &warc.Exchange{
			URL: "http://a.test/", Request: []byte("GET / HTTP/1.1\r\n\r\n"),
			Response: []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\n%s\r\n", headers)), Payload: p,
		})
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	plain := write(page, "Content-Type: text/html\r\n")
	encoded := write(gz.Bytes(), "Content-Encoding: gzip\r\n")
	w.Close()

	stored := func(data []byte, ref warc.Ref) result.Result {
		sum := sha256.Sum256(data)
		r := result.Result{ID: "i", Status: result.StatusFetched, Warc: &ref}
		r.SetStored(body.Ref{Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])})
		return r
	}
	var rd wholebody.Reader
	ctx := context.Background()
	for name, c := range map[string]struct {
		want []byte
		ref  warc.Ref
	}{
		"plain": {page, plain}, "gzip-encoded": {page, encoded}, "cut": {page[:5000], encoded},
	} {
		got, err := rd.ReadAll(ctx, stored(c.want, c.ref))
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%s: read %d bytes, %v; want %d", name, len(got), err, len(c.want))
		}
	}
	wrong := stored(page, plain)
	wrong.Body.SHA256, wrong.SHA256 = hex.EncodeToString(make([]byte, 32)), hex.EncodeToString(make([]byte, 32))
	if _, err := rd.ReadAll(ctx, wrong); !errors.Is(err, wholebody.ErrMismatch) {
		t.Fatalf("a record that is not the body: %v, want ErrMismatch", err)
	}
}
