package main

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

// TestMain builds the runner and both bootstraps once for the package,
// before any test's clock starts (see prebuilt). (The resources children
// are this test binary too; they exit in init, before TestMain.)
func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "bench-bins-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := prebuild(dir); err != nil {
			fmt.Fprintln(os.Stderr, "bench: build:", err)
			return 1
		}
		return m.Run()
	}())
}

func prebuild(dir string) error {
	root, err := moto.ModuleRoot()
	if err != nil {
		return err
	}
	// Bounds only a hung toolchain.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var runnerErr, bootErr error
	var wg sync.WaitGroup
	wg.Go(func() { prebuilt.runner, runnerErr = buildRunner(ctx, root, dir) })
	prebuilt.bootstraps, bootErr = rie.BuildAll(ctx, dir, "ingest", "check")
	wg.Wait()
	return errors.Join(runnerErr, bootErr)
}
