package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRetryFailedFlag: a job that ended with failures names --retry-failed
// in its advice; that flag with the same --state and --out tries them
// again (exit 0 once they are fetched, each retry naming the id it
// retries); then there is nothing to retry. With --urls it is a usage
// error.
func TestRetryFailedFlag(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" || broken.Load() && r.URL.Path != "/ok" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "page %s\n", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	list := filepath.Join(dir, "urls.txt")
	if err := os.WriteFile(list, []byte(srv.URL+"/ok\n"+srv.URL+"/a\n"+srv.URL+"/b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state, out := filepath.Join(dir, "s.db"), filepath.Join(dir, "out.jsonl")
	common := []string{"--state", state, "--out", out, "--allow-private", "--param", "FetchDelay=50ms"}

	code, _, stderr := runCmd(t, append([]string{"--urls", list}, common...)...)
	if want := "urldownloader --state " + state + " --out " + out + " --retry-failed"; code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("first run: exit %d, want 1 and the advice %q:\n%s", code, want, stderr)
	}

	broken.Store(false)
	code, _, stderr = runCmd(t, append([]string{"--retry-failed"}, common...)...)
	if code != 0 || !strings.Contains(stderr, "2 failed urls queued again") {
		t.Fatalf("retry: exit %d, want 0 and 2 urls queued again:\n%s", code, stderr)
	}
	results := readResults(t, out)
	if len(results) != 5 || results[3].RetryOf == "" || results[4].RetryOf == "" {
		t.Errorf("results %+v: want 3, then 2 retries naming retryOf", results)
	}

	code, _, stderr = runCmd(t, append([]string{"--retry-failed"}, common...)...)
	if code != 0 || !strings.Contains(stderr, "nothing to retry") {
		t.Errorf("a second retry: exit %d, want 0 and nothing to retry:\n%s", code, stderr)
	}
	if code, _, stderr = runCmd(t, append([]string{"--retry-failed", "--urls", list}, common...)...); code != 2 {
		t.Errorf("--retry-failed with --urls: exit %d, want 2:\n%s", code, stderr)
	}
	if code, _, stderr = runCmd(t, "--retry-failed", "--state", filepath.Join(dir, "none.db")); code != 2 || !strings.Contains(stderr, "holds no job") {
		t.Errorf("--retry-failed on a new state: exit %d, want 2:\n%s", code, stderr)
	}
}
