package params

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// HostRule is one per-host setting of the HostRules parameter: the hosts it
// matches and what it sets for them. Fields left out of the rule keep the
// parameters' own values.
type HostRule struct {
	// Match is a host name suffix ("example.com" matches example.com and
	// every name under it) or, when it holds *, ? or [, a glob over the
	// whole name (path.Match: "*.cdn.example.net", "img?.example.org").
	// Names are matched in lower case and without their port.
	Match string
	// Delay replaces FetchDelay for the matching hosts (robots.txt
	// Crawl-delay still raises it); HasDelay tells a rule that sets it.
	Delay    time.Duration
	HasDelay bool
	// MaxDelay caps the delay the engine raises for a slow or rate-limiting
	// host (the MaxDelay parameter's role); zero when the rule leaves it.
	MaxDelay time.Duration
	// Connections is how many requests the host may have in flight, each
	// connection keeping Delay between its own requests (1 when unset).
	Connections int
	// Prefix is set when Match is an address range (CIDR, "192.0.2.0/24"):
	// the rule then matches the addresses requests go to (MatchAddr),
	// never a host name, and sets server fields only.
	Prefix netip.Prefix
	// ServerDelay and ServerConnections replace the parameters of the same
	// names for the server addresses the rule's requests go over
	// (Params.ServerFor); HasServerDelay tells a rule that sets the delay,
	// ServerConnections is 0 when unset. ServerExempt paces those
	// requests per host only, as ServerExempt's ranges are.
	ServerDelay       time.Duration
	HasServerDelay    bool
	ServerConnections int
	ServerExempt      bool
}

func (r HostRule) hasServer() bool {
	return r.HasServerDelay || r.ServerConnections > 0 || r.ServerExempt
}

// HostRules is the parsed HostRules parameter: rules tried in order, the
// first whose Match fits a host applying to it. It is parsed once, when the
// parameter is read, and shared: the same text always yields the same
// value, so Params stay comparable with == and an unchanged parameter does
// not look changed. The zero value holds no rule.
type HostRules struct{ set *ruleSet }

type ruleSet struct {
	text  string // canonical JSON, what Format prints
	rules []HostRule
}

// Limits of a rule.
const (
	// MaxConnections bounds Connections: more than 16 requests at once to
	// one host is a load test, not a download.
	MaxConnections = 16
	// MaxRuleDelay bounds Delay and MaxDelay: a day, robots.txt's longest
	// Crawl-delay honoured by any peer.
	MaxRuleDelay = 24 * time.Hour
	// maxRules bounds the list, which is tried in order for every host.
	maxRules = 1000
)

// Rules returns the rules in order (a copy).
func (h HostRules) Rules() []HostRule {
	if h.set == nil {
		return nil
	}
	return slices.Clone(h.set.rules)
}

// Len is the number of rules.
func (h HostRules) Len() int {
	if h.set == nil {
		return 0
	}
	return len(h.set.rules)
}

// Match returns the first rule matching host (a host name, with or without
// a port), and false when none does.
func (h HostRules) Match(host string) (HostRule, bool) {
	if h.set == nil {
		return HostRule{}, false
	}
	name := strings.ToLower(stripPort(host))
	for _, r := range h.set.rules {
		if !r.Prefix.IsValid() && r.matches(name) {
			return r, true
		}
	}
	return HostRule{}, false
}

// MatchAddr returns the first rule whose address range (CIDR) holds addr,
// and false when none does; rules matching host names are skipped.
func (h HostRules) MatchAddr(addr netip.Addr) (HostRule, bool) {
	if h.set == nil || !addr.IsValid() {
		return HostRule{}, false
	}
	addr = addr.Unmap()
	for _, r := range h.set.rules {
		if r.Prefix.IsValid() && r.Prefix.Contains(addr) {
			return r, true
		}
	}
	return HostRule{}, false
}

// LongestDelay is the largest Delay of any rule, zero with none: a lease
// must outlive a request and the delay after it.
func (h HostRules) LongestDelay() time.Duration {
	var d time.Duration
	if h.set != nil {
		for _, r := range h.set.rules {
			d = max(d, r.Delay)
		}
	}
	return d
}

// NoHostRules is the form of an empty list: SSM refuses an empty value, and
// "none" reads better than [] in a parameter listing.
const NoHostRules = "none"

// String is the canonical JSON form, NoHostRules with no rule.
func (h HostRules) String() string {
	if h.set == nil {
		return NoHostRules
	}
	return h.set.text
}

func (r HostRule) matches(name string) bool {
	if isGlob(r.Match) {
		ok, _ := path.Match(r.Match, name) // the pattern was checked when parsed
		return ok
	}
	return name == r.Match || strings.HasSuffix(name, "."+r.Match)
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

func stripPort(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.Index(host, "]"); i > 0 {
			return host[1:i]
		}
		return host
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.Count(host, ":") == 1 {
		return host[:i]
	}
	return host
}

// ruleJSON is a rule as written by hand: durations as strings ("10s",
// "250ms") or whole seconds.
type ruleJSON struct {
	Match       string `json:"match"`
	Delay       string `json:"delay,omitempty"`
	MaxDelay    string `json:"maxDelay,omitempty"`
	Connections int    `json:"connections,omitempty"`
	// The server fields (see HostRule), after the host's own.
	ServerDelay       string `json:"serverDelay,omitempty"`
	ServerConnections int    `json:"serverConnections,omitempty"`
	ServerExempt      bool   `json:"serverExempt,omitempty"`
}

// interned keeps the value parsed from each text, so the parameter cache,
// which parses every parameter at each refresh, hands out the same value
// (and Params compare equal) while the text is unchanged.
var interned = struct {
	sync.Mutex
	m map[string]HostRules
}{m: map[string]HostRules{}}

// ParseHostRules reads a JSON list of rules, for example
//
//	[{"match": "cdn.example.net", "delay": "0s", "connections": 8},
//	 {"match": "*.fragile.example.gov", "delay": "10s", "maxDelay": "2m"}]
//
// Each rule needs match; delay, maxDelay (durations, or whole seconds) and
// connections (1 to 16) are optional, and so are the server fields
// serverDelay, serverConnections and serverExempt. A match that is an
// address range (CIDR: {"match": "192.0.2.0/24", "serverExempt": true})
// sets server fields only. "none", [] or an empty string is no rule. The
// error names the rule (its position from 1, and its match) and the field.
func ParseHostRules(s string) (HostRules, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "[]" || strings.EqualFold(s, NoHostRules) {
		return HostRules{}, nil
	}
	interned.Lock()
	h, ok := interned.m[s]
	interned.Unlock()
	if ok {
		return h, nil
	}
	h, err := parseHostRules(s)
	if err != nil {
		return HostRules{}, err
	}
	interned.Lock()
	defer interned.Unlock()
	if len(interned.m) >= 64 {
		// Operators change rules a few times a day; a bound keeps a
		// process fed odd values from growing without end.
		clear(interned.m)
	}
	if c, ok := interned.m[h.set.text]; ok {
		h = c // the same rules written differently
	} else {
		interned.m[h.set.text] = h
	}
	interned.m[s] = h
	return h, nil
}

func parseHostRules(s string) (HostRules, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return HostRules{}, fmt.Errorf(`not a JSON list of rules (want e.g. [{"match": "example.com", "delay": "10s"}]): %v`, err)
	}
	if len(raw) > maxRules {
		return HostRules{}, fmt.Errorf("%d rules, at most %d", len(raw), maxRules)
	}
	set := &ruleSet{}
	var canon []ruleJSON
	for i, m := range raw {
		r, j, err := parseRule(m)
		if err != nil {
			return HostRules{}, fmt.Errorf("rule %d%s: %w", i+1, ruleLabel(m), err)
		}
		set.rules = append(set.rules, r)
		canon = append(canon, j)
	}
	text, err := json.Marshal(canon)
	if err != nil {
		return HostRules{}, err
	}
	set.text = string(text)
	return HostRules{set: set}, nil
}

// ruleLabel names a rule by its match when it has a readable one.
func ruleLabel(m json.RawMessage) string {
	var r struct {
		Match any `json:"match"`
	}
	if json.Unmarshal(m, &r) == nil {
		if s, ok := r.Match.(string); ok && s != "" {
			return fmt.Sprintf(" (match %q)", s)
		}
	}
	return ""
}

// parseRule reads one rule and returns it with its canonical form.
func parseRule(m json.RawMessage) (HostRule, ruleJSON, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(m, &fields); err != nil || fields == nil {
		return HostRule{}, ruleJSON{}, errors.New(`not an object (want e.g. {"match": "example.com", "delay": "10s"})`)
	}
	var names []string
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	var r HostRule
	for _, name := range names {
		v := fields[name]
		var err error
		switch name {
		case "match":
			r.Match, err = parseMatch(v)
		case "delay":
			r.Delay, err = ruleDuration(v)
			r.HasDelay = err == nil
		case "maxDelay":
			r.MaxDelay, err = ruleDuration(v)
			if err == nil && r.MaxDelay == 0 {
				err = errors.New("must be longer than 0s")
			}
		case "connections":
			r.Connections, err = ruleConnections(v)
		case "serverDelay":
			r.ServerDelay, err = ruleDuration(v)
			if err == nil && r.ServerDelay > MaxServerDelay {
				err = fmt.Errorf("must be at most %s", formatDuration(MaxServerDelay))
			}
			r.HasServerDelay = err == nil
		case "serverConnections":
			r.ServerConnections, err = ruleConnections(v)
		case "serverExempt":
			if json.Unmarshal(v, &r.ServerExempt) != nil {
				err = errors.New("not a bool (want true or false)")
			}
		default:
			err = errors.New("unknown field (want match, delay, maxDelay, connections, serverDelay, serverConnections, serverExempt)")
		}
		if err != nil {
			return HostRule{}, ruleJSON{}, fmt.Errorf("field %s=%s: %w", name, v, err)
		}
	}
	if r.Match == "" {
		return HostRule{}, ruleJSON{}, errors.New("field match: missing (want a host name suffix or a glob)")
	}
	if p, ok := matchPrefix(r.Match); ok {
		// A range matches addresses, not hosts: what it sets is the
		// server's gate only.
		if r.HasDelay || r.MaxDelay > 0 || r.Connections > 0 {
			return HostRule{}, ruleJSON{}, fmt.Errorf("field match=%q: an address range sets serverDelay, serverConnections or serverExempt only (delay, maxDelay and connections are a host's)", r.Match)
		}
		r.Prefix, r.Match = p, p.String()
	}
	if r.MaxDelay > 0 && r.HasDelay && r.MaxDelay < r.Delay {
		return HostRule{}, ruleJSON{}, fmt.Errorf("field maxDelay=%q: must be at least the rule's delay (%s)",
			formatDuration(r.MaxDelay), formatDuration(r.Delay))
	}
	j := ruleJSON{Match: r.Match, Connections: r.Connections,
		ServerConnections: r.ServerConnections, ServerExempt: r.ServerExempt}
	if r.HasServerDelay {
		j.ServerDelay = formatDuration(r.ServerDelay)
	}
	if r.HasDelay {
		j.Delay = formatDuration(r.Delay)
	}
	if r.MaxDelay > 0 {
		j.MaxDelay = formatDuration(r.MaxDelay)
	}
	if r.Connections == 0 {
		r.Connections = 1
	}
	return r, j, nil
}

// matchPrefix reads a rule's match as an address range (CIDR).
func matchPrefix(s string) (netip.Prefix, bool) {
	if !strings.Contains(s, "/") {
		return netip.Prefix{}, false
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return p.Masked(), true
}

func parseMatch(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", errors.New("not a string")
	}
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, ".") // ".example.com" reads as the suffix it means
	switch {
	case s == "":
		return "", errors.New("must not be empty")
	case strings.Contains(s, "/") && !strings.ContainsAny(s, "@ "):
		if _, ok := matchPrefix(s); !ok {
			return "", errors.New("must be a host name, a glob over one, or an address range (CIDR such as 192.0.2.0/24), without scheme, port or path")
		}
		return s, nil
	case strings.ContainsAny(s, "/:@ "):
		return "", errors.New("must be a host name or a glob over one, without scheme, port or path")
	}
	if isGlob(s) {
		if _, err := path.Match(s, ""); err != nil {
			return "", fmt.Errorf("not a valid glob: %v", err)
		}
	}
	return s, nil
}

// ruleDuration reads a duration string ("10s") or whole seconds (10).
func ruleDuration(v json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		var n json.Number
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		if dec.Decode(&n) != nil {
			return 0, errors.New(`not a duration (want e.g. "10s", "250ms" or whole seconds 10)`)
		}
		s = n.String()
	}
	d, err := parseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, err
	}
	if d < 0 || d > MaxRuleDelay {
		return 0, fmt.Errorf("must be between 0s and %s", formatDuration(MaxRuleDelay))
	}
	return d, nil
}

func ruleConnections(v json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, errors.New("not a whole number")
	}
	if n < 1 || n > MaxConnections {
		return 0, fmt.Errorf("must be between 1 and %d", MaxConnections)
	}
	return n, nil
}
