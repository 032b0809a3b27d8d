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

// ModuleRoot returns the nearest directory at or above the working
// directory that holds a go.mod file. `go test` runs each package in its
// own directory, so tests find the module's files through it.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above it")
		}
		dir = parent
	}
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
