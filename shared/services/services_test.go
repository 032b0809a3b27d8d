package services

import (
	"path/filepath"
	"strings"
	"testing"
)

// setEnv gives the process a function environment as template.yaml does and
// an AWS one that reads no developer files.
func setEnv(t *testing.T, fn map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_PROFILE":                 "",
		"AWS_REGION":                  "eu-west-1",
		"AWS_ACCESS_KEY_ID":           "test",
		"AWS_SECRET_ACCESS_KEY":       "test",
		"AWS_EC2_METADATA_DISABLED":   "true",
		"TABLE_NAME":                  "",
		"OUTPUT_QUEUE_URL":            "",
		"PARAM_PATH":                  "",
		"SHARD_COUNT":                 "",
	} {
		t.Setenv(k, v)
	}
	for k, v := range fn {
		t.Setenv(k, v)
	}
}

func TestFromEnv(t *testing.T) {
	setEnv(t, map[string]string{
		"TABLE_NAME": "hosts", "OUTPUT_QUEUE_URL": "http://127.0.0.1:1/out", "PARAM_PATH": "/p/", "SHARD_COUNT": "4",
	})
	s, log, err := FromEnv(t.Context())
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	if log == nil || s.Ingester == nil || s.Engine == nil || s.Params == nil {
		t.Errorf("FromEnv = %+v, logger %v: want every service and a logger", s, log)
	}
	if s.Config.TableName != "hosts" || s.Config.ShardCount != 4 {
		t.Errorf("Config = %+v, want the environment's table and shard count", s.Config)
	}
}

func TestFromEnvBadEnvironment(t *testing.T) {
	setEnv(t, map[string]string{"TABLE_NAME": "hosts"})
	s, log, err := FromEnv(t.Context())
	if err == nil || s != nil {
		t.Fatalf("FromEnv = %v, %v; want an error", s, err)
	}
	if log == nil {
		t.Error("FromEnv returned no logger to report the error with")
	}
	for _, name := range []string{"OUTPUT_QUEUE_URL", "PARAM_PATH"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}
