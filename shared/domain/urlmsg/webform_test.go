package urlmsg_test

import (
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// TestWebForm checks the encoder against the WHATWG URL standard
// (https://url.spec.whatwg.org/): examples from the web-platform-tests'
// url/resources/urltestdata.json ("WPT"), and one row per character of each
// percent-encode set the standard defines (§1.3), which differ by
// component. Only the path, query and fragment are touched here; the host
// is the host parser's (TestValidateRejects: a space in it is refused).
func TestWebForm(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// Leading and trailing C0 control or space removed; tabs and
		// newlines removed everywhere (basic URL parser, steps 1-3).
		{"WPT: trailing space, spaces in every component", "http://f:21/ b ? d # e ", "http://f:21/%20b%20?%20d%20#%20e"},
		{"leading and trailing C0 and space", "\x00 \x1f http://example.com/ \x01", "http://example.com/"},
		{"WPT: tab and newline inside the host", "http://example\t.\norg", "http://example.org"},
		{"tab, LF and CR inside the path", "http://example.com/a\tb\nc\rd", "http://example.com/abcd"},
		{"DEL is not stripped at the end, it is encoded", "http://example.com/a\x7f", "http://example.com/a%7F"},

		// Path percent-encode set: C0, space, " # < > ? ^ ` { } and above ~.
		{"WPT: quotes in path", `http://example.com/"quoted"`, "http://example.com/%22quoted%22"},
		{"WPT: non-ASCII in path", "http://example.com/你好你好", "http://example.com/%E4%BD%A0%E5%A5%BD%E4%BD%A0%E5%A5%BD"},
		{"WPT: C1 control beside an escape", "http://example.com/foo\t\u0091%91", "http://example.com/foo%C2%91%91"},
		{"WPT: BOM inside the path", "http://example.com/\ufeff/foo", "http://example.com/%EF%BB%BF/foo"},
		{"WPT: bidi controls in the path", "http://example.com/\u202e/foo/\u202d/bar", "http://example.com/%E2%80%AE/foo/%E2%80%AD/bar"},
		{"path set: < > ^ ` { }", "http://example.com/<^`{}>", "http://example.com/%3C%5E%60%7B%7D%3E"},
		{"path set leaves | [ ] ' alone", "http://example.com/|[]'", "http://example.com/|[]'"},
		{"WPT: escapes are never decoded", "http://example.com/foo%00%51", "http://example.com/foo%00%51"},
		{"a lone % is left as it is", "http://example.com/100%", "http://example.com/100%"},
		{"control in path", "http://example.com/a\x01b", "http://example.com/a%01b"},

		// Query percent-encode set: C0, space, " # < > and above ~; the
		// special-query set adds ' for special schemes (http, https...).
		{"WPT: ' in a special scheme's query", "http://host/?'", "http://host/?%27"},
		{"WPT: ' in a non-special scheme's query", "notspecial://host/?'", "notspecial://host/?'"},
		{"query set: space \" < >", `http://example.com/?a b"<>`, "http://example.com/?a%20b%22%3C%3E"},
		{"query set leaves ? ^ ` { } | alone", "http://example.com/??^`{}|", "http://example.com/??^`{}|"},
		{"non-ASCII in query", "https://example.com/?q=café", "https://example.com/?q=caf%C3%A9"},

		// Fragment percent-encode set: C0, space, " < > ` and above ~.
		{"WPT: non-ASCII in fragment", "http://www.google.com/foo?bar=baz# »", "http://www.google.com/foo?bar=baz#%20%C2%BB"},
		{"fragment set: ` and \" < >, not # ? '", "http://example.com/#`\"<>#?'", "http://example.com/#%60%22%3C%3E#?'"},

		// Bytes that are not UTF-8 are encoded as themselves (the standard
		// reads code points and would have U+FFFD; nothing is replaced).
		{"invalid byte in path", "http://example.com/caf\xe9", "http://example.com/caf%E9"},
		{"invalid bytes in query and fragment", "http://example.com/?\xff#\xfe", "http://example.com/?%FF#%FE"},
		{"truncated sequence", "http://example.com/\xe4\xbd", "http://example.com/%E4%BD"},

		// The authority is left to the host parser.
		{"non-ASCII host untouched", "http://bücher.example/ü", "http://bücher.example/%C3%BC"},
		{"no path", "http://example.com?q= x", "http://example.com?q=%20x"},
		{"already in web form: unchanged", "https://example.com/a%20b?c=d%27e#f", "https://example.com/a%20b?c=d%27e#f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := urlmsg.WebForm(tt.in); got != tt.want {
				t.Errorf("WebForm(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := urlmsg.WebForm(tt.want); again != tt.want {
				t.Errorf("WebForm(%q) = %q: not a fixed point", tt.want, again)
			}
		})
	}
}
