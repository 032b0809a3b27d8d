package localmode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestRetryFailed: a job that ended with two failures (HTTP 404 while the
// site was broken) is tried again with RetryFailed: its two URLs are
// queued under new ids and their results name the ids they retry
// (retryOf); failing again, they are retried by a second round (the same
// lines, a new input) once the site is mended, each result naming the
// retry it retries; every result stays in the file (a consumer
// deduplicating by id keeps them all), and a last call finds nothing to
// retry. A round the run stopped before reading is
// the one the next call returns. A job with no failure has nothing to retry;
// a state whose results went to a writer has no file to read them from.
func TestRetryFailed(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" || (broken.Load() && r.URL.Path != "/ok") {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	failed := func(r result.Result) bool { return r.Status == result.StatusFetchError }
	dir := t.TempDir()
	state, out := filepath.Join(dir, "s.db"), filepath.Join(dir, "out.jsonl")
	opts := Options{State: state, OutPath: out, Addresses: fetch.PrivatePolicy(), Params: map[string]string{"FetchDelay": "50ms"}}
	list := writeLines(t, []string{srv.URL + "/ok", srv.URL + "/a", srv.URL + "/b"})

	rt := open(t, opts)
	if rep, err := rt.Run(context.Background(), RunOptions{Input: fileInput(t, list)}); err != nil || rep.ByStatus[result.StatusFetchError] != 2 {
		t.Fatalf("first run: %v, %v; want 2 fetch errors", rep.ByStatus, err)
	}
	rt.Close()
	first := readResults(t, out)
	byURL := map[string]string{}
	for _, r := range first {
		byURL[r.URL] = r.ID
	}

	// A round not read to its end (the run stopped before) is the one
	// the next call returns: its URLs are not queued twice.
	rt = open(t, opts)
	in, n, err := rt.RetryFailed(context.Background(), failed)
	if err != nil || n != 2 {
		t.Fatalf("RetryFailed: %d, %v; want 2", n, err)
	}
	rt.Close()
	rt = open(t, opts)
	again, n, err := rt.RetryFailed(context.Background(), failed)
	if err != nil || n != 2 || again.Name != in.Name {
		t.Fatalf("RetryFailed after a stop: %d, %v; want the same round %s", n, err, in.Name)
	}
	// The site still broken: the retries fail in turn, and the next
	// round (the very same lines) retries them under their own ids.
	if rep, err := rt.Run(context.Background(), RunOptions{Input: again}); err != nil || rep.ByStatus[result.StatusFetchError] != 2 {
		t.Fatalf("retry run: %v, %v; want 2 fetch errors", rep.ByStatus, err)
	}
	rt.Close()
	for _, r := range readResults(t, out)[3:] {
		byURL[r.URL+" retry"] = r.ID
		if r.RetryOf != byURL[r.URL] {
			t.Errorf("retry of %s: retryOf %q, want %q", r.URL, r.RetryOf, byURL[r.URL])
		}
	}
	broken.Store(false)
	rt = open(t, opts)
	in, n, err = rt.RetryFailed(context.Background(), failed)
	if err != nil || n != 2 || in.Name == again.Name {
		t.Fatalf("RetryFailed of the failed retries: %d, %v; want 2 in a new round", n, err)
	}
	if rep, err := rt.Run(context.Background(), RunOptions{Input: in}); err != nil || rep.ByStatus[result.StatusFetched] != 2 {
		t.Fatalf("second retry run: %v, %v; want 2 fetched", rep.ByStatus, err)
	}
	rt.Close()
	all := readResults(t, out)
	if len(all) != 7 {
		t.Fatalf("%d results in the file, want the 3 first and 2 × 2 retries", len(all))
	}
	ids := map[string]bool{}
	for _, r := range all {
		ids[r.ID] = true
	}
	if len(ids) != 7 {
		t.Errorf("%d distinct ids, want 7: a retry has an id of its own", len(ids))
	}
	for _, r := range all[5:] {
		if r.Status != result.StatusFetched || r.RetryOf == "" || r.RetryOf != byURL[r.URL+" retry"] {
			t.Errorf("retry of %s: %s, retryOf %q; want fetched, retryOf %q", r.URL, r.Status, r.RetryOf, byURL[r.URL+" retry"])
		}
	}

	rt = open(t, opts)
	if in, n, err := rt.RetryFailed(context.Background(), failed); err != nil || n != 0 || in != nil {
		t.Errorf("RetryFailed after the retries: %d, %v; want nothing to retry", n, err)
	}
	rt.Close()

	// A state whose results went to a writer: no file to read.
	rt = open(t, Options{State: filepath.Join(t.TempDir(), "w.db"), Out: io.Discard})
	if _, _, err := rt.RetryFailed(context.Background(), failed); !errors.Is(err, ErrNoResultsFile) {
		t.Errorf("RetryFailed on a state writing to a writer: %v, want ErrNoResultsFile", err)
	}
}
