// Package proc starts and stops the local tools the tests and the local
// stack run as child processes (moto_server, aws-lambda-rie), and finds
// them in the module's .venv and .bin, where `make tools` installs them.
package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ModuleRoot returns the product module's root, where template.yaml,
// .venv and .bin live: the nearest directory at or above the working
// directory that holds both go.mod and template.yaml. infra/ is a module
// of its own (its go.mod keeps the benchmark's dependencies out of the
// product's), so the nearest go.mod alone would stop there. `go test` runs
// each package in its own directory, so tests find the module's files
// through it.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod beside a template.yaml in the working directory or above it")
		}
		dir = parent
	}
}

func isRoot(dir string) bool {
	for _, name := range []string{"go.mod", "template.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// FindTool returns the path of a tool that `make tools` installs: $envVar
// if set, else relPath (slash-separated, e.g. ".bin/aws-lambda-rie") in the
// module root. Its errors name the tool and tell to run `make tools`, so a
// test that needs the tool can fail with them as they are.
func FindTool(envVar, relPath string) (string, error) {
	if p := os.Getenv(envVar); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w (run `make tools`)", envVar, p, err)
		}
		return p, nil
	}
	name := filepath.Base(filepath.FromSlash(relPath))
	root, err := ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", name, err)
	}
	p := filepath.Join(root, filepath.FromSlash(relPath))
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("find %s: %s is missing: run `make tools` (or set %s)", name, p, envVar)
	}
	return p, nil
}
