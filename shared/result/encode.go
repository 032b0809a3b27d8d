package result

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/urldownloader/urldownloader/shared/body"
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

// SetStored records a body kept in a store: the message carries ref
// instead of Data.
func (r *Result) SetStored(ref body.Ref) {
	r.Body = &ref
	r.Data, r.Encoding = "", ""
	r.Bytes, r.SHA256 = ref.Bytes, ref.SHA256
}

// InlineSize is how many bytes body takes in a message's data field: as
// text, its length with JSON's escapes (a quote or newline costs two
// bytes, other control characters six), as base64 4/3 of it. It is what
// InlineBodyBytes limits, so a body under it fits a message whose size
// leaves room for the rest of the result.
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

// marshal is json.Marshal without HTML escaping.
func marshal(r Result) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("encode result %s: %w", r.ID, err)
	}
	// Encode ends the value with a newline, which is no part of the message.
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
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
// 1). It mirrors encoding/json with HTML escaping off; a test holds it to
// the encoder for every rune.
func jsonLen(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return len(`\ufffd`)
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029':
		return 6
	default:
		return size
	}
}
