package samlocal_test

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/urldownloader/urldownloader/infra/samlocal"
	"github.com/urldownloader/urldownloader/internal/stack"
)

// The local template is the template plus one declared variable: SAM
// reads it, so anything else lost or changed would be tested in place of
// the real thing.
func TestLocalTemplateDeclaresOnlyTheEndpoint(t *testing.T) {
	src := filepath.Join("..", "..", stack.TemplateFile)
	dst := filepath.Join(t.TempDir(), samlocal.LocalTemplateName)
	if err := samlocal.LocalTemplate(src, dst); err != nil {
		t.Fatal(err)
	}
	var before, after map[string]any
	for path, v := range map[string]*map[string]any{src: &before, dst: &after} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	vars := func(doc map[string]any) map[string]any {
		return doc["Globals"].(map[string]any)["Function"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
	}
	got := vars(after)
	if v, ok := got[samlocal.EndpointVar]; !ok || v != "" {
		t.Fatalf("local template: %s = %v (declared %v), want declared and empty", samlocal.EndpointVar, v, ok)
	}
	delete(got, samlocal.EndpointVar)
	if !equalYAML(t, before, after) {
		t.Errorf("the local template differs from %s in more than %s", src, samlocal.EndpointVar)
	}
	// A second pass changes nothing (make sam-local may run it again).
	if err := samlocal.LocalTemplate(dst, dst+".2"); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(dst)
	b, _ := os.ReadFile(dst + ".2")
	if string(a) != string(b) {
		t.Errorf("LocalTemplate is not idempotent")
	}
}

func equalYAML(t *testing.T, a, b any) bool {
	t.Helper()
	x, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(x) == string(y)
}

func TestEnvVarsOnlyOnLoopback(t *testing.T) {
	st := &stack.Stack{Functions: map[string]stack.Function{
		"IngestFunction": {Env: map[string]string{"TABLE_NAME": "t"}},
		"CheckFunction":  {Env: map[string]string{"TABLE_NAME": "t", "CHECK_RUN_SECONDS": "55"}},
	}}
	env, err := samlocal.EnvVars(st, "http://127.0.0.1:5000", map[string]map[string]string{"CheckFunction": {"CHECK_RUN_SECONDS": "6"}})
	if err != nil {
		t.Fatal(err)
	}
	if env["IngestFunction"][samlocal.EndpointVar] != "http://127.0.0.1:5000" || env["CheckFunction"]["CHECK_RUN_SECONDS"] != "6" || env["IngestFunction"]["TABLE_NAME"] != "t" {
		t.Errorf("env vars %v", env)
	}
	for _, bad := range []string{"http://10.0.0.1:5000", "https://sqs.us-east-1.amazonaws.example", "http://localhost:5000", ""} {
		if _, err := samlocal.EnvVars(st, bad, nil); err == nil {
			t.Errorf("EnvVars accepted endpoint %q", bad)
		}
	}
	if _, err := samlocal.EnvVars(st, "http://[::1]:5000", map[string]map[string]string{"NoSuchFunction": {}}); err == nil {
		t.Errorf("EnvVars accepted a function the template lacks")
	}
}
