// Package bodytest is the contract test suite of body.Store: the S3 store
// on moto and the local folder pass the same tests, so local mode keeps
// bodies as the deployed downloader does.
package bodytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// Env is one store under test, with what the suite needs to look into it.
type Env struct {
	Store body.Store
	// Reader reads what the store's references point at.
	Reader wholebody.Reader
	// Keys lists the content-addressed bodies stored (their keys,
	// body.Key(sum)); Temps what waits under body.TempPrefix, incomplete
	// multipart uploads included.
	Keys  func(t *testing.T) []string
	Temps func(t *testing.T) int
	// Large is a size the store writes in several parts (S3: above one
	// part).
	Large int
}

// Run runs the suite on a fresh store from newEnv per test.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	t.Run("small body stored under its sha256, readable and verified", func(t *testing.T) {
		e := newEnv(t)
		data := randomBytes(1, 300<<10)
		ref := put(t, e, data, "text/html")
		check(t, e, ref, data, "text/html")
		if keys := e.Keys(t); len(keys) != 1 || keys[0] != body.Key(sum(data)) {
			t.Errorf("stored keys %v, want [%s]", keys, body.Key(sum(data)))
		}
	})
	t.Run("large body streamed in parts", func(t *testing.T) {
		e := newEnv(t)
		data := randomBytes(2, e.Large)
		ref := put(t, e, data, "application/pdf")
		check(t, e, ref, data, "application/pdf")
		if n := e.Temps(t); n != 0 {
			t.Errorf("%d temporary objects left after a stored body, want 0", n)
		}
	})
	t.Run("the same body twice is stored once", func(t *testing.T) {
		e := newEnv(t)
		for _, data := range [][]byte{randomBytes(3, 100<<10), randomBytes(4, e.Large)} {
			a := put(t, e, data, "text/plain")
			b := put(t, e, bytes.Clone(data), "text/plain")
			if a.SHA256 != b.SHA256 || a.Key != b.Key || a.Path != b.Path {
				t.Errorf("two puts of one body: %+v and %+v, want one reference", a, b)
			}
		}
		if keys := e.Keys(t); len(keys) != 2 {
			t.Errorf("stored keys %v, want 2 (two bodies, each put twice)", keys)
		}
		if n := e.Temps(t); n != 0 {
			t.Errorf("%d temporary objects left, want 0", n)
		}
	})
	t.Run("a failed read stores nothing and says so", func(t *testing.T) {
		e := newEnv(t)
		boom := errors.New("connection reset")
		for _, n := range []int{64 << 10, e.Large} {
			src := body.TrackReads(io.MultiReader(bytes.NewReader(randomBytes(5, n)), errReader{boom}))
			_, err := e.Store.Put(context.Background(), src, "text/plain")
			var re *body.ReadError
			if !errors.As(err, &re) || !errors.Is(err, boom) {
				t.Errorf("Put after %d bytes and a reset: %v, want a *body.ReadError wrapping the reset", n, err)
			}
		}
		if keys := e.Keys(t); len(keys) != 0 {
			t.Errorf("stored %v after failed reads, want nothing", keys)
		}
		if n := e.Temps(t); n != 0 {
			t.Errorf("%d temporary objects left after failed reads, want 0", n)
		}
	})
	t.Run("empty body", func(t *testing.T) {
		e := newEnv(t)
		ref := put(t, e, nil, "")
		check(t, e, ref, nil, "")
	})
}

func put(t *testing.T, e Env, data []byte, contentType string) body.Ref {
	t.Helper()
	ref, err := e.Store.Put(context.Background(), bytes.NewReader(data), contentType)
	if err != nil {
		t.Fatalf("Put %d bytes: %v", len(data), err)
	}
	return ref
}

// check asserts ref describes data and reads it back through wholebody.
func check(t *testing.T, e Env, ref body.Ref, data []byte, contentType string) {
	t.Helper()
	if ref.Bytes != int64(len(data)) || ref.SHA256 != sum(data) || ref.ContentType != contentType {
		t.Errorf("ref %+v, want %d bytes, sha256 %s, content type %q", ref, len(data), sum(data), contentType)
	}
	res := result.Result{ID: "x", Status: result.StatusFetched}
	res.SetStored(ref)
	got, err := e.Reader.ReadAll(context.Background(), res)
	if err != nil {
		t.Fatalf("read back %+v: %v", ref, err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("read back %d bytes, not the %d put", len(got), len(data))
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
