package fetch

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/web/coding"
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
	defer dec.Close()
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

// decoder returns a reader of the body with its Content-Encoding undone
// (package coding: the codings the fetcher asks for). A body in a coding
// it does not know is returned as sent, capped the same way; the
// response's Encoding then says which (undecoded). A decoding that fails
// although the body arrived whole fails as a *decodeError.
func decoder(resp *http.Response) (io.ReadCloser, error) {
	if identity(resp) {
		return io.NopCloser(resp.Body), nil
	}
	raw := &rawBody{r: resp.Body}
	dec, _, err := coding.Decode(resp.Header.Get("Content-Encoding"), raw)
	if err != nil {
		return nil, raw.blame(err)
	}
	return &decodedBody{ReadCloser: dec, raw: raw}, nil
}

// identity reports a body sent without a content encoding.
func identity(resp *http.Response) bool {
	return coding.Count(resp.Header.Get("Content-Encoding")) == 0
}

// rawBody is a body as it comes off the connection, remembering how its
// last read ended.
type rawBody struct {
	r   io.Reader
	err error
}

func (b *rawBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		b.err = err
	}
	return n, err
}

// blame returns err, a decoding's failure, as a *decodeError when the
// connection is not to blame: every byte arrived (or none was read yet,
// as for a coding list over the cap), so the same answer fails the same
// way next time. A read that failed on the connection (a timeout, a body
// cut short) keeps its own error and kind.
func (b *rawBody) blame(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if b.err == nil || b.err == io.EOF {
		return &decodeError{err: err}
	}
	return err
}

// decodedBody reads a body through its decoders, blaming their failures
// (rawBody.blame).
type decodedBody struct {
	io.ReadCloser
	raw *rawBody
}

func (d *decodedBody) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	return n, d.raw.blame(err)
}

// decodeError is a body that arrived whole but whose Content-Encoding
// could not be undone (corrupt data, trailing junk, too many codings): a
// protocol error, final for the URL.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return "undo content coding: " + e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// undecoded is the Content-Encoding of a body passed on as sent, because
// it names a coding the fetcher does not undo; "" when the body is
// decoded (or was sent as it is).
func undecoded(resp *http.Response) string {
	if h := resp.Header.Get("Content-Encoding"); !coding.Known(h) {
		return strings.Join(coding.Codings(h), ", ")
	}
	return ""
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
	defer dec.Close()
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
