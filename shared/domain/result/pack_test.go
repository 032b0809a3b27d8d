package result_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// page is an HTML page of about n bytes whose words repeat as a real
// page's do (so it compresses), with quotes and newlines that JSON escapes.
func page(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields(`the of and to in a is that for on with as by it was
		downloader polite robots host queue result body message delay café über`)
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html><head><title>page</title></head><body>\n")
	for b.Len() < n {
		fmt.Fprintf(&b, "<p class=\"para\">")
		for range 12 {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		b.WriteString("</p>\n")
	}
	return b.Bytes()
}

// noise is n bytes that do not compress (a JPEG's or a zip's body).
func noise(n int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestPackRoundTrip: whatever the packing, InlineBody gives back the body,
// Bytes and SHA256 describe the body as fetched, Size is what the data
// field spends in the message, and gzip is chosen only when it is shorter.
func TestPackRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		body    []byte
		enc     params.BodyEncoding
		wantEnc string
	}{
		{"plain page", page(50 << 10), params.BodyPlain, ""},
		{"plain binary", noise(4 << 10), params.BodyPlain, result.EncodingBase64},
		{"gzip page", page(50 << 10), params.BodyGzip, result.EncodingGzipBase64},
		{"gzip binary page (not UTF-8, compresses)", append(page(20<<10), 0xff, 0xfe), params.BodyGzip, result.EncodingGzipBase64},
		// Noise does not shrink: its plain form (base64) is kept.
		{"gzip noise", noise(4 << 10), params.BodyGzip, result.EncodingBase64},
		// gzip's frame (18 bytes) and base64 make a short text longer.
		{"gzip tiny text", []byte("demo page example.com/\n"), params.BodyGzip, ""},
		{"gzip empty", nil, params.BodyGzip, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := result.Pack(tt.body, tt.enc)
			if in.Encoding != tt.wantEnc {
				t.Fatalf("Pack encoding %q, want %q", in.Encoding, tt.wantEnc)
			}
			r := baseResult()
			r.Data, r.Encoding = "stale", "stale"
			r.SetInline(tt.body, in)
			if r.Bytes != int64(len(tt.body)) || r.SHA256 != sum(tt.body) {
				t.Errorf("Bytes %d SHA256 %s, want the body's %d %s", r.Bytes, r.SHA256, len(tt.body), sum(tt.body))
			}
			// Through the message and back, as a consumer reads it.
			out, err := result.Encode(r, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			var got result.Result
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			body, err := got.InlineBody()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(body, tt.body) || sum(body) != got.SHA256 || int64(len(body)) != got.Bytes {
				t.Errorf("decoded %d bytes with sha256 %s, want the body's %d %s", len(body), sum(body), got.Bytes, got.SHA256)
			}
			// Size is the data field's bytes in the message, escapes included.
			empty := r
			empty.Data = ""
			bare, err := result.Encode(empty, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if spent := int64(len(out) - len(bare) - len(`,"data":""`)); len(tt.body) > 0 && spent != in.Size {
				t.Errorf("Size %d, the message spends %d", in.Size, spent)
			}
			if plain := result.InlineSize(tt.body); in.Size > plain {
				t.Errorf("Size %d, more than plain's %d", in.Size, plain)
			}
		})
	}
}

// TestPackGzipIsStandard: the data is a plain gzip stream any library
// reads, not a private format.
func TestPackGzipIsStandard(t *testing.T) {
	body := page(30 << 10)
	in := result.Pack(body, params.BodyGzip)
	z, err := base64.StdEncoding.DecodeString(in.Data)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("gunzip: %d bytes, %v; want the %d-byte body", len(got), err, len(body))
	}
	if in.Size > int64(len(body))/3 {
		t.Errorf("a repetitive page of %d bytes packed to %d: not compressed", len(body), in.Size)
	}
}

// TestEncodeCutsGzip: a gzip+base64 body cut to fit the message is marked
// Truncated and decodes to a prefix of the body (the whole blocks the cut
// stream holds), never to an error or to other bytes.
func TestEncodeCutsGzip(t *testing.T) {
	body := noisyPage(400 << 10)
	r := baseResult()
	r.SetInline(body, result.Pack(body, params.BodyGzip))
	if r.Encoding != result.EncodingGzipBase64 {
		t.Fatalf("encoding %q, want gzip+base64", r.Encoding)
	}
	const max = 64 << 10
	out, err := result.Encode(r, max)
	if err != nil {
		t.Fatal(err)
	}
	var got result.Result
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(out) > max || !got.Truncated || got.Bytes != int64(len(body)) || got.SHA256 != sum(body) {
		t.Fatalf("%d bytes, truncated %v, bytes %d: want at most %d, truncated, the whole body's %d", len(out), got.Truncated, got.Bytes, max, len(body))
	}
	prefix, err := got.InlineBody()
	if err != nil {
		t.Fatalf("cut gzip data: %v", err)
	}
	if len(prefix) == 0 || len(prefix) >= len(body) || !bytes.Equal(prefix, body[:len(prefix)]) {
		t.Errorf("decoded %d bytes of %d: want a non-empty proper prefix of the body", len(prefix), len(body))
	}
}

// noisyPage is a page that compresses about two to one: text with a
// random token in every paragraph, so a cut lands mid-stream.
func noisyPage(n int) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	p := page(n)
	for i := 0; i+16 < len(p); i += 40 {
		for j := range 8 {
			p[i+j] = 'a' + byte(rng.IntN(26))
		}
	}
	return p
}

// TestInlineBodyRefusesDamage: data that is not what its encoding says is
// an error naming the result, not a wrong body.
func TestInlineBodyRefusesDamage(t *testing.T) {
	for _, tt := range []struct{ name, data, enc string }{
		{"bad base64", "not base64!", result.EncodingBase64},
		{"gzip+base64 not gzip", base64.StdEncoding.EncodeToString([]byte("plain text, not a gzip stream")), result.EncodingGzipBase64},
		{"gzip+base64 cut without truncated", result.Pack(page(20<<10), params.BodyGzip).Data[:400], result.EncodingGzipBase64},
		{"unknown encoding", "x", "brotli"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := baseResult()
			r.Data, r.Encoding = tt.data, tt.enc
			if b, err := r.InlineBody(); err == nil || !strings.Contains(err.Error(), r.ID) {
				t.Errorf("InlineBody = %d bytes, %v; want an error naming %s", len(b), err, r.ID)
			}
		})
	}
}
