package urlmsg_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

func TestValidateNormalises(t *testing.T) {
	tests := []struct {
		name     string
		in       urlmsg.Input
		wantURL  string
		wantHost string
	}{
		{"lowercase scheme and host", urlmsg.Input{URL: "HTTP://Example.COM/Path"}, "http://example.com/Path", "example.com"},
		{"path case kept", urlmsg.Input{URL: "http://example.com/A/b%7EC"}, "http://example.com/A/b%7EC", "example.com"},
		{"default http port dropped", urlmsg.Input{URL: "http://example.com:80/a"}, "http://example.com/a", "example.com"},
		{"default https port dropped", urlmsg.Input{URL: "https://example.com:443/a"}, "https://example.com/a", "example.com"},
		{"443 kept on http", urlmsg.Input{URL: "http://example.com:443/a"}, "http://example.com:443/a", "example.com:443"},
		{"80 kept on https", urlmsg.Input{URL: "https://example.com:80/a"}, "https://example.com:80/a", "example.com:80"},
		{"non-default port kept", urlmsg.Input{URL: "http://example.com:8080/a"}, "http://example.com:8080/a", "example.com:8080"},
		{"leading zeros in port", urlmsg.Input{URL: "http://example.com:0080/a"}, "http://example.com/a", "example.com"},
		{"empty port", urlmsg.Input{URL: "http://example.com:/a"}, "http://example.com/a", "example.com"},
		{"fragment removed", urlmsg.Input{URL: "http://example.com/a?q=1#frag"}, "http://example.com/a?q=1", "example.com"},
		{"empty fragment removed", urlmsg.Input{URL: "http://example.com/a#"}, "http://example.com/a", "example.com"},
		{"empty path becomes slash", urlmsg.Input{URL: "https://example.com"}, "https://example.com/", "example.com"},
		{"empty path with query", urlmsg.Input{URL: "http://example.com?x=1"}, "http://example.com/?x=1", "example.com"},
		{"query kept as is", urlmsg.Input{URL: "http://example.com/?b=2&a=1"}, "http://example.com/?b=2&a=1", "example.com"},
		{"IDN host to punycode", urlmsg.Input{URL: "http://bücher.example/"}, "http://xn--bcher-kva.example/", "xn--bcher-kva.example"},
		{"IDN uppercase host", urlmsg.Input{URL: "http://BÜCHER.example/"}, "http://xn--bcher-kva.example/", "xn--bcher-kva.example"},
		{"IDN host with port", urlmsg.Input{URL: "https://bücher.example:8443/x"}, "https://xn--bcher-kva.example:8443/x", "xn--bcher-kva.example:8443"},
		{"underscore in host kept (real sites use them)", urlmsg.Input{URL: "http://my_host.example/"}, "http://my_host.example/", "my_host.example"},
		{"punycode host kept", urlmsg.Input{URL: "http://XN--BCHER-KVA.example/"}, "http://xn--bcher-kva.example/", "xn--bcher-kva.example"},
		{"IPv6 literal with port", urlmsg.Input{URL: "http://[::1]:8080/x"}, "http://[::1]:8080/x", "[::1]:8080"},
		{"IPv6 literal default port", urlmsg.Input{URL: "http://[::1]:80/x"}, "http://[::1]/x", "[::1]"},
		{"IPv6 literal canonical form", urlmsg.Input{URL: "http://[2001:DB8:0:0::1]/"}, "http://[2001:db8::1]/", "[2001:db8::1]"},
		{"IPv4-mapped IPv6 in the standard's hex form", urlmsg.Input{URL: "http://[::ffff:127.0.0.1]/"}, "http://[::ffff:7f00:1]/", "[::ffff:7f00:1]"},
		{"IPv4 literal", urlmsg.Input{URL: "http://127.0.0.2:8080/"}, "http://127.0.0.2:8080/", "127.0.0.2:8080"},
		{"invalid UTF-8 in path percent-encoded", urlmsg.Input{URL: "http://example.com/caf\xe9"}, "http://example.com/caf%E9", "example.com"},
		{"percent-encoded IDN host", urlmsg.Input{URL: "http://b%C3%BCcher.example/"}, "http://xn--bcher-kva.example/", "xn--bcher-kva.example"},
		{"trailing dot host", urlmsg.Input{URL: "http://example.com./a"}, "http://example.com/a", "example.com"},
		{"trailing dot host with port", urlmsg.Input{URL: "http://example.com.:8080/a"}, "http://example.com:8080/a", "example.com:8080"},
		{"trailing dot IPv4", urlmsg.Input{URL: "http://127.0.0.1./"}, "http://127.0.0.1/", "127.0.0.1"},
		{"localhost", urlmsg.Input{URL: "http://localhost:3000/"}, "http://localhost:3000/", "localhost:3000"},
		{"matching host field", urlmsg.Input{Host: "example.com", URL: "http://example.com/"}, "http://example.com/", "example.com"},
		{"host field in other case", urlmsg.Input{Host: "EXAMPLE.Com", URL: "http://example.com/"}, "http://example.com/", "example.com"},
		{"host field with default port", urlmsg.Input{Host: "example.com:80", URL: "http://example.com/"}, "http://example.com/", "example.com"},
		{"host field with https default port", urlmsg.Input{Host: "Example.com:443", URL: "https://example.com/"}, "https://example.com/", "example.com"},
		{"host field with trailing dot", urlmsg.Input{Host: "example.com.", URL: "http://example.com/"}, "http://example.com/", "example.com"},
		{"host field in unicode for punycode url", urlmsg.Input{Host: "bücher.example", URL: "http://xn--bcher-kva.example/"}, "http://xn--bcher-kva.example/", "xn--bcher-kva.example"},
		{"host field bracketed IPv6", urlmsg.Input{Host: "[::1]:8080", URL: "http://[::1]:8080/"}, "http://[::1]:8080/", "[::1]:8080"},

		// Characters the WHATWG URL parser encodes or removes (see
		// TestWebForm for the encoder alone); the path then goes through
		// Go's serializer as every path did before (which also writes '|'
		// as %7C, and leaves escapes alone once the path is well encoded).
		{"space in path", urlmsg.Input{URL: "http://example.com/a b"}, "http://example.com/a%20b", "example.com"},
		{"space in query", urlmsg.Input{URL: "http://example.com/?q=a b"}, "http://example.com/?q=a%20b", "example.com"},
		{"WPT: spaces in path, query and fragment, trailing space dropped", urlmsg.Input{URL: "http://f:21/ b ? d # e "}, "http://f:21/%20b%20?%20d%20", "f:21"},
		{"leading and trailing space and controls", urlmsg.Input{URL: " \x01http://example.com/a\x00 "}, "http://example.com/a", "example.com"},
		{"CRLF line end", urlmsg.Input{URL: "http://example.com/a\r\n"}, "http://example.com/a", "example.com"},
		{"WPT: tab and newline removed, even in the host", urlmsg.Input{URL: "http://example\t.\norg/a\tb"}, "http://example.org/ab", "example.org"},
		{"control in path", urlmsg.Input{URL: "http://example.com/a\x01b"}, "http://example.com/a%01b", "example.com"},
		{"NUL escaped in JSON, in the path", urlmsg.Input{URL: "http://example.com/a\x00b"}, "http://example.com/a%00b", "example.com"},
		{"DEL in path", urlmsg.Input{URL: "http://example.com/\x7f"}, "http://example.com/%7F", "example.com"},
		{"C1 control in path", urlmsg.Input{URL: "http://example.com/\u0085"}, "http://example.com/%C2%85", "example.com"},
		{"WPT: non-ASCII path", urlmsg.Input{URL: "http://example.com/你好你好"}, "http://example.com/%E4%BD%A0%E5%A5%BD%E4%BD%A0%E5%A5%BD", "example.com"},
		{"non-ASCII query", urlmsg.Input{URL: "http://example.com/?q=café"}, "http://example.com/?q=caf%C3%A9", "example.com"},
		{"invalid UTF-8 in query, encoded as bytes", urlmsg.Input{URL: "http://example.com/?q=caf\xe9"}, "http://example.com/?q=caf%E9", "example.com"},
		{"quote in query of a special scheme", urlmsg.Input{URL: "https://example.com/?q='x'"}, "https://example.com/?q=%27x%27", "example.com"},
		{"double quote and angle brackets in query", urlmsg.Input{URL: "http://example.com/?q=\"<a>\""}, "http://example.com/?q=%22%3Ca%3E%22", "example.com"},
		{"escapes kept beside a raw space", urlmsg.Input{URL: "http://example.com/a%2Fb c"}, "http://example.com/a%2Fb%20c", "example.com"},
		{"existing escape in query kept", urlmsg.Input{URL: "http://example.com/?q=a%2Bb c"}, "http://example.com/?q=a%2Bb%20c", "example.com"},
		{"bad escape in the fragment does not matter", urlmsg.Input{URL: "http://example.com/a#%zz"}, "http://example.com/a", "example.com"},
		{"space in the fragment does not matter", urlmsg.Input{URL: "http://example.com/a#b c"}, "http://example.com/a", "example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := urlmsg.Validate(tt.in)
			if err != nil {
				t.Fatalf("Validate(%+v): %v", tt.in, err)
			}
			if m.URL != tt.wantURL || m.Host != tt.wantHost {
				t.Errorf("Validate(%+v) = url %q host %q, want url %q host %q", tt.in, m.URL, m.Host, tt.wantURL, tt.wantHost)
			}
			if m.ID != "" {
				t.Errorf("Validate set ID %q; only Parse assigns IDs", m.ID)
			}
			// Normalisation is idempotent: the output validates to itself.
			again, err := urlmsg.Validate(urlmsg.Input{URL: m.URL, Host: m.Host})
			if err != nil {
				t.Fatalf("re-validate %q (host %q): %v", m.URL, m.Host, err)
			}
			if again.URL != m.URL || again.Host != m.Host {
				t.Errorf("not idempotent: %q/%q -> %q/%q", m.URL, m.Host, again.URL, again.Host)
			}
		})
	}
}

// TestNormalizeIdempotentOnOddHosts covers hosts whose first normalisation
// used to differ from the second.
func TestNormalizeIdempotentOnOddHosts(t *testing.T) {
	tests := []struct {
		name string
		raw  string
	}{
		{"two trailing dots", "http://a../"},
		{"two trailing dots on a domain", "http://example.com../x"},
		{"IPv4-mapped IPv6", "http://[::ffff:10.0.0.1]:8080/"},
		{"invalid UTF-8 in host", "http://ex\xffample.com/"},
		{"percent-encoded invalid UTF-8 in host", "http://%80"},
		{"IDN label of 1024 bytes", "http://ü" + strings.Repeat("j", 1024) + "/"},
		{"IDN label of 64 bytes", "http://ü" + strings.Repeat("j", 63) + ".example/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := urlmsg.Normalize(tt.raw)
			if err != nil {
				return // rejecting is fine; accepting a form that changes again is not
			}
			u2, err := urlmsg.Normalize(u.String())
			if err != nil {
				t.Fatalf("Normalize(%q) = %q, which Normalize rejects: %v", tt.raw, u, err)
			}
			if u2.String() != u.String() {
				t.Errorf("Normalize(%q) = %q, but Normalize(%q) = %q", tt.raw, u, u, u2)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	const secret = "s3cr3tpw"
	tests := []struct {
		name    string
		in      urlmsg.Input
		wantErr string
	}{
		{"empty url", urlmsg.Input{}, "url is empty"},
		{"empty url with host", urlmsg.Input{Host: "example.com"}, "url is empty"},
		{"only spaces and controls", urlmsg.Input{URL: " \x01\t "}, "url is empty"},
		{"NUL in host", urlmsg.Input{URL: "http://exa\x00mple.com/"}, "its host has a space or a control character"},
		{"space in host", urlmsg.Input{URL: "http://exa mple.com/"}, "its host has a space or a control character"},
		{"DEL in host", urlmsg.Input{URL: "http://exa\x7fmple.com/"}, "its host has a space or a control character"},
		{"two URLs run together", urlmsg.Input{URL: "http://a.example http://b.example/"}, "two URLs run together"},
		{"C1 control in host", urlmsg.Input{URL: "http://exa\u0085mple.com/"}, "not a valid name"},
		{"user-info", urlmsg.Input{URL: "http://user:" + secret + "@example.com/"}, "user-info"},
		{"user only", urlmsg.Input{URL: "http://user@example.com/"}, "user-info"},
		{"empty user-info", urlmsg.Input{URL: "http://@example.com/"}, "user-info"},
		{"ftp scheme", urlmsg.Input{URL: "ftp://example.com/file"}, "scheme must be http or https"},
		{"javascript scheme", urlmsg.Input{URL: "javascript:alert(1)"}, "scheme must be http or https"},
		{"data scheme", urlmsg.Input{URL: "data:text/html,<script>alert(1)</script>"}, "scheme must be http or https"},
		{"file scheme", urlmsg.Input{URL: "file:///etc/passwd"}, "scheme must be http or https"},
		{"no scheme", urlmsg.Input{URL: "example.com/a"}, "scheme must be http or https"},
		{"scheme-relative", urlmsg.Input{URL: "//example.com/a"}, "scheme must be http or https"},
		{"opaque http", urlmsg.Input{URL: "http:example.com/a"}, "not hierarchical"},
		{"too long", urlmsg.Input{URL: "http://example.com/" + strings.Repeat("a", urlmsg.MaxURLLength)}, "the limit is 2048"},
		{"too long after normalisation", urlmsg.Input{URL: "http://example.com/" + strings.Repeat("é", 1000)}, "the limit is 2048"},
		{"empty host", urlmsg.Input{URL: "http:///x"}, "host is empty"},
		{"only a port", urlmsg.Input{URL: "http://:8080/x"}, "host is empty"},
		{"only a dot", urlmsg.Input{URL: "http://./x"}, "host is empty"},
		{"port too large", urlmsg.Input{URL: "http://example.com:99999/"}, `port "99999"`},
		{"port zero", urlmsg.Input{URL: "http://example.com:0/"}, `port "0"`},
		{"port not a number", urlmsg.Input{URL: "http://example.com:abc/"}, "invalid port"},
		{"IPv6 zone", urlmsg.Input{URL: "http://[fe80::1%25eth0]/"}, "not a valid name or address"},
		{"bad punycode", urlmsg.Input{URL: "http://xn--a.example/"}, "not a valid name"},
		{"empty label", urlmsg.Input{URL: "http://a..example/"}, "not a valid name"},
		{"two trailing dots", urlmsg.Input{URL: "http://example.com../"}, "not a valid name"},
		{"invalid UTF-8 in host", urlmsg.Input{URL: "http://ex\xffample.com/"}, "not a valid name or address"},
		{"percent-encoded invalid UTF-8 in host", urlmsg.Input{URL: "http://%80/"}, "not a valid name or address"},
		{"percent-encoded ASCII in host", urlmsg.Input{URL: "http://ex%41mple.com/"}, "does not parse"},
		{"bad escape", urlmsg.Input{URL: "http://example.com/%zz"}, "does not parse"},
		{"bad escape says what to write", urlmsg.Input{URL: "http://example.com/100%"}, "write a literal '%' as %25"},
		{"host mismatch", urlmsg.Input{Host: "other.example", URL: "http://example.com/"}, "does not match the url's host"},
		{"host mismatch by port", urlmsg.Input{Host: "example.com:8080", URL: "http://example.com/"}, "does not match"},
		{"host mismatch by scheme default port", urlmsg.Input{Host: "example.com:443", URL: "http://example.com/"}, "does not match"},
		{"host mismatch by subdomain", urlmsg.Input{Host: "www.example.com", URL: "http://example.com/"}, "does not match"},
		{"host field bad port", urlmsg.Input{Host: "example.com:99999", URL: "http://example.com/"}, "port"},
		{"host field invalid", urlmsg.Input{Host: "exa mple.com", URL: "http://example.com/"}, "host"},
		{"etag too long", urlmsg.Input{URL: "http://example.com/", ETag: strings.Repeat("e", 513)}, "too long"},
		{"lastModified too long", urlmsg.Input{URL: "http://example.com/", LastModified: strings.Repeat("m", 129)}, "too long"},
		{"etag control character", urlmsg.Input{URL: "http://example.com/", ETag: "\"a\"\r\nX-Evil: 1"}, "control characters"},
		{"lastModified control character", urlmsg.Input{URL: "http://example.com/", LastModified: "Mon\n"}, "control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := urlmsg.Validate(tt.in)
			if err == nil {
				t.Fatalf("Validate(%#v) = %+v, want an error containing %q", tt.in, m, tt.wantErr)
			}
			if !errors.Is(err, urlmsg.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q echoes the password", err)
			}
		})
	}
}

// TestErrorsNeverEchoPasswords: whatever else is wrong with a URL that
// carries credentials, neither the error nor the ItemError shows them.
func TestErrorsNeverEchoPasswords(t *testing.T) {
	const secret = "s3cr3tpw"
	tests := []struct {
		name string
		url  string
	}{
		{"http with user-info", "http://user:" + secret + "@example.com/"},
		{"https with user-info and port", "https://user:" + secret + "@example.com:8443/"},
		{"ftp with user-info", "ftp://user:" + secret + "@example.com/"},
		{"user-info and bad port", "http://user:" + secret + "@example.com:abc/"},
		{"user-info and port out of range", "http://user:" + secret + "@example.com:99999/"},
		{"user-info and a space", "http://user:" + secret + "@example.com/a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := urlmsg.Validate(urlmsg.Input{URL: tt.url})
			if err == nil {
				t.Fatalf("Validate(%q) accepted credentials", tt.url)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Validate error echoes the password: %q", err)
			}
			payload, _ := json.Marshal(map[string]string{"url": tt.url})
			_, bad, perr := urlmsg.Parse("src", payload)
			if perr != nil || len(bad) != 1 {
				t.Fatalf("Parse: bad %+v, err %v; want one ItemError", bad, perr)
			}
			if b, _ := json.Marshal(bad[0]); bytes.Contains(b, []byte(secret)) {
				t.Errorf("ItemError echoes the password: %s", b)
			}
		})
	}
}

func TestParseAcceptsShapes(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    []urlmsg.Message // IDs filled in from MakeID below
		wantIdx []int            // payload index of each message, for its ID
	}{
		{
			name:    "one object",
			payload: `{"host":"example.com","url":"http://example.com/a"}`,
			want:    []urlmsg.Message{{Host: "example.com", URL: "http://example.com/a"}},
			wantIdx: []int{0},
		},
		{
			name:    "object without host",
			payload: `{"url":"HTTP://Example.com:80/a#x"}`,
			want:    []urlmsg.Message{{Host: "example.com", URL: "http://example.com/a"}},
			wantIdx: []int{0},
		},
		{
			name:    "surrounding whitespace",
			payload: " \n\t{\"url\":\"http://example.com/\"}\r\n ",
			want:    []urlmsg.Message{{Host: "example.com", URL: "http://example.com/"}},
			wantIdx: []int{0},
		},
		{
			name:    "bare JSON string",
			payload: `"http://example.com/s"`,
			want:    []urlmsg.Message{{Host: "example.com", URL: "http://example.com/s"}},
			wantIdx: []int{0},
		},
		{
			name:    "array of strings and objects",
			payload: `["http://a.example/1", {"url":"http://b.example/2"}, "https://a.example/3"]`,
			want: []urlmsg.Message{
				{Host: "a.example", URL: "http://a.example/1"},
				{Host: "b.example", URL: "http://b.example/2"},
				{Host: "a.example", URL: "https://a.example/3"},
			},
			wantIdx: []int{0, 1, 2},
		},
		{
			name:    "etag and lastModified carried",
			payload: `{"url":"http://example.com/c","etag":"\"abc\"","lastModified":"Wed, 21 Oct 2015 07:28:00 GMT"}`,
			want:    []urlmsg.Message{{Host: "example.com", URL: "http://example.com/c", ETag: `"abc"`, LastModified: "Wed, 21 Oct 2015 07:28:00 GMT"}},
			wantIdx: []int{0},
		},
		{
			name:    "escaped unicode host",
			payload: `{"url":"http://b\u00fccher.example/"}`,
			want:    []urlmsg.Message{{Host: "xn--bcher-kva.example", URL: "http://xn--bcher-kva.example/"}},
			wantIdx: []int{0},
		},
		{
			name:    "exactly MaxItems",
			payload: "[" + strings.TrimSuffix(strings.Repeat(`"http://example.com/",`, urlmsg.MaxItems), ",") + "]",
			want:    repeatMsg(urlmsg.Message{Host: "example.com", URL: "http://example.com/"}, urlmsg.MaxItems),
			wantIdx: seq(urlmsg.MaxItems),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, bad, err := urlmsg.Parse("msg-1", []byte(tt.payload))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(bad) != 0 {
				t.Fatalf("Parse item errors: %+v", bad)
			}
			if len(msgs) != len(tt.want) {
				t.Fatalf("Parse returned %d messages, want %d", len(msgs), len(tt.want))
			}
			for i, want := range tt.want {
				want.ID = urlmsg.MakeID("msg-1", tt.wantIdx[i], want.URL)
				if msgs[i] != want {
					t.Errorf("message %d = %+v, want %+v", i, msgs[i], want)
				}
			}
		})
	}
}

func repeatMsg(m urlmsg.Message, n int) []urlmsg.Message {
	out := make([]urlmsg.Message, n)
	for i := range out {
		out[i] = m
	}
	return out
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestParseRejectsPayload(t *testing.T) {
	var tooManyItems bytes.Buffer
	tooManyItems.WriteByte('[')
	for i := range 10000 {
		if i > 0 {
			tooManyItems.WriteByte(',')
		}
		fmt.Fprintf(&tooManyItems, `{"url":"http://h%d.example/"}`, i)
	}
	tooManyItems.WriteByte(']')
	if tooManyItems.Len() > urlmsg.MaxPayloadBytes {
		t.Fatalf("test payload of %d bytes would hit the size limit first", tooManyItems.Len())
	}

	tests := []struct {
		name    string
		payload []byte
		wantErr string
	}{
		{"empty", nil, "payload is empty"},
		{"only whitespace", []byte(" \n\t "), "payload is empty"},
		{"invalid UTF-8", []byte("{\"url\":\"http://example.com/\xff\xfe\"}"), "not valid UTF-8"},
		{"invalid UTF-8 in array", []byte("[\"http://example.com/\xc3\x28\"]"), "not valid UTF-8"},
		{"empty array", []byte(`[]`), "empty array"},
		{"empty array with spaces", []byte(` [ ] `), "empty array"},
		{"truncated array", []byte(`[{"url":"http://example.com/"}`), "not a JSON array"},
		{"array with trailing garbage", []byte(`[{"url":"http://example.com/"}] x`), "not a JSON array"},
		{"array with trailing comma", []byte(`["http://example.com/",]`), "not a JSON array"},
		{"one item over MaxItems", []byte("[" + strings.TrimSuffix(strings.Repeat(`"http://example.com/",`, urlmsg.MaxItems+1), ",") + "]"), "1001 items, the limit is 1000"},
		{"10000 items", tooManyItems.Bytes(), "10000 items, the limit is 1000"},
		{"one byte over the size limit", append([]byte(`"http://example.com/`), bytes.Repeat([]byte("a"), urlmsg.MaxPayloadBytes)...), "the limit is 1048576"},
		{"10 MB", bytes.Repeat([]byte("["), 10<<20), "10485760 bytes, the limit is 1048576"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, bad, err := urlmsg.Parse("src", tt.payload)
			if err == nil {
				t.Fatalf("Parse accepted the payload: %d messages, %d item errors", len(msgs), len(bad))
			}
			if msgs != nil || bad != nil {
				t.Errorf("Parse returned items beside a payload error: %+v %+v", msgs, bad)
			}
			if !errors.Is(err, urlmsg.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestParseRejectsHugePayloadBeforeDecoding: a 10 MB payload (deeply nested,
// so decoding it would be slow) is refused by its size alone, with a handful
// of allocations and no pass over its bytes.
func TestParseRejectsHugePayloadBeforeDecoding(t *testing.T) {
	payload := bytes.Repeat([]byte("["), 10<<20)
	allocs := testing.AllocsPerRun(5, func() {
		if _, _, err := urlmsg.Parse("src", payload); err == nil {
			t.Fatal("Parse accepted 10 MB")
		}
	})
	if allocs > 20 {
		t.Errorf("Parse made %.0f allocations to reject an oversized payload; want it refused on its length", allocs)
	}
}

// TestParseRejectsTrailingData: a single object followed by more JSON (or
// garbage) is malformed, not "the first object": the rest must not vanish
// silently.
func TestParseRejectsTrailingData(t *testing.T) {
	tests := []struct {
		name    string
		payload string
	}{
		{"garbage after object", `{"url":"http://a.example/"}garbage`},
		{"second object", `{"url":"http://a.example/"} {"url":"http://b.example/"}`},
		{"extra closing brace", `{"url":"http://a.example/"}}`},
		{"truncated object", `{"url":"http://a.example/"`},
		{"garbage after string", `"http://a.example/" x`},
		{"not JSON", `url=http://a.example/`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _, err := urlmsg.Parse("src", []byte(tt.payload))
			if err == nil && len(msgs) > 0 {
				t.Errorf("Parse(%s) accepted %+v; want the payload (or its one item) rejected as malformed JSON", tt.payload, msgs)
			}
		})
	}
}

func TestParseItemErrors(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		wantOK  []int          // payload indexes accepted, in order
		wantBad map[int]string // payload index -> error substring
	}{
		{
			name:    "mixed good and bad",
			payload: `["http://a.example/", "ftp://a.example/", {"url":"http://b.example/"}, {"url":"http://c.example/","host":"d.example"}, 5, null, "http://e .example/x", {"url":"https://f.example/"}]`,
			wantOK:  []int{0, 2, 7},
			wantBad: map[int]string{1: "scheme", 3: "does not match", 4: "not an object", 5: "not an object", 6: "host has a space"},
		},
		{
			name:    "unknown field",
			payload: `{"url":"http://example.com/","priority":1}`,
			wantBad: map[int]string{0: `unknown field "priority"`},
		},
		{
			name:    "unknown field in array item",
			payload: `[{"url":"http://example.com/"},{"url":"http://example.com/","Url2":"x"}]`,
			wantOK:  []int{0},
			wantBad: map[int]string{1: "unknown field"},
		},
		{
			name:    "wrong field type",
			payload: `{"url":42}`,
			wantBad: map[int]string{0: `field "url" must be a JSON string, not a number`},
		},
		{
			name:    "null url",
			payload: `{"url":null}`,
			wantBad: map[int]string{0: "url is empty"},
		},
		{
			name:    "nested array item",
			payload: `[["http://example.com/"]]`,
			wantBad: map[int]string{0: "not an object"},
		},
		{
			name:    "control character escaped in JSON, in the host",
			payload: `{"url":"http://exa\u0000mple.com/"}`,
			wantBad: map[int]string{0: "control character"},
		},
		{
			name:    "user-info in string item",
			payload: `["http://u:p@example.com/"]`,
			wantBad: map[int]string{0: "user-info"},
		},
		{
			name:    "javascript scheme",
			payload: `{"url":"javascript:alert(document.cookie)"}`,
			wantBad: map[int]string{0: "scheme must be http or https"},
		},
		{
			name:    "data scheme",
			payload: `{"url":"data:text/plain;base64,aGk="}`,
			wantBad: map[int]string{0: "scheme must be http or https"},
		},
		{
			name:    "long url",
			payload: `{"url":"http://example.com/` + strings.Repeat("x", 2100) + `"}`,
			wantBad: map[int]string{0: "the limit is 2048"},
		},
		{
			name:    "empty host",
			payload: `{"url":"http:///x"}`,
			wantBad: map[int]string{0: "host is empty"},
		},
		{
			name:    "bad port",
			payload: `["http://example.com:99999/", "http://example.com:abc/"]`,
			wantBad: map[int]string{0: "port", 1: "port"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, bad, err := urlmsg.Parse("src", []byte(tt.payload))
			if err != nil {
				t.Fatalf("Parse: payload error %v; want item errors", err)
			}
			if len(msgs) != len(tt.wantOK) {
				t.Fatalf("accepted %d items %+v, want %d", len(msgs), msgs, len(tt.wantOK))
			}
			for i, idx := range tt.wantOK {
				if want := urlmsg.MakeID("src", idx, msgs[i].URL); msgs[i].ID != want {
					t.Errorf("message %d (%s) has ID %s, want the ID of payload index %d (%s)", i, msgs[i].URL, msgs[i].ID, idx, want)
				}
			}
			if len(bad) != len(tt.wantBad) {
				t.Fatalf("item errors %+v, want %d", bad, len(tt.wantBad))
			}
			for i, ie := range bad {
				want, ok := tt.wantBad[ie.Index]
				if !ok {
					t.Errorf("unexpected item error at index %d: %s", ie.Index, ie.Error)
					continue
				}
				if !strings.Contains(ie.Error, want) {
					t.Errorf("item %d error %q does not contain %q", ie.Index, ie.Error, want)
				}
				if i > 0 && bad[i-1].Index >= ie.Index {
					t.Errorf("item errors not in payload order: %+v", bad)
				}
				if len(ie.URL) > 210 {
					t.Errorf("item %d echoes a %d-byte url; want it clipped", ie.Index, len(ie.URL))
				}
			}
		})
	}
}

func TestMakeID(t *testing.T) {
	const u = "http://example.com/"
	base := urlmsg.MakeID("msg-1", 0, u)
	if !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(base) {
		t.Fatalf("MakeID = %q, want 24 lowercase hex digits", base)
	}
	if again := urlmsg.MakeID("msg-1", 0, u); again != base {
		t.Errorf("MakeID not stable: %q then %q", base, again)
	}
	tests := []struct {
		name   string
		source string
		index  int
		url    string
	}{
		{"other source", "msg-2", 0, u},
		{"other index", "msg-1", 1, u},
		{"other url", "msg-1", 0, "http://example.com/x"},
		{"source and index shifted", "msg-10", 0, u},
		{"empty source", "", 0, u},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if id := urlmsg.MakeID(tt.source, tt.index, tt.url); id == base {
				t.Errorf("MakeID(%q, %d, %q) = %q, same as MakeID(msg-1, 0, %q)", tt.source, tt.index, tt.url, id, u)
			}
		})
	}
}

func TestParseIDsStableAcrossRedelivery(t *testing.T) {
	payload := []byte(`["http://a.example/", "http://a.example/", "http://b.example/"]`)
	first, _, err := urlmsg.Parse("msg-1", payload)
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := urlmsg.Parse("msg-1", payload)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := urlmsg.Parse("msg-2", payload)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range first {
		if first[i].ID != second[i].ID {
			t.Errorf("item %d: ID %s on first delivery, %s on the second", i, first[i].ID, second[i].ID)
		}
		if first[i].ID == other[i].ID {
			t.Errorf("item %d: same ID %s for two source records", i, first[i].ID)
		}
		if seen[first[i].ID] {
			t.Errorf("item %d: ID %s repeats within one payload (same URL at two indexes)", i, first[i].ID)
		}
		seen[first[i].ID] = true
	}
}
