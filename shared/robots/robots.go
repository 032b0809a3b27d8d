// Package robots decides what robots.txt allows the downloader to fetch.
//
// The caller fetches /robots.txt for a host and hands the status and body to
// Parse; the resulting Rules are immutable, safe for concurrent use and
// cheap to store: keep Status() and Raw() and call Parse again to rebuild
// them. Group and path matching (including the * and $ wildcards) is done by
// github.com/temoto/robotstxt; this package adds the status policy, the size
// cap and a lenient line reader in front of it.
//
// Status policy, following Google's documented behaviour and RFC 9309:
//   - 2xx: the rules in the body apply.
//   - 3xx: the caller follows the redirect itself, up to MaxRedirects hops,
//     through its usual address guard; if it is still redirected after that,
//     it treats robots.txt as missing: Parse(404, nil). Parse refuses a 3xx
//     with ErrRedirect so a forgotten hop cannot silently allow everything.
//   - 429 and 5xx (and any status outside 2xx-4xx): robots.txt is
//     unavailable; Parse returns ErrUnavailable and the caller must fetch
//     nothing from the host until it has tried again later.
//   - any other 4xx (401, 403, 404, 410, ...): there are no rules; everything
//     is allowed.
package robots

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/temoto/robotstxt"
)

// MaxBytes is how much of a robots.txt is read, like Google's 500 KiB limit;
// rules after it are ignored.
const MaxBytes = 500 << 10

// MaxRedirects is how many redirect hops the caller follows for robots.txt
// before treating it as missing (RFC 9309 asks for at least five).
const MaxRedirects = 5

// MaxCrawlDelay is the largest Crawl-delay a file can set. Larger values are
// clamped here because they would overflow a time.Duration; the caller's own
// policy (e.g. "over 30 s: deny the URL") decides what to do with it.
const MaxCrawlDelay = 24 * time.Hour

// ErrUnavailable means robots.txt could not be read (429, 5xx or an unusual
// status). The caller must not fetch from the host now and should retry the
// robots.txt later, as for a transient fetch error.
var ErrUnavailable = errors.New("robots.txt unavailable, retry later")

// ErrRedirect means Parse was given a 3xx: the caller must follow the
// Location (up to MaxRedirects hops) and parse the final answer.
var ErrRedirect = errors.New("robots.txt redirected, follow the location")

// Rules is the parsed robots.txt of one host. It is immutable and safe for
// concurrent use; a nil *Rules allows nothing.
type Rules struct {
	status int
	raw    []byte
	data   *robotstxt.RobotsData
}

// Parse builds the Rules from the status and body of the final (non-3xx)
// answer to GET /robots.txt. Only the first MaxBytes of the body are used,
// cut back to a whole line. It returns an error wrapping ErrUnavailable for
// 429, 5xx and statuses outside 2xx-4xx, and ErrRedirect for 3xx. Lines it
// cannot read (a malformed Crawl-delay, a rule before any User-agent) are
// skipped, as Google does, instead of failing the whole file.
func Parse(status int, body []byte) (*Rules, error) {
	switch {
	case status >= 200 && status < 300:
		raw := capBody(body)
		data, err := robotstxt.FromBytes(canonical(raw))
		if err != nil {
			// canonical only emits lines the library accepts, so this is a
			// bug here, not a problem with the site's file.
			return nil, fmt.Errorf("parse robots.txt: %w", err)
		}
		return &Rules{status: status, raw: raw, data: data}, nil
	case status >= 300 && status < 400:
		return nil, fmt.Errorf("robots.txt answered %d: %w", status, ErrRedirect)
	case status == 429:
		// Google counts 429 with the server errors: the site asks us to
		// slow down, which is no permission to crawl everything.
		return nil, fmt.Errorf("robots.txt answered %d: %w", status, ErrUnavailable)
	case status >= 400 && status < 500:
		// No body is kept: there are no rules to re-parse.
		data, _ := robotstxt.FromStatusAndBytes(404, nil)
		return &Rules{status: status, data: data}, nil
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
// and query as requested (url.URL.RequestURI, still percent-encoded); a full
// URL is accepted too. Groups are chosen by the product token of userAgent
// (see ProductToken), falling back to the "*" group. /robots.txt itself is
// always allowed.
func (r *Rules) Allowed(userAgent, urlPath string) bool {
	if r == nil || r.data == nil {
		return false
	}
	p := requestPath(urlPath)
	if p == "/robots.txt" {
		return true
	}
	return r.data.TestAgent(p, ProductToken(userAgent))
}

// CrawlDelay returns the Crawl-delay of the group that applies to userAgent,
// or 0 when it sets none. Fractions are kept ("0.5" is 500 ms).
func (r *Rules) CrawlDelay(userAgent string) time.Duration {
	if r == nil || r.data == nil {
		return 0
	}
	return r.data.FindGroup(ProductToken(userAgent)).CrawlDelay
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

// requestPath turns what the caller passed into the path-and-query form
// rules are matched against.
func requestPath(p string) string {
	if strings.Contains(p, "://") {
		if u, err := url.Parse(p); err == nil && u.Host != "" {
			return u.RequestURI()
		}
	}
	if p == "" {
		return "/"
	}
	if !strings.HasPrefix(p, "/") {
		return "/" + p
	}
	return p
}
