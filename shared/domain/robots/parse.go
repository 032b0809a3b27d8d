package robots

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// parsed is a robots.txt read into groups, before any product token is
// known.
type parsed struct {
	groups  []group
	byToken map[string][]int // lower-cased product token -> its groups
	global  []int            // the "*" groups
}

// group is one run of user-agent lines and the lines that follow them.
type group struct {
	rules []rule
	delay time.Duration
	asked string // the delay as written
}

// capBody returns a copy of at most MaxBytes of body, cut back to the end of
// a line. Cutting mid-line could turn "Disallow: /private" into
// "Disallow: /", which blocks the whole site. A line that ends right at
// the cap (the next octet ends it) is whole and kept. The copy keeps the
// Rules independent of a buffer the caller may reuse.
func capBody(body []byte) []byte {
	if len(body) <= MaxBytes {
		return bytes.Clone(body)
	}
	b := body[:MaxBytes]
	if c := body[MaxBytes]; c == '\r' || c == '\n' {
		return bytes.Clone(b)
	}
	if i := bytes.LastIndexAny(b, "\r\n"); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	return bytes.Clone(b)
}

// Keys as sites write them, typos included; Google accepts the same ones.
// Keys are compared lower-cased, with inner white space as one space.
var keys = map[string]lineKind{
	"user-agent": userAgentLine, "useragent": userAgentLine, "user agent": userAgentLine,
	"allow":    allowLine,
	"disallow": disallowLine, "dissallow": disallowLine, "dissalow": disallowLine,
	"disalow": disallowLine, "diasllow": disallowLine, "disallaw": disallowLine,
	"crawl-delay": crawlDelayLine, "crawldelay": crawlDelayLine,
}

type lineKind int

const (
	otherLine lineKind = iota // Sitemap, Host, junk: never changes a verdict
	userAgentLine
	allowLine
	disallowLine
	crawlDelayLine
)

// parse reads the groups of a robots.txt body (already capped).
func parse(raw []byte) parsed {
	var f parsed
	text := strings.TrimPrefix(string(raw), "\uFEFF")
	open := -1       // the group user-agent lines add to, -1 before the first
	inRules := false // a rule has followed the open group's user-agent lines
	for len(text) > 0 {
		var line string
		if i := strings.IndexAny(text, "\r\n"); i >= 0 {
			// A CRLF leaves an empty line behind, which means nothing.
			line, text = text[:i], text[i+1:]
		} else {
			line, text = text, ""
		}
		kind, value := splitLine(line)
		switch kind {
		case userAgentLine:
			if open < 0 || inRules {
				f.groups = append(f.groups, group{})
				open, inRules = len(f.groups)-1, false
			}
			f.addAgent(agentToken(value), open)
		case allowLine, disallowLine:
			if open < 0 {
				continue // RFC 9309 §2.2.2: rules outside a group are ignored
			}
			inRules = true
			if r, ok := compileRule(value, kind == allowLine); ok {
				f.groups[open].rules = append(f.groups[open].rules, r)
			}
		case crawlDelayLine:
			if open < 0 {
				continue
			}
			// Even a malformed Crawl-delay closes the group: the site
			// meant it as a group member.
			inRules = true
			if d, asked, ok := parseDelay(value); ok && (d > f.groups[open].delay || f.groups[open].asked == "") {
				f.groups[open].delay, f.groups[open].asked = d, asked
			}
		}
	}
	return f
}

// addAgent records that group g applies to token.
func (f *parsed) addAgent(token string, g int) {
	switch token {
	case "":
		// "User-agent:" with no name still opens a group, for nobody.
	case "*":
		if n := len(f.global); n == 0 || f.global[n-1] != g {
			f.global = append(f.global, g)
		}
	default:
		if f.byToken == nil {
			f.byToken = make(map[string][]int)
		}
		if l := f.byToken[token]; len(l) == 0 || l[len(l)-1] != g {
			f.byToken[token] = append(l, g)
		}
	}
}

// splitLine returns what kind of line this is and its value, without the
// comment and surrounding white space. "Key: value" and "Key : value" are
// read alike; "Key value" only when it is exactly two words, so that a line
// of prose is not taken for a rule.
func splitLine(line string) (lineKind, string) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	line = trimSpace(line)
	var key, value string
	if i := strings.IndexByte(line, ':'); i >= 0 {
		key, value = line[:i], line[i+1:]
	} else if i := strings.IndexAny(line, " \t"); i >= 0 {
		key, value = line[:i], trimSpace(line[i+1:])
		if strings.ContainsAny(value, " \t") {
			return otherLine, ""
		}
	} else {
		return otherLine, ""
	}
	key = strings.ToLower(trimSpace(key))
	if strings.ContainsAny(key, " \t") {
		key = strings.Join(strings.Fields(key), " ")
	}
	return keys[key], trimSpace(value)
}

// trimSpace trims ASCII white space only: a non-breaking space or other
// non-ASCII octets at the end of a rule are part of its path.
func trimSpace(s string) string {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\v' || c == '\f' }
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// agentToken reduces a User-agent value to the lower-cased product token it
// names, so that "User-agent: URLDownloader/2.0" names the same group as
// "urldownloader", and "* (everyone)" is still "*".
func agentToken(v string) string {
	if i := strings.IndexAny(v, "/ \t"); i >= 0 {
		v = v[:i]
	}
	return strings.ToLower(v)
}

// parseDelay reads a Crawl-delay in seconds (its first word) and returns it
// with that word. A value too long for a time.Duration ("1e9" is not,
// "1e10", "1e400" and "inf" are) is Forever: a site asking for forever
// asks for more than any cap, not for nothing.
func parseDelay(v string) (time.Duration, string, bool) {
	if f := strings.Fields(v); len(f) > 0 {
		v = f[0]
	}
	// Out of float64's range, ParseFloat gives ±Inf (1e400) or 0 (1e-400)
	// with ErrRange: both are read as written.
	d, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || d < 0 || math.IsNaN(d) {
		return 0, "", false
	}
	if d >= float64(Forever)/float64(time.Second) {
		return Forever, v, true
	}
	return time.Duration(math.Round(d * float64(time.Second))), v, true
}
