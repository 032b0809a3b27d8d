// Package schematest validates messages against the JSON Schemas in
// docs/schema with a maintained validator: Python's jsonschema (Draft
// 2020-12, formats checked), installed pinned into .venv by `make tools`.
package schematest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/urldownloader/urldownloader/internal/proc"
)

// EnvPython names the Python that has jsonschema, instead of .venv/bin/python.
const EnvPython = "SCHEMA_PYTHON"

//go:embed validate.py
var script []byte

// Path is the schema file name in docs/schema (e.g. "result.schema.json"),
// as an absolute path in the product module.
func Path(t testing.TB, name string) string {
	t.Helper()
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "docs", "schema", name)
}

// Validate checks each instance (one JSON document) against the schema
// file and returns, per instance, its errors (none when valid). The
// schema itself is checked first: an invalid schema fails the test.
func Validate(t testing.TB, schema string, instances [][]byte) [][]string {
	t.Helper()
	python, err := proc.FindTool(EnvPython, ".venv/bin/python")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "validate.py")
	if err := os.WriteFile(prog, script, 0o644); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for _, inst := range instances {
		var compact bytes.Buffer
		if err := json.Compact(&compact, inst); err != nil {
			t.Fatalf("instance %q is not JSON: %v", inst, err)
		}
		in.Write(compact.Bytes())
		in.WriteByte('\n')
	}
	cmd := exec.Command(python, prog, schema)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("validate against %s: %v\n%s", schema, err, stderr.Bytes())
	}
	var verdicts [][]string
	if err := json.Unmarshal(out, &verdicts); err != nil || len(verdicts) != len(instances) {
		t.Fatalf("validator answered %q (%v) for %d instances", out, err, len(instances))
	}
	return verdicts
}
