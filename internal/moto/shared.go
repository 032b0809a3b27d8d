package moto

import (
	"context"
	"sync"
	"testing"
)

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the moto server of this test binary, starting it on first
// use. Every test and package-level helper that calls it gets the same
// server, which lives until the test binary exits (on Linux the process
// dies with it; nothing needs to Close it).
//
// Tests sharing the server must isolate themselves by unique resource names
// (tables, queues, parameter paths), never by Reset. When moto cannot start,
// Shared fails the test: it does not skip, so a CI machine without
// `make tools` goes red instead of quietly testing less.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		shared.srv, shared.err = Start(context.Background())
	})
	if shared.err != nil {
		t.Fatalf("moto: %v", shared.err)
	}
	return shared.srv
}
