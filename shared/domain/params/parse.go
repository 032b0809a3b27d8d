package params

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds that keep a mistyped value from hurting a site or the downloader.
const (
	// MinCheckHostPeriod is the exclusive lower bound of CheckHostPeriod:
	// YT Flow's rule, so a host's timer cannot fire in a tight loop.
	MinCheckHostPeriod = time.Second
	// MaxFetchTimeout bounds FetchTimeout so one slow site cannot hold a
	// check invocation (and its lease on the host) for most of its run.
	MaxFetchTimeout = 5 * time.Minute
	// MaxMaxBodyBytes bounds MaxBodyBytes: 1 GiB. A body larger than
	// InlineBodyBytes is streamed to the body store (S3, or a local
	// folder) as it is read, so the cap bounds storage and transfer, not
	// memory; one request must still finish within FetchTimeout.
	MaxMaxBodyBytes = 1 << 30
	// MinInlineBodyBytes and MaxInlineBodyBytes bound InlineBodyBytes: a
	// result always carries at least a small body inline, and never more
	// than SQS's largest message (1 MiB); the engine also caps it by the
	// output queue's own message size.
	MinInlineBodyBytes = 1 << 10
	MaxInlineBodyBytes = 1 << 20
	// MaxMaxConcurrentHosts bounds MaxConcurrentHosts so one invocation
	// cannot open more sockets than a Lambda sandbox allows.
	MaxMaxConcurrentHosts = 10000
	// MinRobotsTTL is the shortest robots.txt cache life: below it a site
	// would see robots.txt fetched almost as often as its pages.
	MinRobotsTTL = time.Minute
	// MaxMaxAttempts bounds MaxAttempts so a dead URL cannot cycle for days.
	MaxMaxAttempts = 20
	// MaxPersistLimit bounds PersistLimit so a host's stored state stays
	// under DynamoDB's 400 KB item limit in the worst case: every URL
	// 2048 bytes and appended alone (one chunk reference each), each with
	// a failed-attempt counter (shared/aws/dynamo tests the bound).
	MaxPersistLimit = 4000
	// MinGiveUpAfter is the shortest GiveUpAfter: a host gets at least a
	// few probes before its URLs are given up.
	MinGiveUpAfter = time.Second
	// MaxGiveUpAfter bounds GiveUpAfter so a dead host's URLs end within
	// a week, well inside a queue's retention.
	MaxGiveUpAfter = 7 * 24 * time.Hour
	// MinMinRefresh keeps a refreshing URL from being a polling loop: a
	// page wanted more often than every 10 s is a stream, not a page.
	MinMinRefresh = 10 * time.Second
	// MaxMaxRefresh bounds MaxRefresh at 30 days: a schedule slower than
	// that is better sent again by its producer when wanted.
	MaxMaxRefresh = 30 * 24 * time.Hour
	// MaxMaxRefreshPerHost bounds MaxRefreshPerHost: every refreshing URL
	// of a host is read when the host's refreshes are due at once.
	MaxMaxRefreshPerHost = 10000
)

// FieldError is one rejected parameter: its name, the value as given, and
// why it was refused. It is what an operator needs to fix the value.
type FieldError struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Reason string `json:"reason"`
}

// Error formats the field as name="value": reason.
func (e FieldError) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Name, e.Value, e.Reason)
}

// InvalidError lists every parameter Parse or Validate refused, so one
// message shows every value to fix instead of the first one only.
// Read it with errors.As.
type InvalidError struct {
	Fields []FieldError
}

// Error joins the fields on one line, which keeps a JSON log record readable.
func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Error()
	}
	return "invalid parameters: " + strings.Join(parts, "; ")
}

// Parse applies raw name->value strings over base and returns the result
// with every refused value listed in one *InvalidError (nil when all were
// taken). It never fails as a whole: each valid value replaces base's, each
// invalid one keeps base's, and a name that is not a parameter is reported
// (so a typo in a name shows) without affecting the others.
//
// Values are trimmed of surrounding space first, since values typed into a
// console often carry a newline. Forms accepted:
//   - durations: time.ParseDuration ("5s", "200ms", "1m30s") or a bare whole
//     number of seconds ("5" is 5s), because operators write both;
//   - numbers: decimal integers;
//   - bools: strconv.ParseBool (true/false, 1/0, t/f);
//   - QueueMode: "host" or "domain", in any case;
//   - ResultBodyEncoding: "plain" or "gzip", in any case;
//   - HostRules: a JSON list of rules (ParseHostRules), "none" for none.
//
// Rules between fields (MaxBackoff >= FetchDelay) are checked on the result;
// when one breaks, every field of the rule keeps its base value and the rule
// is reported against its first field. A base value that is itself invalid
// is replaced by the default and reported too, so the result always passes
// Validate: callers may run with it whatever the error says.
func Parse(raw map[string]string, base Params) (Params, error) {
	var bad []FieldError
	def := Defaults()

	p := base
	for _, f := range fields {
		if err := f.check(&p); err != nil {
			bad = append(bad, FieldError{Name: f.name, Value: f.format(&p),
				Reason: fmt.Sprintf("base value %s; using the default %q", err, f.format(&def))})
			f.copy(&p, &def)
		}
	}
	bad = append(bad, enforceRules(&p, &def, "base values")...)
	base = p

	for _, f := range fields {
		s, ok := raw[f.name]
		if !ok {
			continue
		}
		if err := f.set(&p, strings.TrimSpace(s)); err != nil {
			bad = append(bad, FieldError{Name: f.name, Value: s, Reason: err.Error()})
		}
	}
	var unknown []string
	for name := range raw {
		if fieldByName(name) == nil {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		bad = append(bad, FieldError{Name: name, Value: raw[name], Reason: unknownReason(name)})
	}
	bad = append(bad, enforceRules(&p, &base, "")...)

	if len(bad) > 0 {
		return p, &InvalidError{Fields: bad}
	}
	return p, nil
}

// unknownReason suggests the real name when only the case differs, the
// most common slip when a name is typed by hand.
func unknownReason(name string) string {
	for _, f := range fields {
		if strings.EqualFold(f.name, name) {
			return fmt.Sprintf("unknown parameter (did you mean %s?)", f.name)
		}
	}
	return "unknown parameter"
}

// enforceRules reverts the fields of every broken rule to fallback's values
// until all rules hold, and reports each broken rule once. It terminates
// because fallback satisfies every rule: a rule whose fields all equal
// fallback's cannot break again, and each revert makes one more field equal.
func enforceRules(p, fallback *Params, what string) []FieldError {
	var bad []FieldError
	for again := true; again; {
		again = false
		for _, r := range rules {
			err := r.check(p)
			if err == nil {
				continue
			}
			fe := r.fieldError(p, err)
			if what != "" {
				fe.Reason = fmt.Sprintf("%s %s; using the defaults", what, fe.Reason)
			}
			bad = append(bad, fe)
			for _, name := range r.fields {
				fieldByName(name).copy(p, fallback)
			}
			again = true
		}
	}
	return bad
}

// field describes one parameter: how to read, write, print and check it.
type field struct {
	name   string
	set    func(p *Params, s string) error // parse and check s, store only if valid
	format func(p *Params) string
	check  func(p *Params) error
	copy   func(dst, src *Params)
}

// newField builds a field from a pointer to the Params member, so each
// parameter is declared once with its parser, printer and bounds.
func newField[T any](name string, ptr func(*Params) *T, parse func(string) (T, error),
	format func(T) string, check func(T) error) field {
	return field{
		name: name,
		set: func(p *Params, s string) error {
			v, err := parse(s)
			if err != nil {
				return err
			}
			if err := check(v); err != nil {
				return err
			}
			*ptr(p) = v
			return nil
		},
		format: func(p *Params) string { return format(*ptr(p)) },
		check:  func(p *Params) error { return check(*ptr(p)) },
		copy:   func(dst, src *Params) { *ptr(dst) = *ptr(src) },
	}
}

func durationField(name string, ptr func(*Params) *time.Duration, check func(time.Duration) error) field {
	return newField(name, ptr, parseDuration, formatDuration, check)
}

func intField(name string, ptr func(*Params) *int, check func(int64) error) field {
	return newField(name, ptr, parseInt, strconv.Itoa, func(v int) error { return check(int64(v)) })
}

func boolField(name string, ptr func(*Params) *bool) field {
	return newField(name, ptr, parseBool, strconv.FormatBool, func(bool) error { return nil })
}

// fields lists every parameter in the order of Names.
var fields = []field{
	durationField(NameCheckHostPeriod, func(p *Params) *time.Duration { return &p.CheckHostPeriod },
		func(d time.Duration) error {
			if d <= MinCheckHostPeriod {
				return fmt.Errorf("must be longer than %s", formatDuration(MinCheckHostPeriod))
			}
			return nil
		}),
	intField(NamePersistLimit, func(p *Params) *int { return &p.PersistLimit }, between(1, MaxPersistLimit)),
	durationField(NameFetchDelay, func(p *Params) *time.Duration { return &p.FetchDelay }, notNegative),
	durationField(NameFetchTimeout, func(p *Params) *time.Duration { return &p.FetchTimeout },
		func(d time.Duration) error {
			if d <= 0 || d > MaxFetchTimeout {
				return fmt.Errorf("must be longer than 0s and at most %s", formatDuration(MaxFetchTimeout))
			}
			return nil
		}),
	newField(NameMaxBodyBytes, func(p *Params) *int64 { return &p.MaxBodyBytes }, parseInt64,
		func(v int64) string { return strconv.FormatInt(v, 10) },
		between(1, MaxMaxBodyBytes)),
	newField(NameInlineBodyBytes, func(p *Params) *int64 { return &p.InlineBodyBytes }, parseInt64,
		func(v int64) string { return strconv.FormatInt(v, 10) },
		between(MinInlineBodyBytes, MaxInlineBodyBytes)),
	newField(NameResultBodyEncoding, func(p *Params) *BodyEncoding { return &p.ResultBodyEncoding },
		func(s string) (BodyEncoding, error) { return BodyEncoding(strings.ToLower(s)), nil },
		func(e BodyEncoding) string { return string(e) },
		func(e BodyEncoding) error {
			if e != BodyPlain && e != BodyGzip {
				return fmt.Errorf("must be %q or %q", BodyPlain, BodyGzip)
			}
			return nil
		}),
	intField(NameMaxConcurrentHosts, func(p *Params) *int { return &p.MaxConcurrentHosts }, between(1, MaxMaxConcurrentHosts)),
	newField(NameUserAgent, func(p *Params) *string { return &p.UserAgent },
		func(s string) (string, error) { return s, nil },
		func(s string) string { return s },
		checkUserAgent),
	boolField(NameRespectRobots, func(p *Params) *bool { return &p.RespectRobots }),
	durationField(NameRobotsTTL, func(p *Params) *time.Duration { return &p.RobotsTTL },
		func(d time.Duration) error {
			if d < MinRobotsTTL {
				return fmt.Errorf("must be at least %s", formatDuration(MinRobotsTTL))
			}
			return nil
		}),
	durationField(NameMaxCrawlDelay, func(p *Params) *time.Duration { return &p.MaxCrawlDelay },
		func(d time.Duration) error {
			if d > MaxMaxCrawlDelay {
				return fmt.Errorf("must be at most %s", formatDuration(MaxMaxCrawlDelay))
			}
			return notNegative(d)
		}),
	newField(NameDelayFactor, func(p *Params) *float64 { return &p.DelayFactor },
		func(s string) (float64, error) { return strconv.ParseFloat(strings.TrimSpace(s), 64) },
		func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) },
		func(f float64) error {
			if !(f >= 0 && f <= MaxDelayFactor) {
				return fmt.Errorf("must be between 0 and %d", MaxDelayFactor)
			}
			return nil
		}),
	durationField(NameMaxDelay, func(p *Params) *time.Duration { return &p.MaxDelay }, notNegative),
	durationField(NameMaxBackoff, func(p *Params) *time.Duration { return &p.MaxBackoff },
		func(d time.Duration) error {
			if d <= 0 {
				return errors.New("must be longer than 0s")
			}
			return nil
		}),
	intField(NameMaxAttempts, func(p *Params) *int { return &p.MaxAttempts }, between(1, MaxMaxAttempts)),
	boolField(NameFollowCrossHostRedirects, func(p *Params) *bool { return &p.FollowCrossHostRedirects }),
	boolField(NameRandomizeDelay, func(p *Params) *bool { return &p.RandomizeDelay }),
	newField(NameQueueMode, func(p *Params) *QueueMode { return &p.QueueMode },
		func(s string) (QueueMode, error) { return QueueMode(strings.ToLower(s)), nil },
		func(m QueueMode) string { return string(m) },
		func(m QueueMode) error {
			if m != QueueByHost && m != QueueByDomain {
				return fmt.Errorf("must be %q or %q", QueueByHost, QueueByDomain)
			}
			return nil
		}),
	newField(NameAllowedPorts, func(p *Params) *string { return &p.AllowedPorts },
		parsePorts, func(s string) string { return s }, func(s string) error { _, err := parsePorts(s); return err }),
	durationField(NameGiveUpAfter, func(p *Params) *time.Duration { return &p.GiveUpAfter },
		func(d time.Duration) error {
			if d < MinGiveUpAfter || d > MaxGiveUpAfter {
				return fmt.Errorf("must be between %s and %s", formatDuration(MinGiveUpAfter), formatDuration(MaxGiveUpAfter))
			}
			return nil
		}),
	durationField(NameServerDelay, func(p *Params) *time.Duration { return &p.ServerDelay },
		func(d time.Duration) error {
			if d < 0 || d > MaxServerDelay {
				return fmt.Errorf("must be between 0s (no gate) and %s", formatDuration(MaxServerDelay))
			}
			return nil
		}),
	intField(NameServerConnections, func(p *Params) *int { return &p.ServerConnections }, between(1, MaxConnections)),
	newField(NameServerExempt, func(p *Params) *Exempt { return &p.ServerExempt },
		ParseExempt, Exempt.String, func(Exempt) error { return nil }),
	durationField(NameMinRefresh, func(p *Params) *time.Duration { return &p.MinRefresh },
		func(d time.Duration) error {
			if d < MinMinRefresh || d > 24*time.Hour {
				return fmt.Errorf("must be between %s and 24h", formatDuration(MinMinRefresh))
			}
			return nil
		}),
	durationField(NameMaxRefresh, func(p *Params) *time.Duration { return &p.MaxRefresh },
		func(d time.Duration) error {
			if d < MinMinRefresh || d > MaxMaxRefresh {
				return fmt.Errorf("must be between %s and %s", formatDuration(MinMinRefresh), formatDuration(MaxMaxRefresh))
			}
			return nil
		}),
	intField(NameMaxRefreshPerHost, func(p *Params) *int { return &p.MaxRefreshPerHost }, between(0, MaxMaxRefreshPerHost)),
	newField(NameHostRules, func(p *Params) *HostRules { return &p.HostRules },
		ParseHostRules, HostRules.String, func(HostRules) error { return nil }),
}

// parsePorts reads a comma-separated list of ports into its canonical form.
func parsePorts(s string) (string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%q is not a port from 1 to 65535", strings.TrimSpace(f))
		}
		out = append(out, strconv.Itoa(n))
	}
	return strings.Join(out, ","), nil
}

func fieldByName(name string) *field {
	for i := range fields {
		if fields[i].name == name {
			return &fields[i]
		}
	}
	return nil
}

// rule is a constraint between fields; fields lists every field it reads,
// all of which keep their previous values when it breaks.
type rule struct {
	fields []string
	check  func(p *Params) error
}

// fieldError reports a broken rule against its first field.
func (r rule) fieldError(p *Params, err error) FieldError {
	f := fieldByName(r.fields[0])
	return FieldError{Name: f.name, Value: f.format(p), Reason: err.Error()}
}

var rules = []rule{
	{
		// A back-off cap below the normal delay would make errors speed a
		// host up instead of slowing it down.
		fields: []string{NameMaxBackoff, NameFetchDelay},
		check: func(p *Params) error {
			if p.MaxBackoff < p.FetchDelay {
				return fmt.Errorf("must be at least FetchDelay (%s)", formatDuration(p.FetchDelay))
			}
			return nil
		},
	},
	{
		// An adaptive interval lives between the two.
		fields: []string{NameMaxRefresh, NameMinRefresh},
		check: func(p *Params) error {
			if p.MaxRefresh < p.MinRefresh {
				return fmt.Errorf("must be at least MinRefresh (%s)", formatDuration(p.MinRefresh))
			}
			return nil
		},
	},
}

// maxSeconds is the largest bare number of seconds a time.Duration holds.
const maxSeconds = math.MaxInt64 / int64(time.Second)

// parseDuration reads a Go duration or a bare whole number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > maxSeconds || n < -maxSeconds {
			return 0, errors.New("duration out of range")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New(`not a duration (want e.g. "5s", "200ms", "1m30s" or whole seconds "5")`)
	}
	return d, nil
}

// formatDuration prints d in its largest exact unit ("10m", not
// time.Duration's "10m0s"), which is what an operator would have typed.
func formatDuration(d time.Duration) string {
	units := []struct {
		d    time.Duration
		name string
	}{
		{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"},
		{time.Millisecond, "ms"}, {time.Microsecond, "us"},
	}
	if d == 0 {
		return "0s"
	}
	for _, u := range units {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

func parseInt64(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("not a whole number")
	}
	return n, nil
}

// parseInt reads a decimal int; out of range for int is "not a whole
// number" too, since no parameter has a use for such values.
func parseInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("not a whole number")
	}
	return n, nil
}

func parseBool(s string) (bool, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, errors.New("not a bool (want true or false)")
	}
	return b, nil
}

func notNegative(d time.Duration) error {
	if d < 0 {
		return errors.New("must not be negative")
	}
	return nil
}

func between(lo, hi int64) func(int64) error {
	return func(v int64) error {
		if v < lo || v > hi {
			return fmt.Errorf("must be between %d and %d", lo, hi)
		}
		return nil
	}
}

// checkUserAgent refuses what would break or forge the header: control
// characters (a newline would start a new header) and non-ASCII bytes.
func checkUserAgent(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("must be printable ASCII (byte 0x%02x at offset %d)", c, i)
		}
	}
	return nil
}
