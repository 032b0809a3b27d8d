package urlmsg

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// bom is the UTF-8 byte order mark some editors (Notepad, Excel's "CSV
// UTF-8") put at the start of a file.
var bom = []byte{0xef, 0xbb, 0xbf}

// TrimBOM returns b without a leading UTF-8 byte order mark. Every
// entrance skips one (RFC 8259 §8.1 lets a JSON reader do so): a file,
// stdin, a POST /urls body, a queue message, and each line of a URL list,
// so that files joined with cat read as the files did.
func TrimBOM(b []byte) []byte {
	return bytes.TrimPrefix(b, bom)
}

// c0Space holds the bytes a line is trimmed of: C0 controls and space, as
// the URL parser trims a URL (JSON's whitespace is among them).
const c0Space = "\x00\x01\x02\x03\x04\x05\x06\x07\x08\t\n\x0b\x0c\r\x0e\x0f" +
	"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f "

// LineBody turns one line of a URL list (a file, stdin) into the input
// queue message body that carries it, and the number of items in it, so
// that the line is judged by Parse as a queue message is. A JSON object,
// array or string is sent as written; a bare URL is sent as a JSON string,
// its bytes that are not UTF-8 percent-encoded (0xFF as %FF, which is what
// the URL parser makes of them in a path or query; a JSON string could not
// carry them). A blank line, or one starting with '#', gives a nil body. A
// line that is not even JSON of the shape it starts with is refused here.
func LineBody(line []byte) (body []byte, items int, err error) {
	text := bytes.Trim(TrimBOM(line), c0Space)
	switch {
	case len(text) == 0 || text[0] == '#':
		return nil, 0, nil
	case text[0] == '{':
		if err := json.Unmarshal(text, new(json.RawMessage)); err != nil {
			return nil, 0, invalid("not a JSON object: %v", err)
		}
		return text, 1, nil
	case text[0] == '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(text, &raws); err != nil {
			return nil, 0, invalid("not a JSON array: %v", err)
		}
		return text, len(raws), nil
	case text[0] == '"':
		return text, 1, nil
	default:
		b, _ := json.Marshal(string(encodeInvalidUTF8(text)))
		return b, 1, nil
	}
}

// encodeInvalidUTF8 percent-encodes the bytes of b that are not part of
// valid UTF-8, and keeps the rest.
func encodeInvalidUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	const hex = "0123456789ABCDEF"
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = append(out, '%', hex[b[0]>>4], hex[b[0]&15])
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// checkUTF8 refuses a payload that is not UTF-8, saying where and what to
// do: JSON is UTF-8 (RFC 8259 §8.1), and replacing a byte with U+FFFD would
// queue a URL the producer never wrote.
func checkUTF8(b []byte) error {
	if utf8.Valid(b) {
		return nil
	}
	if bytes.HasPrefix(b, []byte{0xff, 0xfe}) || bytes.HasPrefix(b, []byte{0xfe, 0xff}) {
		return invalid("payload is UTF-16 (it starts with a UTF-16 byte order mark): save or send it as UTF-8")
	}
	off := 0
	for off < len(b) {
		r, n := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		off += n
	}
	return invalid("payload is not valid UTF-8: byte 0x%02X at offset %d; send UTF-8, with a URL's raw bytes percent-encoded (%%%02X)", b[off], off, b[off])
}
