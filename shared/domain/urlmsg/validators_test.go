package urlmsg_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// TestParseValidatorsURL: an item's validatorsUrl (the URL its etag and
// lastModified were recorded for, a redirect target) is kept normalised as
// redirect targets are, dropped when it names the item's own URL, and
// refused with a clear error for that item alone when it is no usable
// URL or comes without a validator.
func TestParseValidatorsURL(t *testing.T) {
	long := "http://example.com/" + strings.Repeat("a", urlmsg.MaxURLLength)
	tests := []struct {
		name    string
		item    string
		want    string   // the message's ValidatorsURL when accepted
		wantBad []string // substrings of the item's error
	}{
		{name: "absent", item: `{"url":"http://example.com/a","etag":"\"v\""}`},
		{name: "null is absent", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":null}`},
		{name: "a target on the same host", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":"http://example.com/b"}`,
			want: "http://example.com/b"},
		{name: "a target on another host, with lastModified only", item: `{"url":"http://example.com/a","lastModified":"Tue, 01 Dec 2026 10:00:00 GMT","validatorsUrl":"https://www.example.com/b"}`,
			want: "https://www.example.com/b"},
		{name: "normalised as redirect targets are", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":"HTTP://Example.COM:80/b c#top"}`,
			want: "http://example.com/b%20c"},
		{name: "the URL itself in another spelling means its own", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":"http://EXAMPLE.com:80/a#x"}`},
		{name: "without a validator", item: `{"url":"http://example.com/a","validatorsUrl":"http://example.com/b"}`,
			wantBad: []string{"validatorsUrl is set without etag or lastModified"}},
		{name: "with empty validators", item: `{"url":"http://example.com/a","etag":"","validatorsUrl":"http://example.com/b"}`,
			wantBad: []string{"validatorsUrl is set without etag or lastModified"}},
		{name: "not http", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":"ftp://example.com/b"}`,
			wantBad: []string{"invalid input: validatorsUrl: url \"ftp://example.com/b\"", "scheme must be http or https"}},
		{name: "relative", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":"/b"}`,
			wantBad: []string{"validatorsUrl: url \"/b\""}},
		{name: "too long", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":"` + long + `"}`,
			wantBad: []string{"validatorsUrl: url is", "the limit is 2048"}},
		{name: "not a string", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":["http://example.com/b"]}`,
			wantBad: []string{`field "validatorsUrl" must be a JSON string, not an array`}},
		{name: "misspelt", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsURL":"http://example.com/b"}`,
			wantBad: []string{`unknown field "validatorsURL" (did you mean "validatorsUrl"?)`}},
		{name: "twice", item: `{"url":"http://example.com/a","etag":"\"v\"","validatorsUrl":"http://example.com/b","validatorsUrl":"http://example.com/c"}`,
			wantBad: []string{`field "validatorsUrl" appears twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Between two good neighbours, which it must never harm.
			payload := `["http://example.com/before",` + tt.item + `,"http://example.com/after"]`
			msgs, bad, err := urlmsg.Parse("src", []byte(payload))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tt.wantBad != nil {
				if len(bad) != 1 || bad[0].Index != 1 || len(msgs) != 2 || msgs[0].URL != "http://example.com/before" || msgs[1].URL != "http://example.com/after" {
					t.Fatalf("accepted %+v, item errors %+v; want item 1 refused and its neighbours accepted", msgs, bad)
				}
				for _, w := range tt.wantBad {
					if !strings.Contains(bad[0].Error, w) {
						t.Errorf("error %q does not contain %q", bad[0].Error, w)
					}
				}
				return
			}
			if len(bad) != 0 || len(msgs) != 3 {
				t.Fatalf("accepted %d, item errors %+v; want all 3 accepted", len(msgs), bad)
			}
			if got := msgs[1].ValidatorsURL; got != tt.want {
				t.Errorf("ValidatorsURL = %q, want %q", got, tt.want)
			}
			if msgs[0].ValidatorsURL != "" || msgs[2].ValidatorsURL != "" {
				t.Errorf("a neighbour got a validators url: %+v", msgs)
			}
		})
	}
}

// TestValidatorsURLNeverEchoesPasswords: a validatorsUrl with user-info
// is refused without the password in the error.
func TestValidatorsURLNeverEchoesPasswords(t *testing.T) {
	const secret = "s3cr3tpw"
	payload, _ := json.Marshal(map[string]string{"url": "http://example.com/a", "etag": `"v"`, "validatorsUrl": "http://user:" + secret + "@example.com/b"})
	_, bad, err := urlmsg.Parse("src", payload)
	if err != nil || len(bad) != 1 || !strings.Contains(bad[0].Error, "validatorsUrl") {
		t.Fatalf("Parse: item errors %+v, err %v; want one naming validatorsUrl", bad, err)
	}
	if strings.Contains(bad[0].Error, secret) {
		t.Errorf("the error echoes the password: %q", bad[0].Error)
	}
}
