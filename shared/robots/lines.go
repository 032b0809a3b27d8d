package robots

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// capBody returns a copy of at most MaxBytes of body, cut back to the end of
// a line. Cutting mid-line could turn "Disallow: /private" into
// "Disallow: /", which blocks the whole site. The copy keeps the Rules
// independent of a buffer the caller may reuse.
func capBody(body []byte) []byte {
	if len(body) <= MaxBytes {
		return bytes.Clone(body)
	}
	b := body[:MaxBytes]
	if i := bytes.LastIndexAny(b, "\r\n"); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	return bytes.Clone(b)
}

// Keys as sites write them, typos included; Google accepts the same ones.
var (
	userAgentKeys  = map[string]bool{"user-agent": true, "useragent": true, "user agent": true}
	disallowKeys   = map[string]bool{"disallow": true, "dissallow": true, "dissalow": true, "disalow": true, "diasllow": true, "disallaw": true}
	allowKeys      = map[string]bool{"allow": true}
	crawlDelayKeys = map[string]bool{"crawl-delay": true, "crawldelay": true}
)

// canonical rewrites a robots.txt into one "Key: value" line per directive
// the library understands. The library rejects a whole file for one bad
// line (a Crawl-delay that is not a number, a rule before any User-agent)
// and reads "Key : value" or "Key value" wrongly; real files contain all
// of these. Lines that are not group directives (Sitemap, Host, junk) are
// dropped: they never change a verdict.
func canonical(raw []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(raw))
	seenAgent := false
	text := strings.TrimPrefix(string(raw), "\uFEFF")
	for line := range strings.Lines(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(text)) {
		key, value, ok := splitLine(line)
		if !ok {
			continue
		}
		switch {
		case userAgentKeys[key]:
			seenAgent = true
			out.WriteString("User-agent: " + agentToken(value) + "\n")
		case !seenAgent:
			// A rule outside any group applies to nobody.
		case disallowKeys[key]:
			// An empty value matches nothing but still closes the group,
			// so it is kept: a following User-agent starts a new group.
			out.WriteString("Disallow: " + value + "\n")
		case allowKeys[key]:
			out.WriteString("Allow: " + value + "\n")
		case crawlDelayKeys[key]:
			if d, ok := parseDelay(value); ok {
				out.WriteString("Crawl-delay: " + strconv.FormatFloat(d, 'f', -1, 64) + "\n")
			} else {
				// Dropping the line would merge this group with the next
				// one; a valid Crawl-delay would have closed it, so an
				// empty Disallow (a no-op) stands in for it.
				out.WriteString("Disallow: \n")
			}
		}
	}
	return out.Bytes()
}

// splitLine returns the lower-cased key and the first word of the value of
// one line, without its comment. "Key: value", "Key : value" and
// "Key value" are all read alike.
func splitLine(line string) (key, value string, ok bool) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	line = strings.TrimSpace(line)
	if line == "" {
		return "", "", false
	}
	if i := strings.IndexByte(line, ':'); i >= 0 {
		key, value = line[:i], line[i+1:]
	} else if i := strings.IndexAny(line, " \t"); i >= 0 {
		key, value = line[:i], line[i+1:]
	} else {
		return "", "", false
	}
	key = strings.ToLower(strings.Join(strings.Fields(key), " "))
	if f := strings.Fields(value); len(f) > 0 {
		value = f[0]
	} else {
		value = ""
	}
	return key, value, key != ""
}

// agentToken reduces a User-agent value to its product token, so that
// "User-agent: urldownloader/2.0" names the same group as "urldownloader".
func agentToken(v string) string {
	if i := strings.IndexByte(v, '/'); i > 0 {
		v = v[:i]
	}
	return v
}

// parseDelay reads a Crawl-delay in seconds, clamped to MaxCrawlDelay.
func parseDelay(v string) (float64, bool) {
	d, err := strconv.ParseFloat(v, 64)
	if err != nil || d < 0 || math.IsNaN(d) || math.IsInf(d, 0) {
		return 0, false
	}
	return min(d, MaxCrawlDelay.Seconds()), true
}
