package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/rie"
	"github.com/urldownloader/urldownloader/internal/moto"
)

// bins are the two bootstraps, built once for the package by TestMain
// before any test's clock starts: a build competes for the CPU with every
// other package of a parallel make test, and no test's deadline should
// include it.
var bins struct{ ingest, check string }

// ingestBootstrapEnv names a prebuilt ingest bootstrap to test instead of
// building functions/ingest: how the idempotency test is shown to fail
// against an older main.go (see TestIdempotencyKeyUnderRIE).
const ingestBootstrapEnv = "E2E_INGEST_BOOTSTRAP"

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "e2e-bootstraps-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := build(dir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: set up:", err)
			return 1
		}
		return m.Run()
	}())
}

// build finds the tools (failing at once when one is missing: a skipped
// end-to-end test in CI looks like a passing one) and builds both
// bootstraps side by side.
func build(dir string) error {
	if _, err := rie.FindEmulator(); err != nil {
		return err
	}
	if _, err := moto.FindServer(); err != nil {
		return err
	}
	// Bounds only a hung toolchain; a cold build takes well under a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var ingestErr, checkErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		if b := os.Getenv(ingestBootstrapEnv); b != "" {
			bins.ingest = b
			return
		}
		bins.ingest, ingestErr = rie.Build(ctx, dir, "ingest")
	}()
	go func() { defer wg.Done(); bins.check, checkErr = rie.Build(ctx, dir, "check") }()
	wg.Wait()
	return errors.Join(ingestErr, checkErr)
}

// startMoto starts a moto of the test's own.
func startMoto(t *testing.T, ctx context.Context) *moto.Server {
	t.Helper()
	srv, err := moto.Start(ctx)
	if err != nil {
		t.Fatalf("start moto: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}
