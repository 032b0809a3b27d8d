package fetch

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/urldownloader/urldownloader/shared/body"
)

// readBody reads the decoded body, keeping at most max bytes. It stops after
// max+1 decoded bytes (the extra byte only proves there was more), so a
// compressed bomb costs at most max bytes of memory and the CPU to inflate
// them, never its full expanded size.
func readBody(resp *http.Response, max int64) ([]byte, bool, error) {
	dec, err := decoder(resp)
	if err != nil {
		return nil, false, err
	}
	if c, ok := dec.(io.Closer); ok {
		defer c.Close()
	}
	// A body sent as it is announces its size: read it into a buffer of
	// that size instead of growing one by doubling (which can hold up to
	// twice the body at the end).
	var hint int64
	if identity(resp) {
		hint = resp.ContentLength
	}
	data, err := readAtMost(dec, max+1, hint)
	if int64(len(data)) > max {
		return data[:max], true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return data, false, nil
}

// readAtMost reads r to its end or to n bytes, whichever comes first,
// starting with a buffer of hint+1 bytes when 0 < hint < n (one more to see
// the end without growing), else of at most 32 KiB, doubled as needed up
// to n.
func readAtMost(r io.Reader, n, hint int64) ([]byte, error) {
	size := min(n, 32<<10)
	if hint > 0 && hint < n {
		size = hint + 1
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= n {
				return buf, nil
			}
			grown := make([]byte, len(buf), min(n, 2*int64(cap(buf))))
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// decoder returns a reader of the body with its Content-Encoding undone.
// Only gzip and deflate are decoded because only they are asked for; any
// other encoding is returned as sent (Header still says which), capped the
// same way.
func decoder(resp *http.Response) (io.Reader, error) {
	if identity(resp) {
		return resp.Body, nil
	}
	enc := contentEncoding(resp)
	br := bufio.NewReader(resp.Body)
	// A 304, a 204 or an error page may carry Content-Encoding with no
	// body at all: an empty body, not a corrupt stream.
	if _, err := br.Peek(1); errors.Is(err, io.EOF) {
		return br, nil
	}
	switch enc {
	case "gzip", "x-gzip":
		return gzip.NewReader(br)
	case "deflate":
		// "deflate" should mean zlib (RFC 9110), but some servers send raw
		// DEFLATE; the two-byte zlib header tells them apart.
		if hdr, err := br.Peek(2); err == nil && isZlibHeader(hdr) {
			return zlib.NewReader(br)
		}
		return flate.NewReader(br), nil
	default:
		return br, nil
	}
}

func contentEncoding(resp *http.Response) string {
	return strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
}

// identity reports a body sent without a content encoding.
func identity(resp *http.Response) bool {
	enc := contentEncoding(resp)
	return enc == "" || enc == "identity"
}

// isZlibHeader reports whether b starts a zlib stream: method 8 (deflate),
// a window of at most 32 KiB, and a header checksum divisible by 31 (RFC
// 1950). A raw DEFLATE stream matches this by chance only rarely.
func isZlibHeader(b []byte) bool {
	cmf, flg := b[0], b[1]
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0
}

// storeError marks a failure of the body store (as opposed to the read).
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

func isStoreError(err error) bool {
	_, ok := errors.AsType[*storeError](err)
	return ok
}

// readOrStore reads the decoded body into memory up to inline bytes; a
// longer one is streamed, from its first byte and up to max, into store,
// and its reference returned instead. Errors of the read come back as
// *body.ReadError, those of the store as *storeError.
func readOrStore(ctx context.Context, resp *http.Response, max, inline int64, store body.Store, contentType string) ([]byte, *body.Ref, bool, error) {
	dec, err := decoder(resp)
	if err != nil {
		return nil, nil, false, &body.ReadError{Err: err}
	}
	if c, ok := dec.(io.Closer); ok {
		defer c.Close()
	}
	var hint int64
	if identity(resp) {
		hint = resp.ContentLength
	}
	head, err := readAtMost(dec, inline+1, hint)
	if err != nil {
		return nil, nil, false, &body.ReadError{Err: err}
	}
	if int64(len(head)) <= inline {
		return head, nil, false, nil
	}
	capped := &capReader{r: io.MultiReader(bytes.NewReader(head), dec), left: max}
	ref, err := store.Put(ctx, body.TrackReads(capped), contentType)
	if err != nil {
		if _, ok := errors.AsType[*body.ReadError](err); ok {
			return nil, nil, false, err
		}
		return nil, nil, false, &storeError{err: err}
	}
	return nil, &ref, capped.truncated, nil
}

// capReader reads r up to left bytes, then ends (io.EOF); truncated says
// whether r had more (one byte is read past the cap to know).
type capReader struct {
	r         io.Reader
	left      int64
	truncated bool
	done      bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.EOF
	}
	if c.left <= 0 {
		c.done = true
		var one [1]byte
		n, err := io.ReadFull(c.r, one[:])
		if n == 1 {
			c.truncated = true
			return 0, io.EOF
		}
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if errors.Is(err, io.EOF) {
		c.done = true
	}
	return n, err
}
