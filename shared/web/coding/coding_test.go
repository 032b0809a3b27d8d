package coding_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/urldownloader/urldownloader/shared/web/coding"
)

const text = "the quick brown fox jumps over the lazy dog, again and again and again"

func gz(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zl(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func raw(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.DefaultCompression)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func br(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	w := brotli.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zs(t *testing.T, b []byte) []byte {
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.EncodeAll(b, nil)
}

// TestDecode: every coding the fetcher asks for is undone, alone and
// stacked (the last applied first); an unknown one leaves the bytes as
// sent and says so; an empty body is empty whatever the header names; a
// corrupt stream is an error, not garbage.
func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		body         func(t *testing.T) []byte
		want         string
		decoded      bool
		wantErr      bool
	}{
		{"identity", "", func(*testing.T) []byte { return []byte(text) }, text, true, false},
		{"identity named", " Identity ", func(*testing.T) []byte { return []byte(text) }, text, true, false},
		{"gzip", "gzip", func(t *testing.T) []byte { return gz(t, []byte(text)) }, text, true, false},
		{"x-gzip", "X-GZIP", func(t *testing.T) []byte { return gz(t, []byte(text)) }, text, true, false},
		{"deflate as zlib", "deflate", func(t *testing.T) []byte { return zl(t, []byte(text)) }, text, true, false},
		{"deflate raw", "deflate", func(t *testing.T) []byte { return raw(t, []byte(text)) }, text, true, false},
		{"br", "br", func(t *testing.T) []byte { return br(t, []byte(text)) }, text, true, false},
		{"zstd", "zstd", func(t *testing.T) []byte { return zs(t, []byte(text)) }, text, true, false},
		{"gzip then br", "gzip, br", func(t *testing.T) []byte { return br(t, gz(t, []byte(text))) }, text, true, false},
		{"zstd then gzip", "zstd,gzip", func(t *testing.T) []byte { return gz(t, zs(t, []byte(text))) }, text, true, false},
		{"unknown", "compress", func(*testing.T) []byte { return []byte("\x1f\x9dLZW") }, "\x1f\x9dLZW", false, false},
		{"unknown after a known one", "gzip, x-squash", func(t *testing.T) []byte { return []byte("as sent") }, "as sent", false, false},
		{"empty gzip", "gzip", func(*testing.T) []byte { return nil }, "", true, false},
		{"corrupt br", "br", func(*testing.T) []byte { return []byte("not brotli at all, not at all") }, "", true, true},
		{"corrupt gzip", "gzip", func(*testing.T) []byte { return []byte("not gzip") }, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, decoded, err := coding.Decode(tc.header, bytes.NewReader(tc.body(t)))
			var got []byte
			if err == nil {
				got, err = io.ReadAll(r)
				r.Close()
			}
			if tc.wantErr {
				if err == nil {
					t.Fatalf("decoded %q, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want || decoded != tc.decoded {
				t.Errorf("got %q decoded %v, want %q decoded %v", got, decoded, tc.want, tc.decoded)
			}
		})
	}
}

// TestAcceptIsWhatDecodeKnows: every coding asked for is one Decode undoes.
func TestAcceptIsWhatDecodeKnows(t *testing.T) {
	for _, c := range strings.Split(coding.Accept, ",") {
		if !coding.Known(c) {
			t.Errorf("Accept-Encoding asks for %q, which Decode does not undo", c)
		}
	}
	if coding.Known("gzip, compress") {
		t.Error("a value with an unknown coding is not known")
	}
}

// TestMaxCodings checks the cap on stacked codings: MaxCodings are undone,
// one more fails with ErrTooManyCodings before any decoder is built, even
// when a coding is unknown.
func TestMaxCodings(t *testing.T) {
	body := []byte("stacked")
	for range coding.MaxCodings {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(body)
		w.Close()
		body = buf.Bytes()
	}
	list := strings.TrimSuffix(strings.Repeat("gzip, ", coding.MaxCodings), ", ")
	dec, ok, err := coding.Decode(list, bytes.NewReader(body))
	if err != nil || !ok {
		t.Fatalf("Decode(%d codings) = %v, %v", coding.MaxCodings, ok, err)
	}
	if got, err := io.ReadAll(dec); err != nil || string(got) != "stacked" {
		t.Errorf("decoded %q, %v", got, err)
	}
	for _, h := range []string{list + ", gzip", list + ", compress", strings.Repeat("br,", 30000)} {
		if _, _, err := coding.Decode(h, bytes.NewReader(body)); !errors.Is(err, coding.ErrTooManyCodings) {
			t.Errorf("Decode(%.40q...) error %v, want ErrTooManyCodings", h, err)
		}
	}
	if n := coding.Count(" gzip, identity,, BR "); n != 2 {
		t.Errorf("Count = %d, want 2", n)
	}
}
