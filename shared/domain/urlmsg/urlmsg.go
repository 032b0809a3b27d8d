// Package urlmsg parses, validates and normalises the input messages that
// carry URLs into the downloader, from SQS records and from POST /urls.
//
// A payload is one JSON object {"host": "...", "url": "..."} or an array of
// them; each item is judged on its own so a bad item never fails its
// neighbours.
package urlmsg

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
)

// MaxURLLength is the longest URL accepted, in bytes after normalisation.
const MaxURLLength = 2048

// MaxItems is the most URLs one payload may carry; a larger array is rejected
// whole, because a producer that sends it is misbehaving and splitting it is
// its job.
const MaxItems = 1000

// MaxPayloadBytes is the largest payload accepted (the SQS message limit).
const MaxPayloadBytes = 1 << 20

// Input is one item as a producer sends it.
type Input struct {
	Host         string `json:"host"`
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	// ValidatorsURL is the URL etag and lastModified were recorded for,
	// when that is not URL: a result's validatorsUrl, the redirect target
	// that answered. The conditional request goes to it, when the
	// redirects reach it; URL's own request is then unconditional.
	ValidatorsURL string `json:"validatorsUrl,omitempty"`
	// Refresh asks for the URL to be fetched again at this interval (a Go
	// duration, "15m"); "0" stops its schedule (docs/refresh.md).
	Refresh string `json:"refresh,omitempty"`
	// RefreshAdapt lets the interval adapt to how often the content
	// changes; EmitUnchanged sends a result for unchanged fetches too.
	RefreshAdapt  bool `json:"refreshAdapt,omitempty"`
	EmitUnchanged bool `json:"emitUnchanged,omitempty"`
}

// Message is a validated, normalised URL ready to be queued.
type Message struct {
	// ID is stable for this accepted URL: derived from the source record id
	// and the item's position, so a redelivered record yields the same IDs.
	ID           string
	Host         string // normalised host[:port], the politeness key
	URL          string // normalised URL
	ETag         string
	LastModified string
	// ValidatorsURL is the normalised URL the validators belong to; empty
	// when they are URL's own (also when the input named URL itself).
	ValidatorsURL string
	// Refresh is the interval of a refreshing URL, within the bounds the
	// message was parsed with; 0 for a plain URL. RefreshStop is set for
	// refresh "0": the message ends the URL's schedule.
	Refresh       time.Duration
	RefreshStop   bool
	RefreshAdapt  bool
	EmitUnchanged bool
}

// Limits are the parameters an item is judged against beyond its own
// form: MinRefresh and MaxRefresh.
type Limits struct {
	Refresh refresh.Bounds
}

// LimitsOf returns the limits p sets.
func LimitsOf(p params.Params) Limits {
	return Limits{Refresh: refresh.Bounds{Min: p.MinRefresh, Max: p.MaxRefresh}}
}

// DefaultLimits are LimitsOf the default parameters: what Parse and
// Validate apply.
func DefaultLimits() Limits { return LimitsOf(params.Defaults()) }

// ErrInvalid is wrapped by every validation error, so callers can tell bad
// input (never retried) from internal failures (retried).
var ErrInvalid = errors.New("invalid input")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ItemError is the verdict on one item of a payload.
type ItemError struct {
	Index int    `json:"index"`
	URL   string `json:"url,omitempty"`
	Error string `json:"error"`
}

// Parse decodes a payload (object or array) and validates every item.
// sourceID identifies the record (SQS message id, API request id) and seeds
// the IDs. A payload-level problem (not JSON, too large) returns an error;
// item-level problems come back as ItemErrors beside the good messages.
func Parse(sourceID string, payload []byte) ([]Message, []ItemError, error) {
	return ParseLimited(sourceID, payload, DefaultLimits())
}

// ParseLimited is Parse with the items judged against lim: every entrance
// that knows the running parameters passes them.
func ParseLimited(sourceID string, payload []byte, lim Limits) ([]Message, []ItemError, error) {
	if len(payload) > MaxPayloadBytes {
		return nil, nil, invalid("payload is %d bytes, the limit is %d", len(payload), MaxPayloadBytes)
	}
	payload = TrimBOM(payload)
	if err := checkUTF8(payload); err != nil {
		return nil, nil, err
	}
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 {
		return nil, nil, invalid("payload is empty")
	}
	var raws []json.RawMessage
	if trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &raws); err != nil {
			return nil, nil, invalid("payload is not a JSON array of objects: %v", err)
		}
		if len(raws) == 0 {
			return nil, nil, invalid("payload is an empty array")
		}
		if len(raws) > MaxItems {
			return nil, nil, invalid("payload has %d items, the limit is %d", len(raws), MaxItems)
		}
	} else {
		if err := json.Unmarshal(trimmed, new(json.RawMessage)); err != nil {
			return nil, nil, invalid("payload is not one JSON object or an array of them: %v", err)
		}
		raws = []json.RawMessage{trimmed}
	}
	var msgs []Message
	var bad []ItemError
	for i, raw := range raws {
		in, err := decodeItem(raw)
		if err == nil {
			var m Message
			m, err = ValidateLimited(in, lim)
			if err == nil {
				m.ID = MakeID(sourceID, i, m.URL)
				msgs = append(msgs, m)
				continue
			}
		}
		bad = append(bad, ItemError{Index: i, URL: clip(redactRaw(in.URL), 200), Error: err.Error()})
	}
	return msgs, bad, nil
}

// decodeItem accepts an object (see decodeObject), or a bare JSON string
// holding a URL.
func decodeItem(raw json.RawMessage) (Input, error) {
	var in Input
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '"' {
		if err := json.Unmarshal(t, &in.URL); err != nil {
			return in, invalid("item is not a JSON string: %v", err)
		}
		return in, nil
	}
	if len(t) == 0 || t[0] != '{' {
		return in, invalid(`item is not an object {"url": ...} or a URL string`)
	}
	return decodeObject(t)
}

// Validate checks one input and returns it normalised (without an ID),
// under DefaultLimits.
func Validate(in Input) (Message, error) { return ValidateLimited(in, DefaultLimits()) }

// ValidateLimited is Validate under lim.
func ValidateLimited(in Input, lim Limits) (Message, error) {
	if in.URL == "" {
		return Message{}, invalid("url is empty")
	}
	u, err := Normalize(in.URL)
	if err != nil {
		return Message{}, err
	}
	host := u.Host
	if in.Host != "" {
		want, err := normalizeHostPort(in.Host, u.Scheme)
		if err != nil {
			return Message{}, invalid("host %q: %v", clip(in.Host, 100), err)
		}
		if want != host {
			return Message{}, invalid("host %q does not match the url's host %q", clip(in.Host, 100), host)
		}
	}
	if len(in.ETag) > 512 || len(in.LastModified) > 128 {
		return Message{}, invalid("etag or lastModified is too long")
	}
	if hasControl(in.ETag) || hasControl(in.LastModified) {
		return Message{}, invalid("etag or lastModified has control characters")
	}
	m := Message{Host: host, URL: u.String(), ETag: in.ETag, LastModified: in.LastModified}
	if m.ValidatorsURL, err = validatorsURL(in, m.URL); err != nil {
		return Message{}, err
	}
	if err := m.setRefresh(in, lim.Refresh); err != nil {
		return Message{}, err
	}
	return m, nil
}

// setRefresh reads in's refresh fields into m: an interval within b, or a
// stop. The flags without an interval are refused: they would say
// nothing, and more likely the interval was lost on the way.
func (m *Message) setRefresh(in Input, b refresh.Bounds) error {
	if in.Refresh == "" {
		if in.RefreshAdapt || in.EmitUnchanged {
			return invalid("refreshAdapt and emitUnchanged need a refresh interval (such as \"15m\")")
		}
		return nil
	}
	d, stop, err := refresh.ParseInterval(in.Refresh)
	if err != nil {
		return invalid("%v", err)
	}
	if stop {
		if in.RefreshAdapt || in.EmitUnchanged {
			return invalid(`refresh "0" stops a schedule: send it without refreshAdapt or emitUnchanged`)
		}
		m.RefreshStop = true
		return nil
	}
	if err := b.Check(d); err != nil {
		return invalid("%s", strings.TrimPrefix(err.Error(), refresh.ErrOutOfBounds.Error()+": "))
	}
	m.Refresh, m.RefreshAdapt, m.EmitUnchanged = d, in.RefreshAdapt, in.EmitUnchanged
	return nil
}

// validatorsURL checks in's validatorsUrl and returns it normalised, as
// redirect targets are (Normalize), so the worker finds its hop by plain
// comparison; "" when it is absent or names norm, the item's own URL. One
// without a validator is refused: it would say nothing, and is more likely
// a producer that lost the validators it meant to send.
func validatorsURL(in Input, norm string) (string, error) {
	if in.ValidatorsURL == "" {
		return "", nil
	}
	if in.ETag == "" && in.LastModified == "" {
		return "", invalid("validatorsUrl is set without etag or lastModified: it names the URL those were recorded for, so send them with it or drop it")
	}
	u, err := Normalize(in.ValidatorsURL)
	if err != nil {
		return "", invalid("validatorsUrl: %s", strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": "))
	}
	if v := u.String(); v != norm {
		return v, nil
	}
	return "", nil
}

// Normalize parses a URL and returns its canonical form: http or https only,
// lowercase scheme, the path, query and fragment read as the WHATWG URL
// standard reads them (surrounding spaces and controls dropped, tabs and
// newlines removed, spaces, controls and non-ASCII percent-encoded; see
// webForm), the host as the standard parses it (IDN as punycode, numeric
// IPv4 forms such as 0x7f.1 as dotted decimal, IPv6 compressed; see
// parseHost), default port and fragment removed, no user-info, at most
// MaxURLLength bytes.
func Normalize(raw string) (*url.URL, error) {
	if len(raw) > MaxURLLength {
		return nil, invalid("url is %d bytes, the limit is %d", len(raw), MaxURLLength)
	}
	web := webForm(raw)
	if web == "" {
		return nil, invalid("url is empty")
	}
	// The fragment is never sent, and the standard takes any: drop it
	// before url.Parse, which refuses some (a bad escape).
	web, _, _ = strings.Cut(web, "#")
	if strings.ContainsFunc(authority(web), func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, invalid("url %q: its host has a space or a control character, which no host name can hold (is it two URLs run together, or a URL cut short?)", clip(redactRaw(raw), 100))
	}
	u, err := url.Parse(web)
	if err != nil {
		return nil, invalid("url %q does not parse: %v%s", clip(redactRaw(raw), 100), unwrapURLError(err), escapeHint(err))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalid("url %q: scheme must be http or https", clip(redactRaw(raw), 100))
	}
	if u.Opaque != "" {
		return nil, invalid("url %q is not hierarchical (want scheme://host/path)", clip(redactRaw(raw), 100))
	}
	if u.User != nil {
		return nil, invalid("url %q carries user-info, which is not accepted (credentials must not travel in URLs)", clip(redactUser(u), 100))
	}
	host, err := normalizeHostPort(u.Host, u.Scheme)
	if err != nil {
		return nil, invalid("url %q: %v", clip(redactRaw(raw), 100), err)
	}
	u.Host = host
	if u.Path == "" {
		u.Path = "/"
		u.RawPath = ""
	}
	if s := u.String(); len(s) > MaxURLLength {
		return nil, invalid("normalised url is %d bytes, the limit is %d", len(s), MaxURLLength)
	}
	return u, nil
}

// normalizeHostPort returns host[:port] in canonical form (see parseHost),
// without the scheme's default port.
func normalizeHostPort(hostport, scheme string) (string, error) {
	if hostport == "" {
		return "", errors.New("host is empty")
	}
	host, port := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
		}
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = ""
		} else {
			port = strconv.Itoa(n)
		}
	}
	host, err := parseHost(host)
	if err != nil {
		return "", err
	}
	if port != "" {
		return host + ":" + port, nil
	}
	return host, nil
}

// MakeID derives the stable result id of an accepted URL.
func MakeID(sourceID string, index int, normURL string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n%s", sourceID, index, normURL)
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// redactRaw hides the user-info of a URL that may not even parse, so a
// password never comes back in an error or a response.
func redactRaw(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return raw
	}
	return scheme + "://REDACTED@" + rest[at+1:]
}

func redactUser(u *url.URL) string {
	c := *u
	c.User = url.User("REDACTED")
	return c.String()
}

// authority returns the part of a URL between "scheme://" and the path
// (empty when it has no "//").
func authority(s string) string {
	_, rest := splitScheme(s)
	rest, ok := strings.CutPrefix(rest, "//")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		return rest[:i]
	}
	return rest
}

// escapeHint says what to change when url.Parse refused a '%' that does not
// start an escape. Browsers send such a path as it is; Go's client cannot,
// so it is refused rather than sent as something else.
func escapeHint(err error) string {
	var ee url.EscapeError
	if errors.As(err, &ee) {
		return " (a '%' must start an escape such as %20: write a literal '%' as %25)"
	}
	return ""
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
