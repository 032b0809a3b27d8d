package engine_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/embedded/dirbody"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// TestBodiesToStore: with a body store (a local folder here, held to the
// S3 store's behaviour by shared/domain/body/bodytest), a body at InlineBodyBytes
// stays inline, a longer one (or a binary one whose base64 is longer) is
// stored and its result points at it, a body cut at MaxBodyBytes says
// truncated, and a gzip body is stored decoded.
func TestBodiesToStore(t *testing.T) {
	t.Parallel()
	const inline = 16 << 10
	text := func(n int) []byte { return bytes.Repeat([]byte("a"), n) }
	binary := bytes.Repeat([]byte{0xff, 0x00, 0x80}, 4<<10+1) // 12 KiB raw, 16 KiB and 4 bytes as base64
	huge := bytes.Repeat([]byte("0123456789abcdef"), 128<<10)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(text(200 << 10))
	_ = zw.Close()
	pages := map[string][]byte{"/at": text(inline), "/over": text(inline + 1), "/bin": binary, "/huge": huge}
	s := newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gz" {
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(gz.Bytes())
			return
		}
		w.Header().Set("Content-Type", "application/x-test")
		_, _ = w.Write(pages[r.URL.Path])
	}))
	p := testParams()
	p.InlineBodyBytes = inline
	p.MaxBodyBytes = 1 << 20
	p.FetchDelay = 50 * time.Millisecond
	e := newEnv(t, p)
	store, err := dirbody.New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	eng := e.engine()
	eng.Bodies = store
	e.seed(s.url("/at"), s.url("/over"), s.url("/bin"), s.url("/huge"), s.url("/gz"))
	e.runWith(eng, "owner", 20*time.Second, 0, e.pub.has(5))

	want := map[string]struct {
		body             []byte
		stored, truncate bool
	}{
		"/at": {text(inline), false, false}, "/over": {text(inline + 1), true, false}, "/bin": {binary, true, false},
		"/huge": {huge[:1<<20], true, true}, "/gz": {text(200 << 10), true, false},
	}
	for path, w := range want {
		res := e.pub.one(t, s.url(path))
		sum := sha256.Sum256(w.body)
		if res.Status != result.StatusFetched || res.Truncated != w.truncate || res.Bytes != int64(len(w.body)) || res.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: %s truncated=%v %d bytes, want fetched truncated=%v %d bytes with their sha256", path, res.Status, res.Truncated, res.Bytes, w.truncate, len(w.body))
		}
		if (res.Body != nil) != w.stored || w.stored && res.Data != "" {
			t.Errorf("%s: body reference %+v with %d bytes inline, want stored=%v", path, res.Body, len(res.Data), w.stored)
		}
		if w.stored && res.Body != nil && !strings.HasPrefix(res.Body.Path, store.Dir()) {
			t.Errorf("%s: stored at %s, outside the store %s", path, res.Body.Path, store.Dir())
		}
		got, err := wholebody.Reader{}.ReadAll(t.Context(), res)
		if err != nil || !bytes.Equal(got, w.body) {
			t.Errorf("%s: read back %d bytes (%v), want the %d fetched", path, len(got), err, len(w.body))
		}
	}
}

// TestBodyStoreFailureKeepsURL: a body that arrived but could not be
// stored is not a result: the URL stays queued, unharmed, and is fetched
// again by a later run once the store works.
func TestBodyStoreFailureKeepsURL(t *testing.T) {
	t.Parallel()
	s := newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("b"), 64<<10))
	}))
	p := testParams()
	p.InlineBodyBytes = 16 << 10
	e := newEnv(t, p)
	dir := t.TempDir()
	store, err := dirbody.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil { // the disk is gone
		t.Fatal(err)
	}
	eng := e.engine()
	eng.Bodies = store
	e.seed(s.url("/x"))
	sum := e.runWith(eng, "owner-1", 10*time.Second, 0, s.seen(2))
	if n := len(e.pub.all()); n != 0 {
		t.Fatalf("%d results with the store failing, want none: %s", n, describe(e.pub.all()))
	}
	if sum.LocalErrors == 0 {
		t.Errorf("summary %+v, want the failed store counted as a local error", sum)
	}
	if h := e.load(hostqueue.QueueKey(strings.TrimPrefix(s.url(""), "http://"), false)); h == nil || h.Pending != 1 {
		t.Fatalf("host state %+v, want the URL still queued", h)
	}
	store, err = dirbody.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng = e.engine()
	eng.Bodies = store
	e.runWith(eng, "owner-2", 15*time.Second, 0, e.pub.has(1))
	if res := e.pub.one(t, s.url("/x")); res.Status != result.StatusFetched || res.Body == nil || res.Bytes != 64<<10 {
		t.Errorf("after the store came back: %s body=%+v bytes=%d, want fetched and stored", res.Status, res.Body, res.Bytes)
	}
}
