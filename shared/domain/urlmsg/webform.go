package urlmsg

import "strings"

// webForm does to a URL what the WHATWG URL parser
// (https://url.spec.whatwg.org/#concept-basic-url-parser) does to the
// characters around and inside its components, before Go's url.Parse reads
// it: a link is written for browsers, and a browser sends "/a b" as
// "/a%20b". It
//   - removes leading and trailing C0 controls and spaces;
//   - removes every ASCII tab and newline (a URL wrapped over lines);
//   - percent-encodes the path with the path percent-encode set, the query
//     with the query set (the special-query set, which adds ', for http,
//     https and the other special schemes) and the fragment with the
//     fragment set, all of which hold the C0 controls and every byte
//     above '~'.
//
// It works on bytes, not code points: a byte that is not part of valid
// UTF-8 is encoded as itself (0xFF is %FF), where the standard, reading
// characters, would have had U+FFFD. Nothing is ever replaced, so what a
// server receives is what the input said. Existing escapes are kept as
// written (the standard never decodes them); '%' is never encoded. The
// scheme and the authority are left to url.Parse and the host parser
// (parseHost: IDNA, forbidden code points). A URL that needs none of this
// comes back unchanged, so its normal form, and so its id, is what it was
// before this step existed.
func webForm(raw string) string {
	s := trimC0Space(raw)
	if strings.ContainsAny(s, "\t\n\r") {
		s = removeTabNewline(s)
	}
	rest, frag, hasFrag := strings.Cut(s, "#")
	rest, query, hasQuery := strings.Cut(rest, "?")
	scheme, afterScheme := splitScheme(rest)
	authority, path := "", afterScheme
	if strings.HasPrefix(afterScheme, "//") {
		end := strings.IndexByte(afterScheme[2:], '/')
		if end < 0 {
			end = len(afterScheme) - 2
		}
		authority, path = afterScheme[:2+end], afterScheme[2+end:]
	}
	qset := &querySet
	if isSpecial(scheme) {
		qset = &specialQuerySet
	}
	if !needsEncoding(path, &pathSet) && !needsEncoding(query, qset) && !needsEncoding(frag, &fragmentSet) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	if scheme != "" {
		b.WriteString(scheme)
		b.WriteByte(':')
	}
	b.WriteString(authority)
	encode(&b, path, &pathSet)
	if hasQuery {
		b.WriteByte('?')
		encode(&b, query, qset)
	}
	if hasFrag {
		b.WriteByte('#')
		encode(&b, frag, &fragmentSet)
	}
	return b.String()
}

// byteSet says which bytes a component percent-encodes.
type byteSet [256]bool

// c0ControlSet is the standard's C0 control percent-encode set, on bytes:
// the C0 controls and every byte above '~' (DEL, and each byte of a
// non-ASCII character, or a byte that is not UTF-8 at all).
var c0ControlSet = func() byteSet {
	var s byteSet
	for c := range 256 {
		s[c] = c < 0x20 || c > 0x7e
	}
	return s
}()

func (s byteSet) with(chars string) byteSet {
	for i := 0; i < len(chars); i++ {
		s[chars[i]] = true
	}
	return s
}

// The standard's sets (https://url.spec.whatwg.org/#percent-encoded-bytes).
var (
	fragmentSet     = c0ControlSet.with(" \"<>`")
	querySet        = c0ControlSet.with(" \"#<>")
	specialQuerySet = querySet.with("'")
	pathSet         = querySet.with("?^`{}")
)

// isSpecial: the standard's special schemes, whose query also encodes '.
func isSpecial(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "http", "https", "ws", "wss", "ftp", "file":
		return true
	}
	return false
}

// splitScheme returns the scheme (ASCII letter, then letters, digits, '+',
// '-', '.') and what follows its ':'; no scheme: "" and s.
func splitScheme(s string) (scheme, rest string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return s[:i], s[i+1:]
		default:
			return "", s
		}
	}
	return "", s
}

func needsEncoding(s string, set *byteSet) bool {
	for i := 0; i < len(s); i++ {
		if set[s[i]] {
			return true
		}
	}
	return false
}

func encode(b *strings.Builder, s string, set *byteSet) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !set[c] {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
}

// trimC0Space removes leading and trailing bytes up to U+0020, the
// standard's "C0 control or space" (byte-wise, so invalid UTF-8 is kept).
func trimC0Space(s string) string {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	return s[i:j]
}

// removeTabNewline drops every tab, LF and CR (byte-wise).
func removeTabNewline(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\t' && c != '\n' && c != '\r' {
			b = append(b, c)
		}
	}
	return string(b)
}
