package params

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	d := Defaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("Defaults().Validate() = %v", err)
	}
	want := map[string]string{
		NameCheckHostPeriod:          "5s",
		NamePersistLimit:             "1000",
		NameFetchDelay:               "1s",
		NameFetchTimeout:             "10s",
		NameMaxBodyBytes:             "10485760",
		NameInlineBodyBytes:          "245760",
		NameResultBodyEncoding:       "plain",
		NameMaxConcurrentHosts:       "256",
		NameUserAgent:                "urldownloader/1.0 (+https://github.com/urldownloader/urldownloader)",
		NameRespectRobots:            "true",
		NameRobotsTTL:                "6h",
		NameMaxCrawlDelay:            "24h",
		NameDelayFactor:              "2",
		NameMaxDelay:                 "1m",
		NameMaxBackoff:               "10m",
		NameMaxAttempts:              "3",
		NameFollowCrossHostRedirects: "true",
		NameRandomizeDelay:           "false",
		NameQueueMode:                "host",
		NameAllowedPorts:             "80,443",
		NameGiveUpAfter:              "1h",
		NameServerDelay:              "250ms",
		NameServerConnections:        "1",
		NameServerExempt:             "cdn",
		NameMinRefresh:               "1m",
		NameMaxRefresh:               "168h",
		NameMaxRefreshPerHost:        "100",
		NameHostRules:                "none",
	}
	if got := d.Format(); !reflect.DeepEqual(got, want) {
		t.Errorf("Defaults().Format() =\n%v\nwant\n%v", got, want)
	}
	// Out of the box a body too large to go inline is still kept whole (in
	// the body store) up to the cap, not cut below the inline limit.
	if d.MaxBodyBytes <= d.InlineBodyBytes {
		t.Errorf("default MaxBodyBytes %d <= InlineBodyBytes %d: no body is ever kept whole beyond the inline limit", d.MaxBodyBytes, d.InlineBodyBytes)
	}
}

// TestNamesMatchFields keeps Names, the struct and the field table in step:
// a new Params field without a name would silently never be tunable.
func TestNamesMatchFields(t *testing.T) {
	typ := reflect.TypeFor[Params]()
	var fieldNames []string
	for i := range typ.NumField() {
		fieldNames = append(fieldNames, typ.Field(i).Name)
	}
	if got := Names(); !slices.Equal(got, fieldNames) {
		t.Errorf("Names() = %v\nwant the Params fields in order %v", got, fieldNames)
	}
	// Names returns a copy: a caller sorting it must not reorder ours.
	n := Names()
	n[0] = "changed"
	if Names()[0] != NameCheckHostPeriod {
		t.Error("Names() shares its slice with the caller")
	}
}

func TestFormatParseRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		p    Params
	}{
		{"defaults", Defaults()},
		{"everything changed", func() Params {
			p := Params{
				CheckHostPeriod:          1500 * time.Millisecond,
				PersistLimit:             7,
				FetchDelay:               0,
				FetchTimeout:             5 * time.Minute,
				MaxBodyBytes:             50 << 20,
				InlineBodyBytes:          64 << 10,
				ResultBodyEncoding:       BodyGzip,
				MaxConcurrentHosts:       1,
				UserAgent:                "bot/2 (+mailto:ops@example.com)",
				RespectRobots:            false,
				RobotsTTL:                90 * time.Second,
				MaxCrawlDelay:            1234567 * time.Microsecond,
				MaxBackoff:               time.Nanosecond + time.Second,
				MaxAttempts:              20,
				FollowCrossHostRedirects: false,
				RandomizeDelay:           true,
				QueueMode:                QueueByDomain,
				AllowedPorts:             "8080,443",
				GiveUpAfter:              90 * time.Minute,
				ServerDelay:              1500 * time.Millisecond,
				ServerConnections:        2,
				MinRefresh:               15 * time.Second,
				MaxRefresh:               720 * time.Hour,
				MaxRefreshPerHost:        0,
			}
			p.ServerExempt, _ = ParseExempt("cdn,192.0.2.0/24")
			return p
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Validate(); err != nil {
				t.Fatalf("test case invalid: %v", err)
			}
			got, err := Parse(tt.p.Format(), Defaults())
			if err != nil {
				t.Fatalf("Parse(Format()) error: %v", err)
			}
			if got != tt.p {
				t.Errorf("Parse(Format()) =\n%+v\nwant\n%+v", got, tt.p)
			}
		})
	}
}

func TestParseValid(t *testing.T) {
	tests := []struct {
		name, param, value string
		want               func(p *Params)
	}{
		{"period go duration", NameCheckHostPeriod, "10s", func(p *Params) { p.CheckHostPeriod = 10 * time.Second }},
		{"period bare seconds", NameCheckHostPeriod, "5", func(p *Params) { p.CheckHostPeriod = 5 * time.Second }},
		{"period just above 1s", NameCheckHostPeriod, "1001ms", func(p *Params) { p.CheckHostPeriod = 1001 * time.Millisecond }},
		{"period compound", NameCheckHostPeriod, "1m30s", func(p *Params) { p.CheckHostPeriod = 90 * time.Second }},
		{"period spaces trimmed", NameCheckHostPeriod, " 7s\n", func(p *Params) { p.CheckHostPeriod = 7 * time.Second }},
		{"persist limit 1", NamePersistLimit, "1", func(p *Params) { p.PersistLimit = 1 }},
		{"persist limit max", NamePersistLimit, "4000", func(p *Params) { p.PersistLimit = MaxPersistLimit }},
		{"give up after", NameGiveUpAfter, "20s", func(p *Params) { p.GiveUpAfter = 20 * time.Second }},
		{"min refresh", NameMinRefresh, "15s", func(p *Params) { p.MinRefresh = 15 * time.Second }},
		{"max refresh", NameMaxRefresh, "720h", func(p *Params) { p.MaxRefresh = 30 * 24 * time.Hour }},
		{"refresh off", NameMaxRefreshPerHost, "0", func(p *Params) { p.MaxRefreshPerHost = 0 }},
		{"fetch delay zero", NameFetchDelay, "0", func(p *Params) { p.FetchDelay = 0 }},
		{"fetch delay ms", NameFetchDelay, "200ms", func(p *Params) { p.FetchDelay = 200 * time.Millisecond }},
		{"fetch timeout max", NameFetchTimeout, "5m", func(p *Params) { p.FetchTimeout = 5 * time.Minute }},
		{"fetch timeout small", NameFetchTimeout, "1ms", func(p *Params) { p.FetchTimeout = time.Millisecond }},
		{"body bytes min", NameMaxBodyBytes, "1", func(p *Params) { p.MaxBodyBytes = 1 }},
		{"body bytes 1GiB", NameMaxBodyBytes, "1073741824", func(p *Params) { p.MaxBodyBytes = 1 << 30 }},
		{"inline body bytes 1MiB", NameInlineBodyBytes, "1048576", func(p *Params) { p.InlineBodyBytes = 1 << 20 }},
		{"hosts min", NameMaxConcurrentHosts, "1", func(p *Params) { p.MaxConcurrentHosts = 1 }},
		{"hosts max", NameMaxConcurrentHosts, "10000", func(p *Params) { p.MaxConcurrentHosts = 10000 }},
		{"user agent", NameUserAgent, "mybot/1.0 (+https://example.com/bot)", func(p *Params) { p.UserAgent = "mybot/1.0 (+https://example.com/bot)" }},
		{"robots off", NameRespectRobots, "false", func(p *Params) { p.RespectRobots = false }},
		{"robots 0", NameRespectRobots, "0", func(p *Params) { p.RespectRobots = false }},
		{"robots TRUE", NameRespectRobots, "TRUE", func(p *Params) { p.RespectRobots = true }},
		{"robots ttl min", NameRobotsTTL, "1m", func(p *Params) { p.RobotsTTL = time.Minute }},
		{"robots ttl day", NameRobotsTTL, "24h", func(p *Params) { p.RobotsTTL = 24 * time.Hour }},
		{"crawl delay zero", NameMaxCrawlDelay, "0s", func(p *Params) { p.MaxCrawlDelay = 0 }},
		{"crawl delay 2m", NameMaxCrawlDelay, "120", func(p *Params) { p.MaxCrawlDelay = 2 * time.Minute }},
		{"backoff 1h", NameMaxBackoff, "1h", func(p *Params) { p.MaxBackoff = time.Hour }},
		{"backoff equal to delay", NameMaxBackoff, "1s", func(p *Params) { p.MaxBackoff = time.Second }},
		{"attempts 1", NameMaxAttempts, "1", func(p *Params) { p.MaxAttempts = 1 }},
		{"attempts 20", NameMaxAttempts, "20", func(p *Params) { p.MaxAttempts = 20 }},
		{"redirects off", NameFollowCrossHostRedirects, "false", func(p *Params) { p.FollowCrossHostRedirects = false }},
		{"randomize on", NameRandomizeDelay, "true", func(p *Params) { p.RandomizeDelay = true }},
		{"queue domain", NameQueueMode, "domain", func(p *Params) { p.QueueMode = QueueByDomain }},
		{"queue upper case", NameQueueMode, "HOST", func(p *Params) { p.QueueMode = QueueByHost }},
		{"body gzip", NameResultBodyEncoding, "gzip", func(p *Params) { p.ResultBodyEncoding = BodyGzip }},
		{"body upper case", NameResultBodyEncoding, " GZIP\n", func(p *Params) { p.ResultBodyEncoding = BodyGzip }},
		{"body plain", NameResultBodyEncoding, "plain", func(p *Params) { p.ResultBodyEncoding = BodyPlain }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := Defaults()
			tt.want(&want)
			got, err := Parse(map[string]string{tt.param: tt.value}, Defaults())
			if err != nil {
				t.Fatalf("Parse(%s=%q) error: %v", tt.param, tt.value, err)
			}
			if got != want {
				t.Errorf("Parse(%s=%q) =\n%+v\nwant\n%+v", tt.param, tt.value, got, want)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name, param, value, reason string
	}{
		{"period 1s", NameCheckHostPeriod, "1s", "must be longer than 1s"},
		{"period bare 1", NameCheckHostPeriod, "1", "must be longer than 1s"},
		{"period zero", NameCheckHostPeriod, "0", "must be longer than 1s"},
		{"period garbage", NameCheckHostPeriod, "five", "not a duration"},
		{"period fraction without unit", NameCheckHostPeriod, "2.5", "not a duration"},
		{"period empty", NameCheckHostPeriod, "", "not a duration"},
		{"period overflow", NameCheckHostPeriod, "99999999999999", "out of range"},
		{"persist limit zero", NamePersistLimit, "0", "must be between 1 and 4000"},
		{"persist limit negative", NamePersistLimit, "-5", "must be between 1 and 4000"},
		{"persist limit above the item bound", NamePersistLimit, "100000", "must be between 1 and 4000"},
		{"give up after too short", NameGiveUpAfter, "500ms", "must be between 1s and 168h"},
		{"give up after too long", NameGiveUpAfter, "200h", "must be between 1s and 168h"},
		{"min refresh too short", NameMinRefresh, "5s", "must be between 10s and 24h"},
		{"max refresh too long", NameMaxRefresh, "721h", "must be between 10s and 720h"},
		{"max refresh below min", NameMaxRefresh, "30s", "must be at least MinRefresh (1m)"},
		{"refreshes per host too many", NameMaxRefreshPerHost, "10001", "must be between 0 and 10000"},
		{"persist limit float", NamePersistLimit, "1.5", "not a whole number"},
		{"persist limit overflow", NamePersistLimit, "99999999999999999999", "not a whole number"},
		{"fetch delay negative", NameFetchDelay, "-1s", "must not be negative"},
		{"fetch delay garbage", NameFetchDelay, "soon", "not a duration"},
		{"fetch timeout zero", NameFetchTimeout, "0s", "must be longer than 0s and at most 5m"},
		{"fetch timeout too long", NameFetchTimeout, "301s", "must be longer than 0s and at most 5m"},
		{"body bytes zero", NameMaxBodyBytes, "0", "must be between 1 and 1073741824"},
		{"body bytes above 1GiB", NameMaxBodyBytes, "1073741825", "must be between 1 and 1073741824"},
		{"inline body bytes below 1KiB", NameInlineBodyBytes, "1023", "must be between 1024 and 1048576"},
		{"inline body bytes above 1MiB", NameInlineBodyBytes, "1048577", "must be between 1024 and 1048576"},
		{"body bytes unit", NameMaxBodyBytes, "200KB", "not a whole number"},
		{"hosts zero", NameMaxConcurrentHosts, "0", "must be between 1 and 10000"},
		{"hosts too many", NameMaxConcurrentHosts, "10001", "must be between 1 and 10000"},
		{"user agent empty", NameUserAgent, "", "must not be empty"},
		{"user agent blank", NameUserAgent, "   ", "must not be empty"},
		{"user agent newline", NameUserAgent, "bot\r\nX-Evil: 1", "must be printable ASCII"},
		{"user agent non-ascii", NameUserAgent, "bötli", "must be printable ASCII"},
		{"robots yes", NameRespectRobots, "yes", "not a bool"},
		{"robots ttl short", NameRobotsTTL, "59s", "must be at least 1m"},
		{"crawl delay negative", NameMaxCrawlDelay, "-1", "must not be negative"},
		{"backoff zero", NameMaxBackoff, "0", "must be longer than 0s"},
		{"backoff below fetch delay", NameMaxBackoff, "500ms", "must be at least FetchDelay (1s)"},
		{"attempts zero", NameMaxAttempts, "0", "must be between 1 and 20"},
		{"attempts 21", NameMaxAttempts, "21", "must be between 1 and 20"},
		{"redirects garbage", NameFollowCrossHostRedirects, "on", "not a bool"},
		{"randomize garbage", NameRandomizeDelay, "maybe", "not a bool"},
		{"queue ip", NameQueueMode, "ip", `must be "host" or "domain"`},
		{"body encoding unknown", NameResultBodyEncoding, "br", `must be "plain" or "gzip"`},
		{"body encoding wire name", NameResultBodyEncoding, "gzip+base64", `must be "plain" or "gzip"`},
		{"body encoding empty", NameResultBodyEncoding, "", `must be "plain" or "gzip"`},
		{"unknown name", "FetchDelays", "1s", "unknown parameter"},
		{"wrong case name", "fetchdelay", "1s", "unknown parameter (did you mean FetchDelay?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := Defaults()
			base.PersistLimit = 42 // a non-default base shows the base is what is kept
			got, err := Parse(map[string]string{tt.param: tt.value}, base)
			if got != base {
				t.Errorf("Parse(%s=%q) changed the params:\n%+v\nwant base\n%+v", tt.param, tt.value, got, base)
			}
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Parse(%s=%q) error = %v, want *InvalidError", tt.param, tt.value, err)
			}
			if len(inv.Fields) != 1 {
				t.Fatalf("Parse(%s=%q) reported %d fields, want 1: %v", tt.param, tt.value, len(inv.Fields), err)
			}
			f := inv.Fields[0]
			if f.Name != tt.param || f.Value != tt.value || !strings.Contains(f.Reason, tt.reason) {
				t.Errorf("Parse(%s=%q) reported %+v, want name %s, value %q, reason containing %q",
					tt.param, tt.value, f, tt.param, tt.value, tt.reason)
			}
			if !strings.Contains(err.Error(), tt.param) {
				t.Errorf("error %q does not name %s", err, tt.param)
			}
		})
	}
}

func TestParseReportsEveryBadField(t *testing.T) {
	raw := map[string]string{
		NameCheckHostPeriod: "1s",     // bad
		NamePersistLimit:    "50",     // good
		NameFetchDelay:      "abc",    // bad
		NameMaxAttempts:     "99",     // bad
		NameQueueMode:       "domain", // good
		"PersistLimt":       "10",     // unknown
		"Zzz":               "1",      // unknown
	}
	got, err := Parse(raw, Defaults())

	want := Defaults()
	want.PersistLimit = 50
	want.QueueMode = QueueByDomain
	if got != want {
		t.Errorf("Parse = \n%+v\nwant the good values applied and the bad ones kept:\n%+v", got, want)
	}
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("error = %v, want *InvalidError", err)
	}
	var names []string
	for _, f := range inv.Fields {
		names = append(names, f.Name)
	}
	// Known fields in Names order, then unknown names sorted.
	wantNames := []string{NameCheckHostPeriod, NameFetchDelay, NameMaxAttempts, "PersistLimt", "Zzz"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("reported fields %v, want %v", names, wantNames)
	}
	msg := err.Error()
	for _, s := range []string{`CheckHostPeriod="1s"`, `FetchDelay="abc"`, `MaxAttempts="99"`, `PersistLimt="10"`, `Zzz="1"`} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not contain %s", msg, s)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q spans lines; a log record should hold it on one", msg)
	}
}

func TestParseCrossFieldRule(t *testing.T) {
	base := Defaults() // FetchDelay 1s, MaxBackoff 10m
	tests := []struct {
		name    string
		raw     map[string]string
		want    func(p *Params)
		wantErr string
	}{
		{"both valid together", map[string]string{NameFetchDelay: "20m", NameMaxBackoff: "30m"},
			func(p *Params) { p.FetchDelay = 20 * time.Minute; p.MaxBackoff = 30 * time.Minute }, ""},
		{"delay above backoff keeps both", map[string]string{NameFetchDelay: "11m"},
			func(p *Params) {}, `MaxBackoff="10m": must be at least FetchDelay (11m)`},
		{"backoff below delay keeps both", map[string]string{NameFetchDelay: "5s", NameMaxBackoff: "2s"},
			func(p *Params) {}, `MaxBackoff="2s": must be at least FetchDelay (5s)`},
		{"invalid delay does not break the rule", map[string]string{NameFetchDelay: "-1s", NameMaxBackoff: "2s"},
			func(p *Params) { p.MaxBackoff = 2 * time.Second }, `FetchDelay="-1s": must not be negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := base
			tt.want(&want)
			got, err := Parse(tt.raw, base)
			if got != want {
				t.Errorf("Parse(%v) =\n%+v\nwant\n%+v", tt.raw, got, want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("result does not validate: %v", err)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error = %v, want it to contain %s", err, tt.wantErr)
			}
		})
	}
}

func TestParseRepairsInvalidBase(t *testing.T) {
	base := Defaults()
	base.MaxAttempts = 0
	base.FetchDelay = time.Hour // breaks MaxBackoff >= FetchDelay
	got, err := Parse(map[string]string{NamePersistLimit: "9"}, base)

	want := Defaults()
	want.PersistLimit = 9
	if got != want {
		t.Errorf("Parse over an invalid base =\n%+v\nwant defaults for the bad fields\n%+v", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), "MaxAttempts") || !strings.Contains(err.Error(), "MaxBackoff") {
		t.Errorf("error = %v, want it to report MaxAttempts and the MaxBackoff rule", err)
	}

	// The zero Params is the classic invalid base: Parse still gives a
	// runnable result.
	got, err = Parse(nil, Params{})
	if err == nil {
		t.Error("Parse(nil, Params{}) error = nil, want the zero fields reported")
	}
	if err := got.Validate(); err != nil {
		t.Errorf("Parse(nil, Params{}) result invalid: %v", err)
	}
}

func TestValidate(t *testing.T) {
	p := Defaults()
	p.PersistLimit = 0
	p.UserAgent = ""
	p.MaxBackoff = time.Millisecond
	err := p.Validate()
	var inv *InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Validate() = %v, want *InvalidError", err)
	}
	var names []string
	for _, f := range inv.Fields {
		names = append(names, f.Name)
	}
	if want := []string{NamePersistLimit, NameUserAgent, NameMaxBackoff}; !slices.Equal(names, want) {
		t.Errorf("Validate() reported %v, want %v", names, want)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{6 * time.Hour, "6h"},
		{90 * time.Minute, "90m"},
		{10 * time.Minute, "10m"},
		{1500 * time.Millisecond, "1500ms"},
		{-2 * time.Second, "-2s"},
		{3 * time.Microsecond, "3us"},
		{time.Second + time.Nanosecond, "1000000001ns"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := formatDuration(tt.d); got != tt.want {
				t.Errorf("formatDuration(%v) = %q, want %q", tt.d, got, tt.want)
			}
			if back, err := parseDuration(tt.want); err != nil || back != tt.d {
				t.Errorf("parseDuration(%q) = %v, %v; want %v", tt.want, back, err, tt.d)
			}
		})
	}
}
