// Package coding undoes HTTP content codings (RFC 9110 section 8.4.1): the
// ones the fetcher asks for (Accept), for the fetcher itself and for a
// reader of a body kept as it was sent (a WARC record). One list, so what
// is asked for and what can be undone never drift apart.
package coding

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// Accept is the Accept-Encoding the fetcher sends: every coding Decode
// undoes. Servers that compress at all mostly answer gzip; br and zstd save
// them bytes where they prefer those.
const Accept = "gzip, deflate, br, zstd"

// maxZstdWindow bounds the memory a zstd stream may ask for: RFC 9659
// limits the window of zstd as an HTTP content coding to 8 MB.
const maxZstdWindow = 8 << 20

// MaxCodings is how many stacked content codings Decode undoes, as curl
// does since CVE-2022-32206: no server compresses a body more than twice
// on purpose, and each decoder holds its own window (32 KiB for deflate,
// up to 8 MB for zstd), so a list of thousands would take gigabytes.
const MaxCodings = 5

// ErrTooManyCodings is what Decode fails with for a Content-Encoding that
// lists more than MaxCodings codings: the body cannot be undone, and the
// same answer fails the same way again.
var ErrTooManyCodings = fmt.Errorf("more than %d stacked content codings", MaxCodings)

// Codings returns the codings of a Content-Encoding value in the order
// they were applied, lower case, identity dropped; nil for none.
func Codings(header string) []string {
	var out []string
	for rest := header; rest != ""; {
		var c string
		c, rest, _ = strings.Cut(rest, ",")
		c = strings.ToLower(strings.TrimSpace(c))
		if c != "" && c != "identity" {
			out = append(out, c)
		}
	}
	return out
}

// Count is how many codings a Content-Encoding value lists (identity
// dropped), counted without building the list: a header of 30,000 codings
// costs no allocation.
func Count(header string) int {
	n := 0
	for rest := header; rest != ""; {
		var c string
		c, rest, _ = strings.Cut(rest, ",")
		c = strings.TrimSpace(c)
		if c != "" && !strings.EqualFold(c, "identity") {
			n++
		}
	}
	return n
}

// Known reports whether Decode undoes every coding of a Content-Encoding
// value (true for none).
func Known(header string) bool {
	for _, c := range Codings(header) {
		if !known(c) {
			return false
		}
	}
	return true
}

func known(c string) bool {
	switch c {
	case "gzip", "x-gzip", "deflate", "br", "zstd":
		return true
	}
	return false
}

// Decode returns r with the codings of a Content-Encoding value undone,
// the last applied first. A value with a coding it does not know comes
// back as it is, with decoded false: the caller passes the bytes on and
// says how they are encoded. An empty body is empty whatever the header
// says (a 304, a 204 or an error page may name a coding and carry nothing).
// Close releases the decoders' buffers; it does not close r. A value that
// lists more than MaxCodings codings fails with ErrTooManyCodings before
// any decoder is built, whether Decode knows them or not.
func Decode(header string, r io.Reader) (body io.ReadCloser, decoded bool, err error) {
	if n := Count(header); n > MaxCodings {
		return nil, false, fmt.Errorf("%w: Content-Encoding lists %d", ErrTooManyCodings, n)
	}
	codings := Codings(header)
	if len(codings) == 0 || !Known(header) {
		return io.NopCloser(r), len(codings) == 0, nil
	}
	br := bufio.NewReader(r)
	if _, err := br.Peek(1); errors.Is(err, io.EOF) {
		return io.NopCloser(br), true, nil
	}
	var cur io.Reader = br
	var closers []func() error
	for i := len(codings) - 1; i >= 0; i-- {
		next, closer, err := decoder(codings[i], cur)
		if err != nil {
			closeAll(closers)
			return nil, false, fmt.Errorf("%s content coding: %w", codings[i], err)
		}
		cur = next
		if closer != nil {
			closers = append(closers, closer)
		}
	}
	return &decoding{Reader: cur, closers: closers}, true, nil
}

func decoder(c string, r io.Reader) (io.Reader, func() error, error) {
	switch c {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	case "deflate":
		// "deflate" should mean zlib (RFC 9110), but some servers send raw
		// DEFLATE; the two-byte zlib header tells them apart.
		br, ok := r.(*bufio.Reader)
		if !ok {
			br = bufio.NewReader(r)
		}
		if hdr, err := br.Peek(2); err == nil && isZlibHeader(hdr) {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, nil, err
			}
			return zr, zr.Close, nil
		}
		fr := flate.NewReader(br)
		return fr, fr.Close, nil
	case "br":
		return brotli.NewReader(r), nil, nil
	case "zstd":
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, nil, err
		}
		return zr, func() error { zr.Close(); return nil }, nil
	}
	return nil, nil, fmt.Errorf("unknown coding %q", c)
}

// isZlibHeader reports whether b starts a zlib stream: method 8 (deflate),
// a window of at most 32 KiB, and a header checksum divisible by 31 (RFC
// 1950). A raw DEFLATE stream matches this by chance only rarely.
func isZlibHeader(b []byte) bool {
	cmf, flg := b[0], b[1]
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0
}

type decoding struct {
	io.Reader
	closers []func() error
}

func (d *decoding) Close() error { return closeAll(d.closers) }

func closeAll(fs []func() error) error {
	var err error
	for _, f := range fs {
		err = errors.Join(err, f())
	}
	return err
}
