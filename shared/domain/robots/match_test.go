package robots

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name, in, path, pattern string
	}{
		{"already canonical", "/a/b?c=d&e=f;g", "/a/b?c=d&e=f;g", "/a/b?c=d&e=f;g"},
		{"unreserved escapes decoded", "/%70%41%39%2D%2E%5F%7E%7e", "/pA9-._~~", "/pA9-._~~"},
		{"reserved escapes kept, hex upper-cased", "/a%2fb%3a%3F%26", "/a%2Fb%3A%3F%26", "/a%2Fb%3A%3F%26"},
		{"non-ASCII encoded", "/café/ツ", "/caf%C3%A9/%E3%83%84", "/caf%C3%A9/%E3%83%84"},
		{"invalid UTF-8 encoded octet by octet", "/\xff\xfe", "/%FF%FE", "/%FF%FE"},
		{"controls and space encoded", "/a b\tc\x7f", "/a%20b%09c%7F", "/a%20b%09c%7F"},
		{"characters a URI may not hold", `/"<>\^{|}` + "`[]", "/%22%3C%3E%5C%5E%7B%7C%7D%60%5B%5D", "/%22%3C%3E%5C%5E%7B%7C%7D%60%5B%5D"},
		{"a percent that starts no escape", "/100%/%4/%zz/%", "/100%25/%254/%25zz/%25", "/100%25/%254/%25zz/%25"},
		{"star and dollar", "/a*b$c", "/a%2Ab%24c", "/a*b%24c"},
		{"escaped star and dollar stay escaped", "/%2a%24", "/%2A%24", "/%2A%24"},
		{"empty", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := canonical(tc.in, false); got != tc.path {
				t.Errorf("canonical(%q, path) = %q, want %q", tc.in, got, tc.path)
			}
			if got := canonical(tc.in, true); got != tc.pattern {
				t.Errorf("canonical(%q, pattern) = %q, want %q", tc.in, got, tc.pattern)
			}
		})
	}
}

func TestCanonicalNoAllocation(t *testing.T) {
	p := "/articles/2024/05/some-title?ref=home&x=%2F"
	if n := testing.AllocsPerRun(100, func() { canonical(p, false) }); n != 0 {
		t.Errorf("canonical of a canonical path allocates %v times", n)
	}
}

func TestRequestPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://example.com/a/b?c=1#frag", "/a/b?c=1"},
		{"https://example.com", "/"},
		{"https://example.com?q=1", "/?q=1"},
		{"https://example.com#top", "/"},
		{"HTTP://user@example.com:8080/x", "/x"},
		{"/a?b=http://c/d", "/a?b=http://c/d"}, // "://" in the query is no scheme
		{"/a#b", "/a"},
		{"a/b", "/a/b"},
		{"?x", "/?x"},
		{"", "/"},
		{"#x", "/"},
	}
	for _, tc := range tests {
		if got := requestPath(tc.in); got != tc.want {
			t.Errorf("requestPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// refMatch is a reference matcher written for clarity, not speed: it tracks
// every position in p that the pattern read so far can end at.
func refMatch(pat string, anchored bool, p string) bool {
	at := make([]bool, len(p)+1)
	at[0] = true
	for k := 0; k < len(pat); k++ {
		next := make([]bool, len(p)+1)
		if pat[k] == '*' {
			reach := false
			for i := range at {
				reach = reach || at[i]
				next[i] = reach
			}
		} else {
			for i := 0; i < len(p); i++ {
				next[i+1] = at[i] && p[i] == pat[k]
			}
		}
		at = next
	}
	if anchored {
		return at[len(p)]
	}
	for _, ok := range at {
		if ok {
			return true
		}
	}
	return false
}

// checkMatch compares rule.match with refMatch for one rule value and one
// path, both brought to canonical form first.
func checkMatch(t *testing.T, value, path string) {
	t.Helper()
	r, ok := compileRule(value, false)
	if !ok {
		return
	}
	anchored := strings.HasSuffix(value, "$")
	pat := canonical(strings.TrimSuffix(value, "$"), true)
	p := canonical(requestPath(path), false)
	if got, want := r.match(p), refMatch(pat, anchored, p); got != want {
		t.Fatalf("rule %q against %q: match = %v, reference says %v", value, p, got, want)
	}
}

// TestMatchAgainstReference tries many short rules and paths over a small
// alphabet, where wildcards interact most.
func TestMatchAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9309))
	const alphabet = "/ab*$%2"
	word := func(n int) string {
		b := make([]byte, rng.IntN(n+1))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 50000 {
		checkMatch(t, "/"+word(7), "/"+word(9))
	}
}

// FuzzMatch checks the wildcard matcher against the reference, and that
// canonical is idempotent and yields only canonical octets.
func FuzzMatch(f *testing.F) {
	f.Add("/a*b*c$", "/aXbYc")
	f.Add("*.gif$", "/x.gif")
	f.Add("/a**$", "/a")
	f.Add("/%2a*%24", "/*x$")
	f.Add("/caf\u00e9*", "/caf%c3%a9/menu")
	f.Fuzz(func(t *testing.T, value, path string) {
		if len(value) > 64 || len(path) > 256 {
			return // the reference is quadratic
		}
		checkMatch(t, value, path)
		for _, pattern := range []bool{false, true} {
			c := canonical(value, pattern)
			if again := canonical(c, pattern); again != c {
				t.Fatalf("canonical(%q) = %q, then %q", value, c, again)
			}
			for i := 0; i < len(c); i++ {
				n := canonicalAt(c, i, pattern)
				if n == 0 {
					t.Fatalf("canonical(%q) = %q holds a non-canonical octet at %d", value, c, i)
				}
				i += n - 1
			}
		}
	})
}
