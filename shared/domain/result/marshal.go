package result

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// marshal is json.Marshal of r without HTML escaping, written out by hand:
// every result goes through it once or more (the output queue's message,
// local mode's line), and encoding/json's reflection cost 11 us a result,
// 2% of local mode's CPU at 10,000 hosts. The rare nested refs (body,
// warc) still go through encoding/json. TestMarshalMatchesEncodingJSON
// holds it to the encoder, field by field and rune by rune.
func marshal(r Result) ([]byte, error) {
	if y := r.FetchedAt.Year(); y < 0 || y > 9999 {
		// time.Time's own refusal, with its message.
		return marshalReflect(r)
	}
	b := make([]byte, 0, 256+len(r.Data)+len(r.URL)+len(r.Error))
	b = append(b, `{"id":`...)
	b = appendString(b, r.ID)
	b = append(b, `,"host":`...)
	b = appendString(b, r.Host)
	b = append(b, `,"url":`...)
	b = appendString(b, r.URL)
	b = append(b, `,"status":`...)
	b = appendString(b, string(r.Status))
	if r.HTTPStatus != 0 {
		b = append(b, `,"httpStatus":`...)
		b = strconv.AppendInt(b, int64(r.HTTPStatus), 10)
	}
	b = appendField(b, "contentType", r.ContentType)
	b = appendField(b, "contentEncoding", r.ContentEncoding)
	b = appendField(b, "data", r.Data)
	b = appendField(b, "encoding", r.Encoding)
	if r.Body != nil {
		var err error
		if b, err = appendRef(b, "body", r.Body); err != nil {
			return nil, fmt.Errorf("encode result %s: %w", r.ID, err)
		}
	}
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = appendField(b, "sha256", r.SHA256)
	if r.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	b = append(b, `,"fetchedAt":"`...)
	b = r.FetchedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if r.Attempts != 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(r.Attempts), 10)
	}
	b = appendField(b, "location", r.Location)
	b = appendField(b, "etag", r.ETag)
	b = appendField(b, "lastModified", r.LastModified)
	b = appendField(b, "validatorsUrl", r.ValidatorsURL)
	b = appendField(b, "error", r.Error)
	if r.Warc != nil {
		var err error
		if b, err = appendRef(b, "warc", r.Warc); err != nil {
			return nil, fmt.Errorf("encode result %s: %w", r.ID, err)
		}
	}
	b = appendField(b, "retryOf", r.RetryOf)
	if r.Changed != nil {
		b = append(b, `,"changed":`...)
		b = strconv.AppendBool(b, *r.Changed)
	}
	if r.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, int64(r.Seq), 10)
	}
	if r.Final {
		b = append(b, `,"final":true`...)
	}
	return append(b, '}'), nil
}

// appendField appends ,"name":"v" unless v is empty (omitempty).
func appendField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(append(append(b, `,"`...), name...), `":`...)
	return appendString(b, v)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string as encoding/json writes it with
// HTML escaping off: the short escapes for quote, backslash, \b \f \n \r
// \t, \u00XX for other control characters, \u2028 and \u2029 escaped, and
// each invalid byte as \ufffd (jsonLen counts the same). It also escapes
// U+FFFE and U+FFFF, which encoding/json writes raw: SQS refuses a message
// holding a character outside #x9 | #xA | #xD | #x20-#xD7FF |
// #xE000-#xFFFD | #x10000-#x10FFFF (InvalidMessageContents, see the
// SendMessage API reference), and with the escape every message is in that
// set while a JSON decoder still reads back the same string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, `\b`...)
			case '\f':
				b = append(b, `\f`...)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' || r == '\ufffe' || r == '\uffff' {
			b = append(append(b, s[start:i]...), '\\', 'u', hexDigits[r>>12], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}

// appendRef appends ,"name": and ref's JSON (a nested ref, rare enough
// for encoding/json).
func appendRef(b []byte, name string, ref any) ([]byte, error) {
	j, err := marshalNested(ref)
	if err != nil {
		return nil, err
	}
	b = append(append(append(b, `,"`...), name...), `":`...)
	return append(b, j...), nil
}

// marshalNested is v's JSON without HTML escaping, U+FFFE and U+FFFF
// escaped as appendString does (outside a string JSON holds neither).
func marshalNested(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return escapeNonCharacters(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// escapeNonCharacters rewrites U+FFFE and U+FFFF in JSON text as \ufffe
// and \uffff.
func escapeNonCharacters(j []byte) []byte {
	if !bytes.Contains(j, []byte("\xef\xbf\xbe")) && !bytes.Contains(j, []byte("\xef\xbf\xbf")) {
		return j
	}
	j = bytes.ReplaceAll(j, []byte("\xef\xbf\xbe"), []byte(`\ufffe`))
	return bytes.ReplaceAll(j, []byte("\xef\xbf\xbf"), []byte(`\uffff`))
}

// marshalReflect is marshal through encoding/json.
func marshalReflect(r Result) ([]byte, error) {
	b, err := marshalNested(r)
	if err != nil {
		return nil, fmt.Errorf("encode result %s: %w", r.ID, err)
	}
	return b, nil
}
