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

// TestAWSFromEnv: the functions' AWS configuration comes from the variables
// Lambda sets, and a missing one is named.
func TestAWSFromEnv(t *testing.T) {
	env := map[string]string{
		"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret",
		"AWS_SESSION_TOKEN": "token", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
	}
	cfg, err := awsFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "eu-west-1" || creds.AccessKeyID != "AKID" || creds.SecretAccessKey != "secret" || creds.SessionToken != "token" {
		t.Errorf("config region %q, credentials %+v; want the environment's", cfg.Region, creds)
	}
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != "http://127.0.0.1:5000" {
		t.Errorf("endpoint %v, want AWS_ENDPOINT_URL", cfg.BaseEndpoint)
	}
	_, err = awsFromEnv(func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "AWS_REGION") || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("empty environment: err = %v, want one naming AWS_REGION and the credentials", err)
	}
}
