package localmode

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
)

const bom = "\xef\xbb\xbf"

// inputRulesLines exercise the input rules every entrance shares
// (urlmsg): what each line queues or why it is refused.
var inputRulesLines = []string{
	bom + "http://a.example/1",                                          // 1: BOM at the start of the file
	"http://a.example/a b",                                              // 2: raw space
	"http://a.example/caf\xe9",                                          // 3: a byte that is not UTF-8
	`{"url": "http://a.example/2", "lastModfied": "x"}`,                 // 4: misspelt field
	`{"url": "http://a.example/3", "etag": "\"e\""}`,                    // 5: known fields
	"{\"url\": \"http://a.example/caf\xe9\"}",                           // 6: JSON that is not UTF-8
	"http://a .example/",                                                // 7: space in the host
	bom + "http://b.example/1",                                          // 8: BOM of a file joined with cat
	"http://a.example/?q=café",                                          // 9: non-ASCII query
	`["http://b.example/2", {"url": "http://b.example/3", "URL": "x"}]`, // 10: unknown field in an array
}

var inputRulesQueued = []string{
	"http://a.example/1",
	"http://a.example/a%20b",
	"http://a.example/caf%E9",
	"http://a.example/3",
	"http://b.example/1",
	"http://a.example/?q=caf%C3%A9",
}

var inputRulesRejected = map[int64][]string{
	4:  {`unknown field "lastModfied" (did you mean "lastModified"?)`, "host, url, etag, lastModified"},
	6:  {"not valid UTF-8", "byte 0xE9 at offset 29", "(%E9)"},
	7:  {"host has a space"},
	10: {"item 1", `unknown field "URL" (did you mean "url"?)`},
}

// TestFeedInputRules: a file and stdin queue what the rules accept, and
// report each refused line by number with what to change.
func TestFeedInputRules(t *testing.T) {
	for _, entrance := range []string{"file", "stdin"} {
		t.Run(entrance, func(t *testing.T) {
			rt := open(t, Options{Out: io.Discard})
			var rejected []Rejected
			rt.opts.OnReject = func(r Rejected) { rejected = append(rejected, r) }
			in := Input{Name: "stdin", R: strings.NewReader(strings.Join(inputRulesLines, "\n") + "\n")}
			if entrance == "file" {
				in = *fileInput(t, writeLines(t, inputRulesLines))
			}
			rep, err := rt.feed(context.Background(), in, make(chan struct{}))
			if err != nil {
				t.Fatal(err)
			}
			got := map[int64]string{}
			for _, r := range rejected {
				got[r.Line] = r.Error
			}
			if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(inputRulesRejected))) {
				t.Fatalf("rejected %+v, want lines 4, 6, 7 and 10", rejected)
			}
			for line, wants := range inputRulesRejected {
				for _, w := range wants {
					if !strings.Contains(got[line], w) {
						t.Errorf("line %d rejected for %q, want it to say %q", line, got[line], w)
					}
				}
			}
			queued, err := queuedEntries(context.Background(), rt.store)
			if err != nil {
				t.Fatal(err)
			}
			if urls := slices.Sorted(maps.Values(queued)); !slices.Equal(urls, slices.Sorted(slices.Values(inputRulesQueued))) {
				t.Errorf("queued %q, want %q", urls, inputRulesQueued)
			}
			if rep.URLs != int64(len(inputRulesQueued)) || rep.Rejected != 4 || rep.Lines != int64(len(inputRulesLines)) {
				t.Errorf("report %+v, want %d urls and 4 rejected of %d lines", rep, len(inputRulesQueued), len(inputRulesLines))
			}
		})
	}
}

// TestFeedBOMOnlyFile: a file holding nothing but a BOM (and a comment)
// is an empty input, not a refused line.
func TestFeedBOMOnlyFile(t *testing.T) {
	rt := open(t, Options{Out: io.Discard})
	path := filepath.Join(t.TempDir(), "urls.txt")
	if err := os.WriteFile(path, []byte(bom+"# my list\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := rt.feed(context.Background(), *fileInput(t, path), make(chan struct{}))
	if err != nil || rep.URLs != 0 || rep.Rejected != 0 || !rep.EOF {
		t.Errorf("feed = %+v, %v; want an empty input read to its end", rep, err)
	}
}

// TestServeInputRules: serve mode's POST /urls applies the same rules,
// and answers 400 when it accepted nothing.
func TestServeInputRules(t *testing.T) {
	rt := open(t, Options{Out: io.Discard})
	base := listen(t, rt, ServeOptions{})
	post := func(body string) (int, ingesthandler.APIResponse) {
		t.Helper()
		resp, err := http.Post(base+"/urls", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ar ingesthandler.APIResponse
		if err := json.NewDecoder(resp.Body).Decode(&ar); err != nil {
			t.Fatalf("answer %d is not the API's: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, ar
	}
	code, ar := post(bom + `["http://a.example/a b", {"url": "http://a.example/1", "lastModfied": "x"}]`)
	if code != http.StatusAccepted || ar.Accepted != 1 || len(ar.Errors) != 1 || ar.Errors[0].Index != 1 ||
		!strings.Contains(ar.Errors[0].Error, `did you mean "lastModified"?`) {
		t.Errorf("BOM, raw space, misspelt field: %d %+v, want 202 with item 1 refused", code, ar)
	}
	code, ar = post(`[{"url": "http://a.example/2", "priority": 1}, "http://a .example/"]`)
	if code != http.StatusBadRequest || ar.Accepted != 0 || len(ar.Errors) != 2 || !strings.Contains(ar.Message, "no item was accepted") {
		t.Errorf("nothing valid: %d %+v, want 400 listing both items", code, ar)
	}
	queued, err := queuedEntries(context.Background(), rt.store)
	if err != nil {
		t.Fatal(err)
	}
	if urls := slices.Collect(maps.Values(queued)); !slices.Equal(urls, []string{"http://a.example/a%20b"}) {
		t.Errorf("queued %q, want only http://a.example/a%%20b", urls)
	}
}
