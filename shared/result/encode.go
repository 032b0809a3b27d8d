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
	data := r.Data
	r.Data, r.Truncated = "", true
	empty, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode result %s: %w", r.ID, err)
	}
	// The empty Data was omitted: count the field's own framing too.
	budget := maxBytes - len(empty) - len(`,"data":""`)
	if budget < 0 {
		return nil, fmt.Errorf("encode result %s: does not fit in %d bytes even without its body", r.ID, maxBytes)
	}
	r.Data = fitData(data, r.Encoding, budget)
	if b, err = json.Marshal(r); err != nil {
		return nil, fmt.Errorf("encode result %s: %w", r.ID, err)
	}
	return b, nil
}

// fitData returns the longest prefix of data whose JSON string form takes at
// most budget bytes, keeping it valid: whole runes for text, whole 4-byte
// groups for base64.
func fitData(data, encoding string, budget int) string {
	if encoding == EncodingBase64 {
		n := min(len(data), budget)
		return data[:n-n%4]
	}
	used := 0
	for i, r := range data {
		used += jsonLen(r)
		if used > budget {
			return data[:i]
		}
	}
	return data
}

// jsonLen is how many bytes encoding/json spends on r inside a string.
func jsonLen(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError:
		return 6
	default:
		return utf8.RuneLen(r)
	}
}
