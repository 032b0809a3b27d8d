package dirbody_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/body/bodytest"
	"github.com/urldownloader/urldownloader/shared/embedded/dirbody"
)

func TestContract(t *testing.T) {
	t.Parallel()
	bodytest.Run(t, func(t *testing.T) bodytest.Env {
		dir := t.TempDir()
		s, err := dirbody.New(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		list := func(t *testing.T, sub string) []string {
			entries, err := os.ReadDir(filepath.Join(dir, sub))
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range entries {
				out = append(out, sub+e.Name())
			}
			return out
		}
		return bodytest.Env{
			Store: s,
			Keys:  func(t *testing.T) []string { return list(t, body.KeyPrefix) },
			Temps: func(t *testing.T) int { return len(list(t, body.TempPrefix)) },
			Large: 6 << 20,
		}
	})
}

// TestStaleTempsRemoved: what a crashed process left in the temporary
// folder is removed when the store is opened again, what a live one is
// writing is not.
func TestStaleTempsRemoved(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := dirbody.New(dir, nil); err != nil {
		t.Fatal(err)
	}
	stale, live := filepath.Join(dir, body.TempPrefix, "body-stale"), filepath.Join(dir, body.TempPrefix, "body-live")
	for _, p := range []string{stale, live} {
		if err := os.WriteFile(p, []byte("part"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := dirbody.New(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary still there (%v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a body being written was removed: %v", err)
	}
}

// TestOpenAndCancel: a stored body opens by its sum, a malformed sum is
// refused before it can name a path outside the folder, and a Put whose
// context has ended stores nothing.
func TestOpenAndCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := dirbody.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := s.Put(t.Context(), strings.NewReader("hello, body"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Open(ref.SHA256)
	if err != nil {
		t.Fatalf("Open(%s): %v", ref.SHA256, err)
	}
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(got) != "hello, body" {
		t.Errorf("Open read %q, %v; want the stored body", got, err)
	}
	for _, bad := range []string{"", "../../etc/passwd", strings.Repeat("g", 64), ref.SHA256[:63]} {
		if f, err := s.Open(bad); err == nil {
			f.Close()
			t.Errorf("Open(%q) opened a file, want an error", bad)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if ref, err := s.Put(ctx, strings.NewReader("never stored"), "text/plain"); err == nil {
		t.Errorf("Put after cancel = %+v, want the context's error", ref)
	}
	entries, err := os.ReadDir(filepath.Join(dir, body.KeyPrefix))
	if err != nil || len(entries) != 1 {
		t.Errorf("folder holds %d bodies (%v), want only the first", len(entries), err)
	}
}
