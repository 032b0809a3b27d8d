package result

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// SetBody fills Data, Encoding, Bytes and SHA256 from a body: UTF-8 text is
// carried as it is, anything else as base64 (Pack with params.BodyPlain).
func (r *Result) SetBody(body []byte) {
	r.SetInline(body, Pack(body, params.BodyPlain))
}

// SetInline fills Data and Encoding from in, a packing of body (Pack), and
// Bytes and SHA256 from body itself: they describe the body as fetched,
// whatever its packing.
func (r *Result) SetInline(body []byte, in Inline) {
	sum := sha256.Sum256(body)
	r.SHA256 = hex.EncodeToString(sum[:])
	r.Bytes = int64(len(body))
	r.Data, r.Encoding = in.Data, in.Encoding
}

// SetStored records a body kept in a store: the message carries ref
// instead of Data.
func (r *Result) SetStored(ref body.Ref) {
	r.Body = &ref
	r.Data, r.Encoding = "", ""
	r.Bytes, r.SHA256 = ref.Bytes, ref.SHA256
}

// Inline is a body packed for a result's data field (Pack).
type Inline struct {
	// Data and Encoding are the result's fields of the same names.
	Data, Encoding string
	// Size is how many bytes Data takes in the message, JSON's escapes
	// included: what InlineBodyBytes limits.
	Size int64
}

// Pack is the one place that decides how a body rides in a result's data
// field, for the parameter ResultBodyEncoding (enc):
//   - plain: UTF-8 text as it is, anything else base64;
//   - gzip: the body gzip-compressed, then base64 ("gzip+base64"), when
//     that is shorter than plain; else plain. An image or an archive does
//     not shrink, and a tiny page would grow by gzip's 18 bytes of frame:
//     those keep the plain form, which needs no decoder.
//
// A consumer reads Data back with Result.InlineBody whatever the packing.
func Pack(body []byte, enc params.BodyEncoding) Inline {
	plain := InlineSize(body)
	if enc == params.BodyGzip && len(body) > 0 {
		if data, ok := gzipBase64(body, plain); ok {
			return Inline{Data: data, Encoding: EncodingGzipBase64, Size: int64(len(data))}
		}
	}
	if !utf8.Valid(body) {
		return Inline{Data: base64.StdEncoding.EncodeToString(body), Encoding: EncodingBase64, Size: plain}
	}
	return Inline{Data: string(body), Size: plain}
}

// gzipWriters are reused, as shared/web/warc's are: a compressor's state is
// most of a megabyte, and making one per result would cost more CPU than
// the compressing. BestSpeed: every inline body is compressed once on the
// check function's CPU, and level 1 takes a third of the default's time
// for a few percent more bytes on web pages (docs/benchmarks.md, "Cost
// design", the bullet "Results' bodies compressed", has the ratio).
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// gzipBuffers hold a compressed body until it is base64-encoded.
var gzipBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// gzipBase64 returns body gzip-compressed and base64-encoded, and whether
// that is shorter than plain bytes (the body's plain inline size).
func gzipBase64(body []byte, plain int64) (string, bool) {
	buf := gzipBuffers.Get().(*bytes.Buffer)
	defer func() {
		// A buffer grown by a large body is left to the collector: the
		// pool would keep it alive for a small one.
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			gzipBuffers.Put(buf)
		}
	}()
	buf.Reset()
	zw := gzipWriters.Get().(*gzip.Writer)
	defer func() {
		zw.Reset(io.Discard) // so the pooled writer does not hold buf
		gzipWriters.Put(zw)
	}()
	zw.Reset(buf)
	// Writes to a bytes.Buffer cannot fail.
	zw.Write(body)
	zw.Close()
	if int64(base64.StdEncoding.EncodedLen(buf.Len())) >= plain {
		return "", false
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), true
}

// InlineBody returns the body carried in Data, its packing undone (base64,
// gzip+base64, or text as it is). When Data was cut to fit the message
// (Truncated, and fewer than Bytes bytes come back) it is the part that
// was sent: for gzip+base64, what the cut stream decompresses to. It does
// not check the body against SHA256 (shared/web/wholebody does).
func (r Result) InlineBody() ([]byte, error) {
	switch r.Encoding {
	case "":
		return []byte(r.Data), nil
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(r.Data)
		if err != nil {
			return nil, fmt.Errorf("result %s: base64 data: %w", r.ID, err)
		}
		return b, nil
	case EncodingGzipBase64:
		z, err := base64.StdEncoding.DecodeString(r.Data)
		if err != nil {
			return nil, fmt.Errorf("result %s: gzip+base64 data: %w", r.ID, err)
		}
		b, err := gunzip(z, r.Truncated)
		if err != nil {
			return nil, fmt.Errorf("result %s: %w", r.ID, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("result %s: unknown data encoding %q", r.ID, r.Encoding)
}

// gunzip decompresses z; a cut stream (cut: the message was cut to fit)
// yields what its whole blocks hold.
func gunzip(z []byte, cut bool) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		if cut && errors.Is(err, io.ErrUnexpectedEOF) || cut && errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("gzip data: %w", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil && !(cut && errors.Is(err, io.ErrUnexpectedEOF)) {
		return nil, fmt.Errorf("gzip data: %w", err)
	}
	return b, nil
}

// InlineSize is how many bytes body takes in a message's data field as
// plain (Pack with params.BodyPlain): as text, its length with JSON's
// escapes (a quote or newline costs two bytes, other control characters
// six), as base64 4/3 of it. A body under InlineBodyBytes fits a message
// whose size leaves room for the rest of the result.
func InlineSize(body []byte) int64 {
	if !utf8.Valid(body) {
		return int64(base64.StdEncoding.EncodedLen(len(body)))
	}
	var n int64
	for i := 0; i < len(body); {
		r, size := utf8.DecodeRune(body[i:])
		n += int64(jsonLen(r, size))
		i += size
	}
	return n
}

// Encode marshals r into at most maxBytes of JSON, cutting Data (and marking
// Truncated) when the whole body would not fit, so a result is never an
// unsendable message. Bytes and SHA256 keep describing the body as fetched.
//
// '<', '>' and '&' are written as they are, not as \u003c and friends:
// results are read by programs, not pasted into HTML script tags, and the
// escapes would cost six bytes per character of markup, cutting HTML
// bodies early to fit the message.
func Encode(r Result, maxBytes int) ([]byte, error) {
	b, err := marshal(r)
	if err != nil {
		return nil, err
	}
	if len(b) <= maxBytes {
		return b, nil
	}
	data := r.Data
	r.Data, r.Truncated = "", true
	empty, err := marshal(r)
	if err != nil {
		return nil, err
	}
	// The empty Data was omitted: count the field's own framing too.
	budget := maxBytes - len(empty) - len(`,"data":""`)
	if budget < 0 {
		return nil, fmt.Errorf("encode result %s: does not fit in %d bytes even without its body", r.ID, maxBytes)
	}
	r.Data = fitData(data, r.Encoding, budget)
	return marshal(r)
}

// fitData returns the longest prefix of data whose JSON string form takes at
// most budget bytes, keeping it valid: whole runes for text, whole 4-byte
// groups for base64 (gzip+base64 then ends in a cut stream: Result.InlineBody
// decompresses what it holds).
func fitData(data, encoding string, budget int) string {
	if encoding == EncodingBase64 || encoding == EncodingGzipBase64 {
		n := min(len(data), budget)
		return data[:n-n%4]
	}
	used := 0
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRuneInString(data[i:])
		used += jsonLen(r, size)
		if used > budget {
			return data[:i]
		}
		i += size
	}
	return data
}

// jsonLen is how many bytes marshal spends inside a string on the rune r,
// decoded from size bytes of input (an invalid byte is RuneError of size
// 1). It mirrors encoding/json with HTML escaping off, plus the escapes of
// U+FFFE and U+FFFF (see appendString); a test holds it to marshal for
// every rune.
func jsonLen(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return len(`\ufffd`)
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029' || r == '\ufffe' || r == '\uffff':
		return 6
	default:
		return size
	}
}
