package result

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// SetBody fills Data, Encoding, Bytes and SHA256 from a body: UTF-8 text is
// carried as it is, anything else as base64.
func (r *Result) SetBody(body []byte) {
	sum := sha256.Sum256(body)
	r.SHA256 = hex.EncodeToString(sum[:])
	r.Bytes = int64(len(body))
	if utf8.Valid(body) {
		r.Data, r.Encoding = string(body), ""
	} else {
		r.Data, r.Encoding = base64.StdEncoding.EncodeToString(body), EncodingBase64
	}
}

// Encode marshals r into at most maxBytes of JSON, cutting Data (and marking
// Truncated) when the whole body would not fit, so a result is never an
// unsendable message. Bytes and SHA256 keep describing the body as fetched.
func Encode(r Result, maxBytes int) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode result %s: %w", r.ID, err)
	}
	if len(b) <= maxBytes {
		return b, nil
	}
	over := len(b) - maxBytes
	r.Truncated = true
	for range 8 {
		r.Data = cutData(r.Data, r.Encoding, over+64)
		b, err = json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode result %s: %w", r.ID, err)
		}
		if len(b) <= maxBytes {
			return b, nil
		}
		// JSON escaping made the text longer than its bytes: cut more.
		over = len(b) - maxBytes
	}
	return nil, fmt.Errorf("encode result %s: does not fit in %d bytes", r.ID, maxBytes)
}

// cutData shortens data by at least n encoded bytes, keeping it valid.
func cutData(data, encoding string, n int) string {
	if n >= len(data) {
		return ""
	}
	keep := len(data) - n
	if encoding == EncodingBase64 {
		keep -= keep % 4
		return data[:keep]
	}
	for keep > 0 && !utf8.RuneStart(data[keep]) {
		keep--
	}
	return data[:keep]
}
