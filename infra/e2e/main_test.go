package e2e_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
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
	names := []string{"ingest", "check"}
	prebuiltIngest := os.Getenv(ingestBootstrapEnv)
	if prebuiltIngest != "" {
		names = names[1:]
	}
	built, err := rie.BuildAll(ctx, dir, names...)
	if err != nil {
		return err
	}
	bins.ingest, bins.check = cmp.Or(prebuiltIngest, built["ingest"]), built["check"]
	return nil
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
