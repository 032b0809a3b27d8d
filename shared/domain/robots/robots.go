// Package robots decides what robots.txt allows the downloader to fetch,
// following RFC 9309 (Robots Exclusion Protocol).
//
// The caller fetches /robots.txt for a host and hands the status and body to
// Parse; the resulting Rules are safe for concurrent use and cheap to store:
// keep Status() and Raw() and call Parse again to rebuild them.
//
// Status policy, following RFC 9309 §2.3.1 and Google's documented behaviour:
//   - 2xx: the rules in the body apply.
//   - 3xx: the caller follows the redirect itself, up to MaxRedirects hops,
//     through its usual address guard; if it is still redirected after that,
//     it treats robots.txt as missing: Parse(404, nil). Parse refuses a 3xx
//     with ErrRedirect so a forgotten hop cannot silently allow everything.
//   - 429 and 5xx (and any status outside 2xx-4xx): robots.txt is
//     unreachable; Parse returns ErrUnavailable and the caller must fetch
//     nothing from the host until it has tried again later (§2.3.1.4:
//     complete disallow).
//   - any other 4xx (401, 403, 404, 410, ...): there are no rules; everything
//     is allowed (§2.3.1.3).
//
// What RFC 9309 §2 asks, and this package does:
//   - Groups (§2.1, §2.2.1): consecutive user-agent lines open one group,
//     which the next user-agent line after a rule closes. The product token
//     is compared case-insensitively; every group naming it applies, merged
//     into one; without one, every "*" group applies, merged; with neither,
//     everything is allowed. A group that names the token but has no rules
//     allows everything: "*" rules never add to it. Rules before the first
//     user-agent line belong to no group and are ignored.
//   - Matching (§2.2.2, §2.2.3): a rule matches from the first octet of the
//     path (path and query, without the fragment); "*" matches any sequence
//     of octets, a final "$" anchors the end. The matching rule with the most
//     octets wins, Allow winning a tie; no match allows. An empty rule
//     matches nothing. /robots.txt is always allowed.
//   - Percent-encoding (§2.2.2): rule paths and the URL's path are brought
//     to one form before comparison. Octets outside US-ASCII, controls,
//     space and the other characters a URI may not hold ("<", "|", ...) are
//     percent-encoded; "%XX" of an unreserved character ([A-Za-z0-9-._~]) is
//     decoded; other escapes keep their meaning, with upper-case hex, so
//     %2F is not "/" and %2f is %2F. A "%" that starts no escape stands for
//     itself (%25). So "Disallow: /café" stops /caf%C3%A9 and /caf%c3%a9,
//     and "Disallow: /private" stops /%70rivate.
//   - Special characters in URLs (§2.2.3): a literal "*" or "$" in the URL
//     compares equal to %2A and %24, the way a rule names them.
//   - Parsing (§2.2, §2.3, §2.5): the first MaxBytes of the body are read,
//     cut back to a whole line. Lines end at CR, LF or CRLF; a UTF-8 byte
//     order mark is skipped; "#" starts a comment; keys are
//     case-insensitive. Unreadable lines are skipped, the rest is used.
//     Sitemap and unknown records are ignored and do not end a group (§2.2.4).
//
// Where this package is more lenient than RFC 9309's grammar, as Google's
// parser is, and why: sites write these, and reading them as meant is what
// the site asked for.
//   - A line without a colon is read when it is exactly two words
//     ("Disallow /tmp"); common misspellings of the keys are accepted
//     ("useragent", "user agent", "dissallow", ...).
//   - A user-agent value is cut at the first "/" or space
//     ("User-agent: ExampleBot/2.0" names ExampleBot), and "*" followed by
//     space and words is still "*". Tokens are otherwise compared whole,
//     digits included, where Google's parser would cut "bot2" to "bot".
//   - A rule's value runs to the comment or end of line, and any spaces in
//     it are encoded as %20 rather than ending the value.
//   - Crawl-delay, not part of RFC 9309, is read from the selected groups
//     (fractions kept; the largest when merged groups disagree; "inf" and
//     values past a time.Duration are Forever, never clamped) and, like a
//     rule, closes the user-agent lines above it into a group.
//
// Where RFC 9309 is read narrowly, and why: §2.2.2 says octets "in the
// reserved range" must be percent-encoded before comparison. Read literally
// that would turn every "/" and "?" into %2F and %3F; read as RFC 3986 §6.2.2
// reads URIs, a reserved character and its escape are different URIs, and
// only whoever built the URL knows which one a site means. So reserved
// characters are compared as they stand and their escapes as escapes:
// "Disallow: /q?u=https%3A%2F%2Fx" stops that URL, as the second row of the
// §2.2.2 table shows, but "Disallow: /q?u=https://x" does not stop it.
//
// Where it departs from Google's parser, following RFC 9309 instead: escapes
// of unreserved characters are decoded (Google compares %62 and b as
// different), a raw non-ASCII URL path is encoded before matching, lines are
// not truncated at 16 KiB, Sitemap and unknown lines do not close a group,
// and "index.html" is not treated as the directory.
package robots

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// MaxBytes is how much of a robots.txt is read (RFC 9309 §2.5 asks for at
// least 500 KiB); rules after it are ignored.
const MaxBytes = 500 << 10

// MaxRedirects is how many redirect hops the caller follows for robots.txt
// before treating it as missing (RFC 9309 asks for at least five).
const MaxRedirects = 5

// Forever is the Crawl-delay of a value too long for a time.Duration
// (about 292 years), "inf" and overflowing numbers such as 1e400
// included: more than any cap. The caller's own policy (e.g. "over 30 s:
// deny the URL") decides what to do with it; it is never clamped to a
// value the caller would honour.
const Forever = time.Duration(math.MaxInt64)

// ErrUnavailable means robots.txt could not be read (429, 5xx or an unusual
// status). The caller must not fetch from the host now and should retry the
// robots.txt later, as for a transient fetch error.
var ErrUnavailable = errors.New("robots.txt unavailable, retry later")

// ErrRedirect means Parse was given a 3xx: the caller must follow the
// Location (up to MaxRedirects hops) and parse the final answer.
var ErrRedirect = errors.New("robots.txt redirected, follow the location")

// Rules is the parsed robots.txt of one host. It is safe for concurrent use;
// a nil *Rules allows nothing.
type Rules struct {
	status int
	raw    []byte
	file   parsed

	// last is the selection made for the last product token asked about:
	// a deployment asks for one token only, so merging that token's groups
	// once per Rules is enough.
	last atomic.Pointer[selection]
}

// selection is what applies to one product token: its groups' rules merged
// and ordered so that the first match is the verdict.
type selection struct {
	token string
	rules []rule
	delay time.Duration
	asked string // the delay as the file wrote it
}

// Parse builds the Rules from the status and body of the final (non-3xx)
// answer to GET /robots.txt. Only the first MaxBytes of the body are used,
// cut back to a whole line: the caller must read at least MaxBytes+1
// octets when the file has them, or a line cut at the cap cannot be told
// from a whole one and counts as a rule. It returns an error wrapping ErrUnavailable for
// 429, 5xx and statuses outside 2xx-4xx, and ErrRedirect for 3xx. Lines it
// cannot read (a malformed Crawl-delay, a rule before any User-agent) are
// skipped, as RFC 9309 §2.3.1.5 asks, instead of failing the whole file.
func Parse(status int, body []byte) (*Rules, error) {
	switch {
	case status >= 200 && status < 300:
		raw := capBody(body)
		return &Rules{status: status, raw: raw, file: parse(raw)}, nil
	case status >= 300 && status < 400:
		return nil, fmt.Errorf("robots.txt answered %d: %w", status, ErrRedirect)
	case status == 429:
		// Google counts 429 with the server errors: the site asks us to
		// slow down, which is no permission to crawl everything.
		return nil, fmt.Errorf("robots.txt answered %d: %w", status, ErrUnavailable)
	case status >= 400 && status < 500:
		// No body is kept: there are no rules to re-parse.
		return &Rules{status: status}, nil
	default:
		return nil, fmt.Errorf("robots.txt answered %d: %w", status, ErrUnavailable)
	}
}

// Status returns the HTTP status the Rules were parsed from; store it with
// Raw to rebuild the Rules with Parse.
func (r *Rules) Status() int { return r.status }

// Raw returns the robots.txt text the Rules were parsed from, already capped
// at MaxBytes (nil for a 4xx). The caller must not modify it.
func (r *Rules) Raw() []byte { return r.raw }

// Allowed reports whether userAgent may fetch urlPath. urlPath is the path
// and query as requested (url.URL.RequestURI, percent-encoded or not); a
// full URL is accepted too, and a fragment is ignored. Groups are chosen by
// the product token of userAgent (see ProductToken), falling back to the
// "*" groups. /robots.txt itself is always allowed.
func (r *Rules) Allowed(userAgent, urlPath string) bool {
	if r == nil || r.status == 0 {
		// The zero Rules came from no Parse: nothing is known.
		return false
	}
	if len(r.file.groups) == 0 {
		return true
	}
	p := canonical(requestPath(urlPath), false)
	if p == "/robots.txt" {
		return true
	}
	rules := r.selectFor(ProductToken(userAgent)).rules
	for i := range rules {
		if rules[i].match(p) {
			return rules[i].allow
		}
	}
	return true
}

// CrawlDelay returns the Crawl-delay of the groups that apply to userAgent,
// or 0 when they set none. Fractions are kept ("0.5" is 500 ms); a value
// too long for a time.Duration, or infinite, is Forever.
func (r *Rules) CrawlDelay(userAgent string) time.Duration {
	if r == nil || len(r.file.groups) == 0 {
		return 0
	}
	return r.selectFor(ProductToken(userAgent)).delay
}

// CrawlDelayAsked returns the Crawl-delay that applies to userAgent as the
// file wrote it, in seconds ("1e9", "inf"), for messages that quote what
// the site asked for; "" when none applies.
func (r *Rules) CrawlDelayAsked(userAgent string) string {
	if r == nil || len(r.file.groups) == 0 {
		return ""
	}
	return r.selectFor(ProductToken(userAgent)).asked
}

// selectFor returns the merged groups for token, from the cache when the
// last caller asked for the same token.
func (r *Rules) selectFor(token string) *selection {
	if s := r.last.Load(); s != nil && s.token == token {
		return s
	}
	idx, ok := r.file.byToken[token]
	if !ok {
		idx = r.file.global
	}
	s := &selection{token: token}
	for _, g := range idx {
		s.rules = append(s.rules, r.file.groups[g].rules...)
		if d := r.file.groups[g].delay; d > s.delay {
			s.delay, s.asked = d, r.file.groups[g].asked
		}
	}
	// Most octets first, Allow first among equals: the first rule that
	// matches is then the verdict RFC 9309 §2.2.2 asks for.
	slices.SortStableFunc(s.rules, func(a, b rule) int {
		if c := cmp.Compare(b.octets, a.octets); c != 0 {
			return c
		}
		switch {
		case a.allow == b.allow:
			return 0
		case a.allow:
			return -1
		default:
			return 1
		}
	})
	r.last.Store(s)
	return s
}

// ProductToken returns the lower-cased product token of a User-Agent: the
// text before the first '/' or space, e.g. "urldownloader" for
// "urldownloader/1.0 (+https://example.com/bot)". robots.txt groups name
// this token, so it must come first in the User-Agent we send.
func ProductToken(userAgent string) string {
	s := strings.TrimSpace(userAgent)
	if i := strings.IndexAny(s, "/ \t"); i >= 0 {
		s = s[:i]
	}
	return strings.ToLower(s)
}
