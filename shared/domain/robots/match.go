package robots

import "strings"

// rule is one Allow or Disallow line, compiled for matching without
// regular expressions.
type rule struct {
	allow bool
	// octets is the length of the canonical rule path, "*" and "$"
	// included: RFC 9309 §2.2.2's measure of how specific a match is.
	octets int
	// anchored is set by a final "$": the path must end where the rule does.
	anchored bool
	// parts are the literal pieces between the "*"s of the rule path; a rule
	// without "*" has one. The first piece is a prefix of the path (it is
	// empty when the rule starts with "*").
	parts []string
}

// compileRule turns the value of an Allow or Disallow line into a rule. It
// reports false for an empty value, which matches nothing.
func compileRule(value string, allow bool) (rule, bool) {
	if value == "" {
		return rule{}, false
	}
	r := rule{allow: allow}
	if strings.HasSuffix(value, "$") {
		// Only the last "$" anchors; any other is a literal dollar, which
		// canonical encodes.
		r.anchored = true
		value = value[:len(value)-1]
	}
	pat := canonical(value, true)
	r.octets = len(pat)
	if r.anchored {
		r.octets++
	}
	pieces := strings.Split(pat, "*")
	r.parts = pieces[:1]
	for _, p := range pieces[1:] {
		// "**" is one "*"; an empty last piece keeps the rule open-ended
		// or, anchored, lets "*$" end anywhere.
		if p != "" {
			r.parts = append(r.parts, p)
		}
	}
	if len(pieces) > 1 && pieces[len(pieces)-1] == "" {
		r.parts = append(r.parts, "")
	}
	return r, true
}

// match reports whether the rule matches p, a canonical path. Each "*"
// takes the leftmost place where the next piece fits: leaving the most
// path for the pieces after it, that finds a match whenever there is one,
// in time linear in the path for each piece, never backtracking.
func (r *rule) match(p string) bool {
	first := r.parts[0]
	if !strings.HasPrefix(p, first) {
		return false
	}
	if len(r.parts) == 1 {
		return !r.anchored || len(p) == len(first)
	}
	pos := len(first)
	middle := r.parts[1:]
	if r.anchored {
		middle = r.parts[1 : len(r.parts)-1]
	}
	for _, piece := range middle {
		i := strings.Index(p[pos:], piece)
		if i < 0 {
			return false
		}
		pos += i + len(piece)
	}
	if !r.anchored {
		return true
	}
	last := r.parts[len(r.parts)-1]
	return len(p)-pos >= len(last) && strings.HasSuffix(p, last)
}

// requestPath returns the path and query of target, a full URL or a
// request path, without its fragment; it always starts with "/".
func requestPath(target string) string {
	if i := strings.Index(target, "://"); i >= 0 && !strings.ContainsAny(target[:i], "/?#") {
		rest := target[i+3:]
		j := strings.IndexAny(rest, "/?#")
		if j < 0 {
			return "/"
		}
		target = rest[j:]
	}
	if i := strings.IndexByte(target, '#'); i >= 0 {
		target = target[:i]
	}
	if target == "" {
		return "/"
	}
	if target[0] != '/' {
		return "/" + target
	}
	return target
}

// canonical brings a URL path or, when pattern is set, a rule path into the
// one form RFC 9309 §2.2.2 compares them in:
//   - escapes of unreserved characters are decoded: %70 is p, %7E is ~;
//   - other escapes stay, upper-cased: %2f is %2F, never "/";
//   - octets outside US-ASCII, controls, space and the characters a URI may
//     not hold are encoded; so is a "%" that starts no escape;
//   - in a URL, "*" and "$" are encoded (%2A, %24), since a rule can name
//     them only that way (§2.2.3); in a rule, "*" stays the wildcard and a
//     "$" (the caller has removed the anchor) is a literal %24.
//
// It returns s itself when s is already canonical, which is the common case
// and costs no allocation.
func canonical(s string, pattern bool) string {
	i := 0
	for i < len(s) {
		n := canonicalAt(s, i, pattern)
		if n == 0 {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*(len(s)-i))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case verbatim[c] || (pattern && c == '*'):
			b.WriteByte(c)
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			if unreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[v>>4])
				b.WriteByte(upperHex[v&15])
			}
			i += 2
		default:
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		}
	}
	return b.String()
}

// canonicalAt returns how many octets at s[i:] are already canonical as they
// stand (1 or 3), or 0 if canonical would rewrite them.
func canonicalAt(s string, i int, pattern bool) int {
	c := s[i]
	switch {
	case verbatim[c] || (pattern && c == '*'):
		return 1
	case c == '%' && i+2 < len(s) && isUpperHex(s[i+1]) && isUpperHex(s[i+2]):
		if unreserved(unhex(s[i+1])<<4 | unhex(s[i+2])) {
			return 0
		}
		return 3
	default:
		return 0
	}
}

const upperHex = "0123456789ABCDEF"

// verbatim holds the octets a canonical path keeps as they are: RFC 3986's
// unreserved characters and those a path or query may hold unescaped, less
// "*" and "$", which robots.txt gives a meaning.
var verbatim = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~" + "!&'()+,;=" + ":@/?" {
		t[c] = true
	}
	return t
}()

// unreserved reports whether c is an RFC 3986 unreserved character, whose
// escape means the character itself.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isUpperHex(c byte) bool {
	return '0' <= c && c <= '9' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	default:
		return c - '0'
	}
}
