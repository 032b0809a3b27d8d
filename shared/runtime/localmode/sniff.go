package localmode

import (
	"bytes"
	"fmt"
)

// NotTextError is returned by Run when an input read from its start is not
// UTF-8 text: compressed, UTF-16 or UTF-32, or binary. It is refused as a
// whole, before any line: each of its "lines" would be refused on its own
// with an error that does not say why, thousands of times.
type NotTextError struct {
	Name string
	// Kind is what the first bytes look like: gzip, bzip2, xz, zstd, zip,
	// UTF-16, UTF-32 or binary.
	Kind string
}

func (e *NotTextError) Error() string {
	return fmt.Sprintf("%s is not UTF-8 text: it looks like %s; nothing of it was read", e.Name, e.Looks())
}

// Looks says what the input looks like, in words.
func (e *NotTextError) Looks() string {
	switch e.Kind {
	case "UTF-16", "UTF-32":
		return e.Kind + " text"
	case "binary":
		return "binary data (NUL bytes throughout)"
	}
	return e.Kind + " data"
}

// sniffLen is how much of an input's start sniff looks at.
const sniffLen = 4096

// magics are the first bytes of formats a list of URLs is often kept in
// by mistake. The UTF-32 byte order marks come before UTF-16's, whose
// little-endian mark is their prefix (Unicode 15, section 23.8).
var magics = []struct {
	prefix []byte
	kind   string
}{
	{[]byte{0x1f, 0x8b}, "gzip"}, // RFC 1952, 2.3.1
	{[]byte("BZh"), "bzip2"},
	{[]byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, "xz"},
	{[]byte{0x28, 0xb5, 0x2f, 0xfd}, "zstd"}, // RFC 8878, 3.1.1
	{[]byte("PK\x03\x04"), "zip"},
	{[]byte{0xff, 0xfe, 0x00, 0x00}, "UTF-32"},
	{[]byte{0x00, 0x00, 0xfe, 0xff}, "UTF-32"},
	{[]byte{0xff, 0xfe}, "UTF-16"},
	{[]byte{0xfe, 0xff}, "UTF-16"},
}

// sniff says what an input's first bytes look like when they are not
// UTF-8 text, or "" when they may be. Text has no NUL bytes; UTF-16
// without a byte order mark has one in every other byte of ASCII, so more
// than one in eight is taken as not text, while a stray NUL is left to be
// refused with its line.
func sniff(start []byte) string {
	for _, m := range magics {
		if bytes.HasPrefix(start, m.prefix) {
			return m.kind
		}
	}
	if nul := bytes.Count(start, []byte{0}); len(start) > 0 && nul*8 > len(start) {
		if len(start) >= 2 && start[1] == 0 || start[0] == 0 {
			return "UTF-16"
		}
		return "binary"
	}
	return ""
}
