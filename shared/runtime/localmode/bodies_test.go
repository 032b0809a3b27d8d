package localmode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestBodiesBesideState: local mode keeps bodies over InlineBodyBytes in
// the bodies folder beside its state file, content-addressed (one body
// from two hosts is one file), the result naming the file; a small page
// stays inline.
func TestBodiesBesideState(t *testing.T) {
	site := startSite(t, demosite.Options{Hosts: 2})
	h := site.Hosts()
	urls := []string{
		demosite.LargeURL(h[0], 2_000_000, 7), demosite.LargeURL(h[1], 2_000_000, 7),
		demosite.LargeURL(h[1], 300_000, 8), site.URL(h[0], 0),
	}
	dir := t.TempDir()
	outPath := filepath.Join(dir, "out.jsonl")
	rt := open(t, Options{
		State: filepath.Join(dir, "state.db"), Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": "50ms", "MaxBodyBytes": "4194304"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if rep, err := rt.Run(ctx, RunOptions{Input: fileInput(t, writeLines(t, jsonLines(urls)))}); err != nil || len(rep.Missing) > 0 {
		t.Fatalf("run: %v, %d missing", err, len(rep.Missing))
	}
	folder := filepath.Join(dir, "bodies", body.KeyPrefix)
	files := map[string]bool{}
	for _, r := range readResults(t, outPath) {
		if r.Status != result.StatusFetched {
			t.Errorf("%s: %s %s", r.URL, r.Status, r.Error)
			continue
		}
		small := strings.Contains(r.URL, "/page/")
		if small != (r.Body == nil) {
			t.Errorf("%s: body reference %+v, want stored=%v", r.URL, r.Body, !small)
			continue
		}
		if r.Body != nil {
			if filepath.Dir(r.Body.Path) != folder || filepath.Base(r.Body.Path) != r.SHA256 {
				t.Errorf("%s: stored at %s, want %s/<sha256>", r.URL, r.Body.Path, folder)
			}
			files[r.Body.Path] = true
		}
		if _, err := (wholebody.Reader{}).ReadAll(ctx, r); err != nil {
			t.Errorf("%s: read back: %v", r.URL, err)
		}
	}
	entries, err := os.ReadDir(folder)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || len(files) != 2 {
		t.Errorf("%d files in %s, %d named by results, want 2 (the 2 MB body of two hosts once)", len(entries), folder, len(files))
	}
}
