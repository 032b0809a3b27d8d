package fetch

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"net/http"
	"strings"
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
	data, err := io.ReadAll(io.LimitReader(dec, max+1))
	if int64(len(data)) > max {
		return data[:max], true, nil
	}
	if err != nil {
		return nil, false, err
	}
	return data, false, nil
}

// decoder returns a reader of the body with its Content-Encoding undone.
// Only gzip and deflate are decoded because only they are asked for; any
// other encoding is returned as sent (Header still says which), capped the
// same way.
func decoder(resp *http.Response) (io.Reader, error) {
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if enc == "" || enc == "identity" {
		return resp.Body, nil
	}
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

// isZlibHeader reports whether b starts a zlib stream: method 8 (deflate),
// a window of at most 32 KiB, and a header checksum divisible by 31 (RFC
// 1950). A raw DEFLATE stream matches this by chance only rarely.
func isZlibHeader(b []byte) bool {
	cmf, flg := b[0], b[1]
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0
}
