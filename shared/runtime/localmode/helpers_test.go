package localmode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// startSite serves a demo site on loopback for the test.
func startSite(t *testing.T, opts demosite.Options) *demosite.Site {
	t.Helper()
	site, err := demosite.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(site.Close)
	return site
}

// writeLines writes an input file, one line per entry.
func writeLines(t *testing.T, lines []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "urls.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// jsonLines is one {"url": u} line per URL, as demosite serve writes them.
func jsonLines(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		b, _ := json.Marshal(map[string]string{"url": u})
		out[i] = string(b)
	}
	return out
}

// readResults reads a results file, failing on a line that is not a result.
func readResults(t *testing.T, path string) []result.Result {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []result.Result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s line %d is not a result: %v: %q", path, n, err, sc.Text())
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// openOut opens a results file for appending.
func openOut(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// open opens a runtime and closes it with the test.
func open(t *testing.T, opts Options) *Runtime {
	t.Helper()
	if opts.Log == nil {
		opts.Log = testLog(t)
	}
	rt, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	return rt
}

// fileInput opens path as an input named by path.
func fileInput(t *testing.T, path string) *Input {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &Input{Name: path, R: f}
}

// checkPolite fails when two requests to one host came closer than d, from
// the server's side.
func checkPolite(t *testing.T, reqs []demosite.Request, d time.Duration) {
	t.Helper()
	for h, g := range demosite.Gaps(reqs) {
		if g.Min < d {
			t.Errorf("host %s: two requests %s apart, want at least %s", h, g.Min, d)
		}
	}
}

func count[T any](xs []T, f func(T) bool) int {
	n := 0
	for _, x := range xs {
		if f(x) {
			n++
		}
	}
	return n
}

func hostOfURL(u string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}

func pathOfURL(u string) string {
	return strings.TrimPrefix(u, "http://"+hostOfURL(u))
}

// testLog keeps the functions' logs quiet unless STANDALONE_LOG is set.
func testLog(t *testing.T) *slog.Logger {
	if os.Getenv("STANDALONE_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

var _ = fmt.Sprintf

func mustf(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}
