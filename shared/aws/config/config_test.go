package config_test

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/aws/config"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func required() map[string]string {
	return map[string]string{
		"TABLE_NAME":       "urldownloader-dev",
		"OUTPUT_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/123456789012/out",
		"PARAM_PATH":       "/urldownloader/dev/",
	}
}

func TestFromEnvAllSet(t *testing.T) {
	e := required()
	maps.Copy(e, map[string]string{
		"INPUT_QUEUE_URL":          "https://sqs.eu-west-1.amazonaws.com/123456789012/in",
		"SHARD_COUNT":              "16",
		"ALLOW_PRIVATE_NETWORKS":   "true",
		"ALLOW_NETWORKS":           "169.254.169.254/32",
		"LOG_LEVEL":                "debug",
		"CHECK_RUN_SECONDS":        "42.5",
		"BODY_BUCKET":              "urldownloader-dev-bodies",
		"BODY_RETENTION_DAYS":      "14",
		"OUTPUT_MAX_MESSAGE_BYTES": "1048576",
		"EPHEMERAL_STORAGE_MB":     "4096",
	})
	got, err := config.FromEnv(env(e))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	want := config.Config{
		TableName:             "urldownloader-dev",
		OutputQueueURL:        "https://sqs.eu-west-1.amazonaws.com/123456789012/out",
		InputQueueURL:         "https://sqs.eu-west-1.amazonaws.com/123456789012/in",
		ParamPath:             "/urldownloader/dev/",
		ShardCount:            16,
		Addresses:             fetch.PrivatePolicy().Open(netip.MustParsePrefix("169.254.169.254/32")).WithRemedy(config.Remedy),
		LogLevel:              "debug",
		CheckRun:              42500 * time.Millisecond,
		BodyBucket:            "urldownloader-dev-bodies",
		BodyRetention:         14 * 24 * time.Hour,
		OutputMaxMessageBytes: 1 << 20,
		EphemeralStorageMB:    4096,
	}
	if !got.Addresses.Equal(want.Addresses) {
		t.Errorf("Addresses = %+v, want %+v", got.Addresses, want.Addresses)
	}
	got.Addresses, want.Addresses = fetch.AddressPolicy{}, fetch.AddressPolicy{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromEnv = %+v\nwant %+v", got, want)
	}
}

func TestFromEnvDefaults(t *testing.T) {
	got, err := config.FromEnv(env(required()))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	if got.ShardCount != 1 || !got.Addresses.Equal(fetch.AddressPolicy{}.WithRemedy(config.Remedy)) || got.CheckRun != 55*time.Second || got.InputQueueURL != "" || got.LogLevel != "" ||
		got.BodyBucket != "" || got.OutputMaxMessageBytes != 256<<10 || got.EphemeralStorageMB != 512 {
		t.Errorf("defaults %+v, want ShardCount 1, private networks off, CheckRun 55s, no input queue, no body bucket, 256 KiB messages, 512 MB of /tmp", got)
	}
}

func TestFromEnvValidValues(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		value string
		check func(config.Config) bool
	}{
		{"one shard", "SHARD_COUNT", "1", func(c config.Config) bool { return c.ShardCount == 1 }},
		{"private networks false", "ALLOW_PRIVATE_NETWORKS", "false", func(c config.Config) bool { return !c.Addresses.Private() }},
		{"private networks 1", "ALLOW_PRIVATE_NETWORKS", "1", func(c config.Config) bool { return c.Addresses.Private() }},
		{"networks", "ALLOW_NETWORKS", "10.1.0.0/16, fd00:ec2::254", func(c config.Config) bool {
			return !c.Addresses.Private() && fmt.Sprint(c.Addresses.Networks()) == "[10.1.0.0/16 fd00:ec2::254/128]"
		}},
		{"no networks", "ALLOW_NETWORKS", "", func(c config.Config) bool { return len(c.Addresses.Networks()) == 0 }},
		{"whole seconds", "CHECK_RUN_SECONDS", "50", func(c config.Config) bool { return c.CheckRun == 50*time.Second }},
		{"fifteen minutes", "CHECK_RUN_SECONDS", "900", func(c config.Config) bool { return c.CheckRun == 15*time.Minute }},
		{"fraction", "CHECK_RUN_SECONDS", "0.25", func(c config.Config) bool { return c.CheckRun == 250*time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := required()
			e[tt.key] = tt.value
			c, err := config.FromEnv(env(e))
			if err != nil {
				t.Fatalf("%s=%q: %v", tt.key, tt.value, err)
			}
			if !tt.check(c) {
				t.Errorf("%s=%q gave %+v", tt.key, tt.value, c)
			}
		})
	}
}

func TestFromEnvMissingRequired(t *testing.T) {
	tests := []struct {
		name    string
		unset   []string
		wantErr []string
	}{
		{"table", []string{"TABLE_NAME"}, []string{"TABLE_NAME is not set"}},
		{"output queue", []string{"OUTPUT_QUEUE_URL"}, []string{"OUTPUT_QUEUE_URL is not set"}},
		{"param path", []string{"PARAM_PATH"}, []string{"PARAM_PATH is not set"}},
		{"all three", []string{"TABLE_NAME", "OUTPUT_QUEUE_URL", "PARAM_PATH"}, []string{"TABLE_NAME is not set", "OUTPUT_QUEUE_URL is not set", "PARAM_PATH is not set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := required()
			for _, k := range tt.unset {
				delete(e, k)
			}
			_, err := config.FromEnv(env(e))
			if err == nil {
				t.Fatalf("FromEnv accepted an environment without %v", tt.unset)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			for _, k := range []string{"TABLE_NAME", "OUTPUT_QUEUE_URL", "PARAM_PATH"} {
				if _, set := e[k]; set && strings.Contains(err.Error(), k) {
					t.Errorf("error %q names %s, which is set", err, k)
				}
			}
		})
	}
	t.Run("input queue is optional", func(t *testing.T) {
		if _, err := config.FromEnv(env(required())); err != nil {
			t.Errorf("FromEnv without INPUT_QUEUE_URL: %v", err)
		}
	})
}

func TestFromEnvBadValues(t *testing.T) {
	tests := []struct {
		name  string
		key   string
		value string
	}{
		{"shard count zero", "SHARD_COUNT", "0"},
		{"shard count negative", "SHARD_COUNT", "-1"},
		{"shard count over 16", "SHARD_COUNT", "17"},
		{"shard count not a number", "SHARD_COUNT", "four"},
		{"shard count fraction", "SHARD_COUNT", "1.5"},
		{"shard count with space", "SHARD_COUNT", " 4"},
		{"private networks yes", "ALLOW_PRIVATE_NETWORKS", "yes"},
		{"private networks typo", "ALLOW_PRIVATE_NETWORKS", "flase"},
		{"networks not CIDRs", "ALLOW_NETWORKS", "10.0.0.0/8,intranet"},
		{"networks with host bits", "ALLOW_NETWORKS", "10.1.2.3/8"},
		{"check run zero", "CHECK_RUN_SECONDS", "0"},
		{"check run negative", "CHECK_RUN_SECONDS", "-5"},
		{"check run over 900", "CHECK_RUN_SECONDS", "901"},
		{"check run not a number", "CHECK_RUN_SECONDS", "1m"},
		{"check run infinite", "CHECK_RUN_SECONDS", "Inf"},
		{"check run NaN", "CHECK_RUN_SECONDS", "NaN"},
		{"check run rounds to zero", "CHECK_RUN_SECONDS", "1e-10"},
		{"body retention zero", "BODY_RETENTION_DAYS", "0"},
		{"body retention in hours", "BODY_RETENTION_DAYS", "12h"},
		{"message size over SQS's 1 MiB", "OUTPUT_MAX_MESSAGE_BYTES", "1048577"},
		{"message size too small for a result", "OUTPUT_MAX_MESSAGE_BYTES", "1024"},
		{"ephemeral storage below Lambda's 512 MB", "EPHEMERAL_STORAGE_MB", "511"},
		{"ephemeral storage above Lambda's 10,240 MB", "EPHEMERAL_STORAGE_MB", "10241"},
		{"ephemeral storage not a number", "EPHEMERAL_STORAGE_MB", "1GB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := required()
			e[tt.key] = tt.value
			c, err := config.FromEnv(env(e))
			if err == nil {
				t.Fatalf("%s=%q accepted: %+v", tt.key, tt.value, c)
			}
			if !strings.Contains(err.Error(), tt.key+"=") || !strings.Contains(err.Error(), tt.value) {
				t.Errorf("error %q does not name %s and its value %q", err, tt.key, tt.value)
			}
		})
	}
}

// TestFromEnvOneErrorForAll: every problem is in the one error, so an
// operator fixes the environment in one deploy.
func TestFromEnvOneErrorForAll(t *testing.T) {
	e := map[string]string{
		"SHARD_COUNT":            "99",
		"ALLOW_PRIVATE_NETWORKS": "maybe",
		"CHECK_RUN_SECONDS":      "-1",
	}
	_, err := config.FromEnv(env(e))
	if err == nil {
		t.Fatal("FromEnv accepted an empty, broken environment")
	}
	msg := err.Error()
	for _, want := range []string{"TABLE_NAME", "OUTPUT_QUEUE_URL", "PARAM_PATH", `SHARD_COUNT="99"`, `ALLOW_PRIVATE_NETWORKS="maybe"`, `CHECK_RUN_SECONDS="-1"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %s:\n%s", want, msg)
		}
	}
	if !strings.HasPrefix(msg, "function environment: ") {
		t.Errorf("error %q does not say it is about the function environment", msg)
	}
}

// TestFromEnvDeniesNamingTheVariables: a deployed function's denial says
// which variable would allow the address, and ALLOW_PRIVATE_NETWORKS
// never opens the metadata endpoint.
func TestFromEnvDeniesNamingTheVariables(t *testing.T) {
	e := required()
	e["ALLOW_PRIVATE_NETWORKS"] = "true"
	c, err := config.FromEnv(env(e))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Addresses.Check(netip.MustParseAddrPort("10.0.0.1:8080"), nil); err != nil {
		t.Errorf("ALLOW_PRIVATE_NETWORKS=true refused 10.0.0.1: %v", err)
	}
	err = c.Addresses.Check(netip.MustParseAddrPort("169.254.169.254:80"), nil)
	want := "(deployed: ALLOW_NETWORKS=169.254.169.254/32, named exactly; ALLOW_PRIVATE_NETWORKS=true never opens it)"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("metadata endpoint with ALLOW_PRIVATE_NETWORKS=true: %v, want a denial ending %q", err, want)
	}
	c, _ = config.FromEnv(env(required()))
	err = c.Addresses.Check(netip.MustParseAddrPort("127.0.0.1:80"), nil)
	want = "(deployed: ALLOW_NETWORKS=127.0.0.0/8 or ALLOW_PRIVATE_NETWORKS=true)"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("loopback by default: %v, want a denial ending %q", err, want)
	}
}

// TestWarcOutput: WARC_OUTPUT turns WARC output on, and refuses to without
// a body bucket to hold the segments or with a value that is not a bool.
func TestWarcOutput(t *testing.T) {
	e := required()
	e["WARC_OUTPUT"], e["BODY_BUCKET"] = "true", "b"
	if c, err := config.FromEnv(env(e)); err != nil || !c.WarcOutput {
		t.Fatalf("WARC_OUTPUT=true: %+v, %v", c, err)
	}
	for _, bad := range []map[string]string{{"WARC_OUTPUT": "true"}, {"WARC_OUTPUT": "yes", "BODY_BUCKET": "b"}} {
		e := required()
		maps.Copy(e, bad)
		if _, err := config.FromEnv(env(e)); err == nil || !strings.Contains(err.Error(), "WARC_OUTPUT") {
			t.Errorf("%v: error %v, want one naming WARC_OUTPUT", bad, err)
		}
	}
}
