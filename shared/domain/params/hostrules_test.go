package params

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseHostRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		want  []HostRule
		canon string
	}{
		{"empty", "", nil, "none"},
		{"empty list", " [] ", nil, "none"},
		{"none", "None", nil, "none"},
		{"own CDN", `[{"match":"cdn.example.net","delay":"0s","connections":8}]`,
			[]HostRule{{Match: "cdn.example.net", HasDelay: true, Connections: 8}},
			`[{"match":"cdn.example.net","delay":"0s","connections":8}]`},
		{"fragile site, whole seconds, a leading dot and upper case", `[{"match":".Fragile.Example.GOV","delay":10,"maxDelay":"120s"}]`,
			[]HostRule{{Match: "fragile.example.gov", Delay: 10 * time.Second, HasDelay: true, MaxDelay: 2 * time.Minute, Connections: 1}},
			`[{"match":"fragile.example.gov","delay":"10s","maxDelay":"2m"}]`},
		{"glob, no delay", `[{"match":"img?.*.example.org"}]`,
			[]HostRule{{Match: "img?.*.example.org", Connections: 1}},
			`[{"match":"img?.*.example.org"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHostRules(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := h.Rules()
			if len(got) != len(tc.want) {
				t.Fatalf("rules %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("rule %d = %+v, want %+v", i+1, got[i], tc.want[i])
				}
			}
			if h.String() != tc.canon {
				t.Errorf("String() = %q, want %q", h.String(), tc.canon)
			}
			again, err := ParseHostRules(h.String())
			if err != nil || again != h {
				t.Errorf("ParseHostRules(String()) = %v, %v; want the same value", again, err)
			}
		})
	}
}

// TestParseHostRulesErrors: every refusal names the rule (position and
// match) and the field, so an operator knows what to fix.
func TestParseHostRulesErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"not JSON", `cdn.example.net delay=0`, "not a JSON list of rules"},
		{"an object, not a list", `{"match":"a.example"}`, "not a JSON list of rules"},
		{"rule not an object", `[{"match":"a.example"}, "b.example"]`, "rule 2: not an object"},
		{"no match", `[{"delay":"1s"}]`, "rule 1: field match: missing"},
		{"empty match", `[{"match":" "}]`, `rule 1 (match " "): field match=" ": must not be empty`},
		{"url, not a host", `[{"match":"https://a.example/"}]`, `rule 1 (match "https://a.example/"): field match="https://a.example/": must be a host name`},
		{"bad glob", `[{"match":"a.example"},{"match":"[a.example"}]`, `rule 2 (match "[a.example"): field match="[a.example": not a valid glob`},
		{"bad delay", `[{"match":"a.example","delay":"10x"}]`, `rule 1 (match "a.example"): field delay="10x": not a duration`},
		{"negative delay", `[{"match":"a.example","delay":"-1s"}]`, `field delay="-1s": must be between 0s and 24h`},
		{"delay over a day", `[{"match":"a.example","delay":"25h"}]`, `field delay="25h": must be between 0s and 24h`},
		{"delay not a string or number", `[{"match":"a.example","delay":true}]`, `field delay=true: not a duration`},
		{"zero maxDelay", `[{"match":"a.example","maxDelay":"0s"}]`, `field maxDelay="0s": must be longer than 0s`},
		{"maxDelay below delay", `[{"match":"a.example","delay":"10s","maxDelay":"5s"}]`, `rule 1 (match "a.example"): field maxDelay="5s": must be at least the rule's delay (10s)`},
		{"connections 0", `[{"match":"a.example","connections":0}]`, `field connections=0: must be between 1 and 16`},
		{"connections 17", `[{"match":"a.example","connections":17}]`, `field connections=17: must be between 1 and 16`},
		{"connections a string", `[{"match":"a.example","connections":"8"}]`, `field connections="8": not a whole number`},
		{"unknown field", `[{"match":"a.example","parallelism":4}]`, `rule 1 (match "a.example"): field parallelism=4: unknown field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHostRules(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseHostRules(%s) = %v, want an error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestHostRulesMatch(t *testing.T) {
	_, err := ParseHostRules(`[
		{"match": "static.example.com", "delay": "0s", "connections": 8},
		{"match": "example.com", "delay": "3s"},
		{"match": "*.fragile.example.org", "delay": "10s"},
		{"match": "[::1]"}
	]`)
	if err == nil {
		t.Fatal("a bracketed IPv6 literal is a glob class that matches nothing useful; want it refused")
	}
	h, err := ParseHostRules(`[
		{"match": "static.example.com", "delay": "0s", "connections": 8},
		{"match": "example.com", "delay": "3s"},
		{"match": "*.fragile.example.org", "delay": "10s"}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host  string
		match string // "" for none
	}{
		{"static.example.com", "static.example.com"},
		{"a.static.example.com:8080", "static.example.com"},
		{"STATIC.Example.com", "static.example.com"},
		{"example.com", "example.com"},     // the first match wins: not the later,
		{"www.example.com", "example.com"}, // broader rule's neighbours
		{"notexample.com", ""},             // a suffix is matched at a dot
		{"x.fragile.example.org", "*.fragile.example.org"},
		{"fragile.example.org", ""}, // the glob wants a label before
		{"127.0.0.1:80", ""},
	} {
		r, ok := h.Match(tc.host)
		if got := map[bool]string{true: r.Match}[ok]; got != tc.match {
			t.Errorf("Match(%q) = %q, want %q", tc.host, got, tc.match)
		}
	}
	if d := h.LongestDelay(); d != 10*time.Second {
		t.Errorf("LongestDelay() = %v, want 10s", d)
	}
}

// TestParseKeepsRulesOnError: through Parse, a bad HostRules is reported
// as the parameter's error (naming rule and field) and the rules in force
// stay; the same text parsed twice gives equal Params.
func TestParseKeepsRulesOnError(t *testing.T) {
	good := `[{"match":"fragile.example.gov","delay":"10s"}]`
	base, err := Parse(map[string]string{NameHostRules: good}, Defaults())
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(map[string]string{NameHostRules: good}, Defaults())
	if err != nil || again != base {
		t.Fatalf("the same rules parsed twice differ: %v", err)
	}
	p, err := Parse(map[string]string{NameHostRules: `[{"match":"fragile.example.gov","delay":"10"},{"match":"b.example","connections":99}]`}, base)
	var inv *InvalidError
	if !errors.As(err, &inv) || len(inv.Fields) != 1 || inv.Fields[0].Name != NameHostRules ||
		!strings.Contains(inv.Fields[0].Reason, `rule 2 (match "b.example"): field connections=99`) {
		t.Fatalf("Parse error = %v, want one HostRules error naming rule 2 and connections", err)
	}
	if p.HostRules != base.HostRules {
		t.Errorf("rules in force %s, want the previous %s", p.HostRules, base.HostRules)
	}
}
