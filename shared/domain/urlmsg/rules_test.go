package urlmsg_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

const bom = "\xef\xbb\xbf"

// TestParseInputRules: the rules every entrance shares, as Parse applies
// them to a queue message or a POST /urls body (files and stdin reach
// Parse through LineBody, see TestLineBody).
func TestParseInputRules(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		wantURL []string         // accepted, in order
		wantBad map[int][]string // item index -> substrings of its error
		wantErr []string         // substrings of a payload error
	}{
		{name: "BOM before an object", payload: bom + `{"url":"http://example.com/a"}`, wantURL: []string{"http://example.com/a"}},
		{name: "BOM before an array", payload: bom + `["http://example.com/a"]`, wantURL: []string{"http://example.com/a"}},
		{name: "BOM before a string", payload: bom + `"http://example.com/a"`, wantURL: []string{"http://example.com/a"}},
		{name: "BOM then whitespace", payload: bom + " \n" + `"http://example.com/a"`, wantURL: []string{"http://example.com/a"}},
		{name: "two BOMs: the second is not skipped", payload: bom + bom + `"http://example.com/a"`, wantErr: []string{"not one JSON object"}},
		{name: "BOM alone", payload: bom, wantErr: []string{"payload is empty"}},

		{name: "raw space in a path", payload: `["http://example.com/a b", {"url":"http://example.com/?q=a b"}]`,
			wantURL: []string{"http://example.com/a%20b", "http://example.com/?q=a%20b"}},
		{name: "non-ASCII path written as JSON escapes", payload: `{"url":"http://example.com/caf\u00e9"}`, wantURL: []string{"http://example.com/caf%C3%A9"}},

		{name: "unknown field names it and the known ones", payload: `{"url":"http://example.com/","priority":1}`,
			wantBad: map[int][]string{0: {`unknown field "priority"`, "host, url, etag, lastModified"}}},
		{name: "misspelt validator is refused, with the right name", payload: `{"url":"http://example.com/","lastModfied":"Wed, 21 Oct 2015 07:28:00 GMT"}`,
			wantBad: map[int][]string{0: {`unknown field "lastModfied" (did you mean "lastModified"?)`}}},
		{name: "names are case-sensitive", payload: `{"URL":"http://example.com/"}`,
			wantBad: map[int][]string{0: {`unknown field "URL" (did you mean "url"?)`}}},
		{name: "etags for etag", payload: `{"url":"http://example.com/","etags":"x"}`,
			wantBad: map[int][]string{0: {`"etags" (did you mean "etag"?)`}}},
		{name: "no suggestion for a name far from every field", payload: `{"url":"http://example.com/","priority":1}`,
			wantBad: map[int][]string{0: {`"priority": an item's fields`}}},
		{name: "several unknown fields", payload: `{"a":1,"b":2,"url":"http://example.com/","c":3,"d":4}`,
			wantBad: map[int][]string{0: {`unknown fields "a", "b", "c", and 1 more`}}},
		{name: "unknown field in one item of an array", payload: `["http://example.com/1", {"url":"http://example.com/2","note":"x"}, "http://example.com/3"]`,
			wantURL: []string{"http://example.com/1", "http://example.com/3"}, wantBad: map[int][]string{1: {`unknown field "note"`}}},
		{name: "a field twice", payload: `{"url":"http://example.com/a","url":"http://example.com/b"}`,
			wantBad: map[int][]string{0: {`field "url" appears twice`}}},
		{name: "an escaped name is the name", payload: `{"\u0075rl":"http://example.com/"}`, wantURL: []string{"http://example.com/"}},
		{name: "escaped name twice", payload: `{"url":"http://example.com/a","\u0075rl":"http://example.com/b"}`,
			wantBad: map[int][]string{0: {`field "url" appears twice`}}},
		{name: "quotes, commas and braces inside values", payload: `{"etag":"\"a,{\"b\":[1]}\"","url":"http://example.com/"}`, wantURL: []string{"http://example.com/"}},
		{name: "names inside a nested value are not fields", payload: `{"meta":{"url":"x","etag":"y"},"url":"http://example.com/"}`,
			wantBad: map[int][]string{0: {`unknown field "meta":`}}},
		{name: "unknown field after a nested array", payload: `{"url":"http://example.com/","tags":["a","b"],"ur":1}`,
			wantBad: map[int][]string{0: {`unknown fields "tags", "ur" (did you mean "url"?)`}}},
		{name: "null is absent", payload: `{"url":"http://example.com/","etag":null,"host":null}`, wantURL: []string{"http://example.com/"}},
		{name: "a field of the wrong type", payload: `{"url":"http://example.com/","etag":{"v":1}}`,
			wantBad: map[int][]string{0: {`field "etag" must be a JSON string, not an object`}}},

		{name: "invalid UTF-8 says where and what to do", payload: "{\"url\":\"http://example.com/caf\xe9\"}",
			wantErr: []string{"not valid UTF-8", "byte 0xE9 at offset 30", "percent-encoded (%E9)"}},
		{name: "UTF-16 says so", payload: "\xff\xfe{\x00", wantErr: []string{"UTF-16", "as UTF-8"}},
		{name: "malformed object says why", payload: `{"url" "http://example.com/"}`, wantErr: []string{"not one JSON object", "invalid character"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, bad, err := urlmsg.Parse("src", []byte(tt.payload))
			if tt.wantErr != nil {
				if err == nil || !errors.Is(err, urlmsg.ErrInvalid) {
					t.Fatalf("Parse = %+v %+v %v, want an invalid-input error", msgs, bad, err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var urls []string
			for _, m := range msgs {
				urls = append(urls, m.URL)
			}
			if strings.Join(urls, " ") != strings.Join(tt.wantURL, " ") {
				t.Errorf("accepted %q, want %q", urls, tt.wantURL)
			}
			if len(bad) != len(tt.wantBad) {
				t.Fatalf("item errors %+v, want %d", bad, len(tt.wantBad))
			}
			for _, ie := range bad {
				for _, w := range tt.wantBad[ie.Index] {
					if !strings.Contains(ie.Error, w) {
						t.Errorf("item %d: error %q does not contain %q", ie.Index, ie.Error, w)
					}
				}
			}
		})
	}
}

// TestParseMisspeltFieldKeepsURL: the refusal of an item with an unknown
// field still shows its URL, wherever the field stands.
func TestParseMisspeltFieldKeepsURL(t *testing.T) {
	_, bad, err := urlmsg.Parse("src", []byte(`{"lastModfied":"x","url":"http://example.com/a"}`))
	if err != nil || len(bad) != 1 || bad[0].URL != "http://example.com/a" {
		t.Errorf("Parse = %+v, %v; want one item error showing http://example.com/a", bad, err)
	}
}

func TestLineBody(t *testing.T) {
	tests := []struct {
		name, line string
		wantBody   string // "" means skipped (nil body) or refused
		wantItems  int
		wantErr    string
	}{
		{name: "bare URL", line: "http://example.com/a", wantBody: `"http://example.com/a"`, wantItems: 1},
		{name: "BOM before a bare URL", line: bom + "http://example.com/a", wantBody: `"http://example.com/a"`, wantItems: 1},
		{name: "BOM before an object", line: bom + `{"url":"http://example.com/a"}`, wantBody: `{"url":"http://example.com/a"}`, wantItems: 1},
		{name: "BOM alone", line: bom},
		{name: "BOM before a comment", line: bom + "# urls"},
		{name: "CRLF and spaces around", line: "  http://example.com/a \r", wantBody: `"http://example.com/a"`, wantItems: 1},
		{name: "raw space inside: sent, Parse encodes it", line: "http://example.com/a b", wantBody: `"http://example.com/a b"`, wantItems: 1},
		{name: "invalid UTF-8 byte encoded, never replaced", line: "http://example.com/caf\xe9?q=\xff", wantBody: `"http://example.com/caf%E9?q=%FF"`, wantItems: 1},
		{name: "valid UTF-8 kept for Parse", line: "http://example.com/café", wantBody: `"http://example.com/café"`, wantItems: 1},
		{name: "object sent as written, unknown fields and all", line: `{"url":"http://example.com/","note":1}`, wantBody: `{"url":"http://example.com/","note":1}`, wantItems: 1},
		{name: "array counted", line: `["http://example.com/1", {"url":"http://example.com/2"}]`, wantBody: `["http://example.com/1", {"url":"http://example.com/2"}]`, wantItems: 2},
		{name: "JSON string", line: `"http://example.com/a"`, wantBody: `"http://example.com/a"`, wantItems: 1},
		{name: "blank", line: " \t "},
		{name: "comment", line: "# http://example.com/"},
		{name: "bad object", line: `{"url": `, wantErr: "not a JSON object"},
		{name: "bad array", line: `["http://example.com/"`, wantErr: "not a JSON array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, n, err := urlmsg.LineBody([]byte(tt.line))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || body != nil {
					t.Errorf("LineBody = %q, %v; want a refusal containing %q", body, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(body) != tt.wantBody || n != tt.wantItems {
				t.Errorf("LineBody = %q %d %v, want %q %d", body, n, err, tt.wantBody, tt.wantItems)
			}
			if body != nil && !json.Valid(body) {
				t.Errorf("body %q is not JSON", body)
			}
		})
	}
}

// TestLineBodyThenParse: a file's line ends as the same URL as the same
// URL sent to the queue or to POST /urls.
func TestLineBodyThenParse(t *testing.T) {
	tests := []struct{ line, wantURL string }{
		{bom + "http://example.com/a b", "http://example.com/a%20b"},
		{"http://example.com/caf\xe9", "http://example.com/caf%E9"},
		{"http://example.com/café", "http://example.com/caf%C3%A9"},
		{"http://example.com/?q=\xff \xfe", "http://example.com/?q=%FF%20%FE"},
	}
	for _, tt := range tests {
		body, _, err := urlmsg.LineBody([]byte(tt.line))
		if err != nil {
			t.Fatalf("LineBody(%q): %v", tt.line, err)
		}
		msgs, bad, err := urlmsg.Parse("src", body)
		if err != nil || len(bad) != 0 || len(msgs) != 1 || msgs[0].URL != tt.wantURL {
			t.Errorf("line %q: Parse(%s) = %+v %+v %v, want %s", tt.line, body, msgs, bad, err, tt.wantURL)
		}
	}
}
