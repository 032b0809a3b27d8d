package fetch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/embedded/dirbody"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestBodyToStore: with a store and InlineBytes, a body up to InlineBytes
// is returned in Body, a longer one is streamed into the store (Body nil,
// Stored set), cut at MaxBodyBytes with Truncated only when there was
// more; a store that fails is a KindLocal error, a read that fails is the
// read's own.
func TestBodyToStore(t *testing.T) {
	t.Parallel()
	const inline, max = 1 << 10, 64 << 10
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if r.URL.Query().Get("cut") != "" {
			w.Header().Set("Content-Length", strconv.Itoa(n))
			_, _ = w.Write(bytes.Repeat([]byte("c"), n/2))
			panic(http.ErrAbortHandler)
		}
		_, _ = w.Write(bytes.Repeat([]byte("x"), n))
	}))
	dir := t.TempDir()
	store, err := dirbody.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := localOptions()
	opts.MaxBodyBytes = max
	f := fetch.New(opts, fixedNow)
	get := func(query string) (*fetch.Response, error) {
		return f.Fetch(context.Background(), fetch.Request{URL: srv.URL + "/?" + query, Store: store, InlineBytes: inline})
	}
	sum := func(n int) string {
		s := sha256.Sum256(bytes.Repeat([]byte("x"), n))
		return hex.EncodeToString(s[:])
	}
	for _, tc := range []struct {
		n         int
		stored    bool
		keep      int
		truncated bool
	}{
		{inline, false, inline, false},
		{inline + 1, true, inline + 1, false},
		{max, true, max, false},
		{max + 1, true, max, true},
		{4 * max, true, max, true},
	} {
		resp, err := get("n=" + strconv.Itoa(tc.n))
		if err != nil {
			t.Fatalf("%d bytes: %v", tc.n, err)
		}
		if tc.stored != (resp.Stored != nil) || resp.Truncated != tc.truncated || resp.Size() != int64(tc.keep) {
			t.Errorf("%d bytes: stored=%v truncated=%v size=%d, want stored=%v truncated=%v size=%d", tc.n, resp.Stored != nil, resp.Truncated, resp.Size(), tc.stored, tc.truncated, tc.keep)
			continue
		}
		if resp.Stored != nil && (resp.Body != nil || resp.Stored.SHA256 != sum(tc.keep)) {
			t.Errorf("%d bytes: body %d bytes inline and stored sha256 %s, want none inline and %s", tc.n, len(resp.Body), resp.Stored.SHA256, sum(tc.keep))
		}
	}
	if _, err := get("cut=1&n=" + strconv.Itoa(8*inline)); fetch.KindOf(err) == fetch.KindLocal || err == nil {
		t.Errorf("a body cut by the server: %v, want the read's error, not the store's", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := get("n=" + strconv.Itoa(8*inline)); fetch.KindOf(err) != fetch.KindLocal {
		t.Errorf("a failing store: %v (kind %v), want KindLocal", err, fetch.KindOf(err))
	}
}

// stallingStore reads a body whole, then waits for its context to end, as
// a store that cannot keep up would.
type stallingStore struct{}

func (stallingStore) Put(ctx context.Context, r io.Reader, _ string) (body.Ref, error) {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return body.Ref{}, err
	}
	<-ctx.Done()
	return body.Ref{}, fmt.Errorf("upload: %w", ctx.Err())
}

// TestBodyStoreTimeout: a body that cannot be stored within the request's
// timeout ends as a timeout (counted against the URL), not as a local
// error that would have it fetched again forever.
func TestBodyStoreTimeout(t *testing.T) {
	t.Parallel()
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("s"), 64<<10))
	}))
	opts := localOptions()
	opts.Timeout = 200 * time.Millisecond
	_, err := fetch.New(opts, fixedNow).Fetch(context.Background(), fetch.Request{URL: srv.URL, Store: stallingStore{}, InlineBytes: 1 << 10})
	if fetch.KindOf(err) != fetch.KindTimeout || !fetch.IsTransient(err) {
		t.Errorf("a store slower than the timeout: %v (kind %v), want a transient timeout", err, fetch.KindOf(err))
	}
}
