package dirbody_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/body"
	"github.com/urldownloader/urldownloader/shared/body/bodytest"
	"github.com/urldownloader/urldownloader/shared/dirbody"
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
