package rie

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/urldownloader/urldownloader/internal/proc"
)

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Build compiles ./functions/<name> of this module into dir/<name>/bootstrap
// and returns that path. It builds as the Makefile does for Lambda
// (-tags lambda.norpc, -trimpath, stripped, CGO_ENABLED=0) but for the
// host's OS and architecture, because the emulator runs the binary here;
// the arm64 deploy build stays the Makefile's job.
func Build(ctx context.Context, dir, name string) (string, error) {
	if !validName.MatchString(name) {
		return "", fmt.Errorf("build function %q: want a folder name under functions/", name)
	}
	root, err := proc.ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("build function %s: %w", name, err)
	}
	if st, err := os.Stat(filepath.Join(root, "functions", name)); err != nil || !st.IsDir() {
		return "", fmt.Errorf("build function %s: no folder functions/%s in %s", name, name, root)
	}
	return buildPackage(ctx, root, "./functions/"+name, filepath.Join(dir, name))
}

// BuildAll builds the named functions side by side (as Build) and returns
// each one's bootstrap by name. Tests call it before their clocks start: a
// build competes for the CPU with everything else a parallel test run does.
func BuildAll(ctx context.Context, dir string, names ...string) (map[string]string, error) {
	bins := make(map[string]string, len(names))
	errs := make([]error, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			bin, err := Build(ctx, dir, name)
			mu.Lock()
			defer mu.Unlock()
			bins[name], errs[i] = bin, err
		})
	}
	wg.Wait()
	return bins, errors.Join(errs...)
}

// buildPackage builds the main package pkg (a path relative to root) into
// outDir/bootstrap.
func buildPackage(ctx context.Context, root, pkg, outDir string) (string, error) {
	out, err := filepath.Abs(filepath.Join(outDir, "bootstrap"))
	if err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("build %s: %w", pkg, err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("build %s: the go command is not on PATH: %w", pkg, err)
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	// Explicit, so a GOOS/GOARCH exported for a cross build (arm64 for
	// Lambda) does not make a binary this machine cannot run.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, strings.TrimSpace(string(b)))
	}
	return out, nil
}
