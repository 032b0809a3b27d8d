package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue/storetest"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

// TestContractFile runs the store contract on a file, with a second Store
// on the same file as the peer: two connections that only SQLite's locks
// keep apart, as two processes would be.
func TestContractFile(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		IdleExpiry: true,
		Parallel:   true,
		New: func(t *testing.T, now func() time.Time) storetest.Fixture {
			path := filepath.Join(t.TempDir(), "state.db")
			return storetest.Fixture{Store: openFile(t, path, now), Peer: openFile(t, path, now)}
		},
	})
}

// TestContractMemory runs the store contract in memory, where the store is
// its own peer, alone (ExclusiveHosts, as local mode opens it) and not.
func TestContractMemory(t *testing.T) {
	for _, exclusive := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "exclusive"}[exclusive], func(t *testing.T) {
			storetest.Run(t, storetest.Harness{
				IdleExpiry: true,
				Parallel:   true,
				New: func(t *testing.T, now func() time.Time) storetest.Fixture {
					s, err := sqlite.NewMemory(now)
					if err != nil {
						t.Fatal(err)
					}
					if exclusive {
						s.ExclusiveHosts()
					}
					t.Cleanup(func() { s.Close() })
					return storetest.Fixture{Store: s}
				},
			})
		})
	}
}

func openFile(t testing.TB, path string, now func() time.Time) *sqlite.Store {
	t.Helper()
	s, err := sqlite.New(path, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return s
}
