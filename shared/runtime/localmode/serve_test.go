package localmode

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestServe accepts URLs through POST /urls (the ingest handler's API path
// behind the proxy-event adapter, behind serve mode's guard) and writes
// their results as they come, until the context ends.
func TestServe(t *testing.T) {
	t.Parallel()
	site := startSite(t, demosite.Options{Hosts: 2})
	h0, h1 := site.Hosts()[0], site.Hosts()[1]
	outPath := filepath.Join(t.TempDir(), "out.jsonl")
	var mu sync.Mutex
	got := map[string]result.Result{}
	arrived := make(chan struct{}, 100)
	rt := open(t, Options{
		State: filepath.Join(t.TempDir(), "state.db"), Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": "100ms"},
		OnResult: func(r result.Result) {
			mu.Lock()
			got[r.ID] = r
			mu.Unlock()
			arrived <- struct{}{}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan Report, 1)
	go func() {
		rep, err := rt.Run(ctx, RunOptions{Serve: true})
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	base := listen(t, rt, ServeOptions{})
	client := &http.Client{Timeout: time.Minute}

	postKey := func(method, body, key string) (int, ingesthandler.APIResponse) {
		t.Helper()
		req, err := http.NewRequest(method, base+"/urls", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set(ingesthandler.IdempotencyHeader, key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ar ingesthandler.APIResponse
		if err := json.NewDecoder(resp.Body).Decode(&ar); err != nil {
			t.Fatalf("%s /urls answered %d with a body that is not the API's: %v", method, resp.StatusCode, err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		return resp.StatusCode, ar
	}
	post := func(method, body string) (int, ingesthandler.APIResponse) {
		t.Helper()
		return postKey(method, body, "")
	}

	var ids []string
	// One object.
	code, ar := post(http.MethodPost, `{"url": "`+site.URL(h0, 0)+`"}`)
	if code != http.StatusAccepted || ar.Accepted != 1 || len(ar.IDs) != 1 {
		t.Fatalf("one object: %d %+v", code, ar)
	}
	ids = append(ids, ar.IDs...)
	// An array, with one invalid item listed and the rest accepted.
	arr, _ := json.Marshal([]any{site.URL(h1, 0), map[string]string{"url": site.URL(h1, 1)}, "ftp://x/", map[string]string{"host": h0, "url": site.URL(h0, 1)}})
	code, ar = post(http.MethodPost, string(arr))
	if code != http.StatusAccepted || ar.Accepted != 3 || len(ar.Errors) != 1 || ar.Errors[0].Index != 2 {
		t.Fatalf("array: %d %+v", code, ar)
	}
	ids = append(ids, ar.IDs...)
	// A charset parameter is still JSON.
	req, _ := http.NewRequest(http.MethodPost, base+"/urls", strings.NewReader(`"`+site.URL(h0, 2)+`"`))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if resp, err := client.Do(req); err != nil {
		t.Fatal(err)
	} else {
		json.NewDecoder(resp.Body).Decode(&ar)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || len(ar.IDs) != 1 {
			t.Fatalf("application/json; charset=utf-8: %d %+v", resp.StatusCode, ar)
		}
		ids = append(ids, ar.IDs...)
	}
	// A client retrying with its Idempotency-Key gets the first answer
	// back, and nothing is queued twice (Expected below counts once).
	keyed := `"` + site.URL(h1, 2) + `"`
	code, first := postKey(http.MethodPost, keyed, "retry-me-1")
	code2, again := postKey(http.MethodPost, keyed, "retry-me-1")
	if code != http.StatusAccepted || code2 != http.StatusAccepted || len(first.IDs) != 1 || len(again.IDs) != 1 || first.IDs[0] != again.IDs[0] {
		t.Fatalf("retried POST with one Idempotency-Key: %d %+v then %d %+v, want the same single id twice", code, first, code2, again)
	}
	ids = append(ids, first.IDs...)
	// Malformed JSON, an oversized body, a GET.
	if code, ar = post(http.MethodPost, `{"url": `); code != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d %+v, want 400", code, ar)
	}
	big := `["` + strings.Repeat("a", urlmsg.MaxPayloadBytes) + `"]`
	if code, ar = post(http.MethodPost, big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d %+v, want 413", code, ar)
	}
	if code, _ = post(http.MethodGet, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", code)
	}

	// Results come while the server runs.
	deadline := time.After(30 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, id := range ids {
			if _, ok := got[id]; ok {
				n++
			}
		}
		mu.Unlock()
		if n == len(ids) {
			break
		}
		select {
		case <-arrived:
		case <-deadline:
			t.Fatalf("%d of %d results after 30s", n, len(ids))
		}
	}
	for _, id := range ids {
		r := got[id]
		if r.Status != result.StatusFetched || r.Data != demosite.Body(hostOfURL(r.URL), pathOfURL(r.URL)) {
			t.Errorf("%s: %s %q", r.URL, r.Status, r.Data)
		}
	}
	// The run keeps serving until its context ends, then stops cleanly.
	select {
	case rep := <-done:
		t.Fatalf("run ended by itself while serving: %+v", rep)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	select {
	case rep := <-done:
		if !rep.Stopped || len(rep.Missing) > 0 || rep.Expected != len(ids) {
			t.Errorf("report %+v, want stopped with %d expected and none missing", rep, len(ids))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
	if n := len(readResults(t, outPath)); n != len(ids) {
		t.Errorf("%d results in the output, want %d", n, len(ids))
	}
}
