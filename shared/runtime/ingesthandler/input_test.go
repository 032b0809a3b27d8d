package ingesthandler_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

const bom = "\xef\xbb\xbf"

// TestAPIInputRules: POST /urls applies the input rules every entrance
// shares (urlmsg.Parse) and answers 202 only when something was accepted,
// with or without an Idempotency-Key, over the real Ingester and store.
func TestAPIInputRules(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantCode   int
		wantURLs   []string       // queued, in order
		wantErrors map[int]string // item index -> substring of its error
		wantMsg    string         // substring of the message
		wantHosts  map[string]int // pending per host
	}{
		{name: "BOM before the body", body: bom + `["http://a.example/1", {"url": "http://a.example/2"}]`,
			wantCode: 202, wantURLs: []string{"http://a.example/1", "http://a.example/2"}, wantHosts: map[string]int{"a.example": 2}},
		{name: "raw space and non-ASCII encoded as a browser does", body: `["http://a.example/a b", "http://a.example/?q=café"]`,
			wantCode: 202, wantURLs: []string{"http://a.example/a%20b", "http://a.example/?q=caf%C3%A9"}, wantHosts: map[string]int{"a.example": 2}},
		{name: "unknown field refused beside an accepted item", body: `[{"url": "http://a.example/1", "lastModfied": "x"}, "http://b.example/1"]`,
			wantCode: 202, wantURLs: []string{"http://b.example/1"}, wantErrors: map[int]string{0: `unknown field "lastModfied" (did you mean "lastModified"?)`},
			wantHosts: map[string]int{"a.example": 0, "b.example": 1}},
		{name: "every item refused: 400 naming each", body: `[{"url": "http://a.example/1", "priority": 1}, "ftp://a.example/2", "http://a .example/"]`,
			wantCode: 400, wantMsg: "no item was accepted",
			wantErrors: map[int]string{0: `unknown field "priority"`, 1: "scheme must be http or https", 2: "host has a space"},
			wantHosts:  map[string]int{"a.example": 0}},
		{name: "one object refused: 400", body: `{"URL": "http://a.example/1"}`,
			wantCode: 400, wantMsg: "no item was accepted", wantErrors: map[int]string{0: `did you mean "url"?`}},
		{name: "invalid UTF-8: 400 saying where", body: "[\"http://a.example/caf\xe9\"]",
			wantCode: 400, wantMsg: "byte 0xE9 at offset 22"},
	}
	for _, tt := range tests {
		for _, key := range []string{"", "key-1"} {
			name := tt.name
			if key != "" {
				name += " (Idempotency-Key)"
			}
			t.Run(name, func(t *testing.T) {
				e := newIdemEnv(t)
				resp, body := e.post(tt.body, key, "alice")
				if resp.StatusCode != tt.wantCode {
					t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantCode, resp.Body)
				}
				if !strings.Contains(body.Message, tt.wantMsg) {
					t.Errorf("message %q does not contain %q", body.Message, tt.wantMsg)
				}
				if body.Accepted != len(tt.wantURLs) || len(body.IDs) != len(tt.wantURLs) {
					t.Errorf("accepted %d ids %v, want %d", body.Accepted, body.IDs, len(tt.wantURLs))
				}
				if len(body.Errors) != len(tt.wantErrors) {
					t.Fatalf("errors %+v, want %d", body.Errors, len(tt.wantErrors))
				}
				for _, ie := range body.Errors {
					if w, ok := tt.wantErrors[ie.Index]; !ok || !strings.Contains(ie.Error, w) {
						t.Errorf("item %d: error %q, want one containing %q", ie.Index, ie.Error, w)
					}
				}
				for host, n := range tt.wantHosts {
					if got := e.pending(host); got[0] != n {
						t.Errorf("%s holds %d urls, want %d", host, got[0], n)
					}
				}
				for _, u := range tt.wantURLs {
					host := strings.SplitN(strings.TrimPrefix(u, "http://"), "/", 2)[0]
					if !e.queued(host, u) {
						t.Errorf("%s not queued", u)
					}
				}
			})
		}
	}
}

// queued reports whether url waits in host's queue.
func (e *idemEnv) queued(host, url string) bool {
	e.t.Helper()
	st, err := e.store.Load(context.Background(), host, 100)
	if err != nil {
		e.t.Fatalf("load %s: %v", host, err)
	}
	return slices.ContainsFunc(st.Head, func(en hostqueue.Entry) bool { return en.URL == url })
}

// TestAPINotQueuedNamesItsIndex: an item the store could not take is named
// by its index in the request, like an invalid one, and keeps the 503.
func TestAPINotQueuedNamesItsIndex(t *testing.T) {
	ing := &fakeIngester{ingest: failHost("b.example")}
	h := newHandler(ing, nil)
	ev := apiRequest(t) // items: 0 a.example, 1 ftp, 2 b.example, 3 user-info, 4 bücher
	resp, err := h.HandleAPI(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	body := decodeAPI(t, resp)
	var idx []int
	for _, e := range body.Errors {
		idx = append(idx, e.Index)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || !slices.Equal(idx, []int{1, 3, 2}) {
		t.Errorf("status %d, error indexes %v; want 503 with the invalid items 1 and 3, then 2 not queued: %s", resp.StatusCode, idx, resp.Body)
	}
}

// TestAPINothingQueuedIsStill503: valid items that all failed for a
// retryable reason are a 503 (retry them), not a 400.
func TestAPINothingQueuedIsStill503(t *testing.T) {
	ing := &fakeIngester{ingest: failHost("a.example")}
	h := newHandler(ing, nil)
	ev := apiRequest(t)
	ev.Body = `["http://a.example/1", "ftp://a.example/2"]`
	resp, err := h.HandleAPI(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	body := decodeAPI(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || body.Accepted != 0 || len(body.Errors) != 2 || body.Errors[1].Index != 0 {
		t.Errorf("status %d %+v, want 503 listing item 1 invalid and item 0 not queued", resp.StatusCode, body)
	}
}

// TestSQSInputRules: the input queue applies the same rules, a record
// failing whole when any item breaks one, logged with the item's index.
func TestSQSInputRules(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantFailed bool
		wantURLs   []string
		wantLog    string
	}{
		{name: "BOM before the body", body: bom + `{"url": "http://a.example/1"}`, wantURLs: []string{"http://a.example/1"}},
		{name: "raw space encoded", body: `"http://a.example/a b"`, wantURLs: []string{"http://a.example/a%20b"}},
		{name: "tab and newline removed", body: `"http://a.example/a\tb\n"`, wantURLs: []string{"http://a.example/ab"}},
		{name: "unknown field fails the record", body: `["http://a.example/1", {"url": "http://a.example/2", "etags": "x"}]`, wantFailed: true,
			wantLog: `item 1: invalid input: unknown field \"etags\" (did you mean \"etag\"?)`},
		{name: "a field twice fails the record", body: `{"url": "http://a.example/1", "url": "http://a.example/2"}`, wantFailed: true,
			wantLog: `field \"url\" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := &fakeIngester{}
			var log bytes.Buffer
			h := newHandler(ing, &log)
			resp, err := h.HandleSQS(context.Background(), sqsEvent(tt.body, `"http://z.example/"`))
			if err != nil {
				t.Fatal(err)
			}
			wantFailed := []string(nil)
			if tt.wantFailed {
				wantFailed = []string{"m0"}
			}
			if got := failureIDs(resp); !slices.Equal(got, wantFailed) {
				t.Errorf("failures %v, want %v", got, wantFailed)
			}
			var urls []string
			for _, m := range ing.all() {
				urls = append(urls, m.URL)
			}
			if want := append(slices.Clone(tt.wantURLs), "http://z.example/"); !slices.Equal(urls, want) {
				t.Errorf("ingested %v, want %v", urls, want)
			}
			if !strings.Contains(log.String(), tt.wantLog) {
				t.Errorf("log does not contain %q:\n%s", tt.wantLog, log.String())
			}
		})
	}
}
