package wiring

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/urldownloader/urldownloader/shared/aws/config"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
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

// TestResolveReachesTheFetcher: Options.Resolve is the fetchers' name
// table, so the local stack's names reach its loopback sites, and a name
// outside it fails as "no such host" without a DNS query.
func TestResolveReachesTheFetcher(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "named site") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	cfg := config.Config{TableName: "t", OutputQueueURL: "http://127.0.0.1:1/q", ParamPath: "/p/", ShardCount: 1, Addresses: fetch.PrivatePolicy()}
	s := New(aws.Config{Region: "us-east-1"}, cfg, Options{Resolve: map[string][]netip.Addr{"www.site.test": {netip.MustParseAddr("127.0.0.2")}}})
	f := s.Engine.Fetcher(params.Defaults())
	resp, err := f.Fetch(t.Context(), fetch.Request{URL: "http://www.site.test:" + port + "/"})
	if err != nil || string(resp.Body) != "named site" {
		t.Fatalf("Fetch of a name in the table = %v, %v; want the site's page", resp, err)
	}
	_, err = f.Fetch(t.Context(), fetch.Request{URL: "http://absent.site.test:" + port + "/"})
	if fetch.KindOf(err) != fetch.KindDNS || fetch.IsTransient(err) || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("Fetch of a name outside the table: %v (kind %s), want a permanent no such host", err, fetch.KindOf(err))
	}
}

// TestIngestAndDialShareThePolicy: the deployment's address policy (here
// ALLOW_PRIVATE_NETWORKS=true) is what both ingest's guard and the
// fetcher apply: the private set opens, the metadata endpoint does not,
// and the denial names the function's variables.
func TestIngestAndDialShareThePolicy(t *testing.T) {
	cfg, err := config.FromEnv(func(k string) string {
		return map[string]string{"TABLE_NAME": "t", "OUTPUT_QUEUE_URL": "http://127.0.0.1:1/q", "PARAM_PATH": "/p/",
			"ALLOW_PRIVATE_NETWORKS": "true"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	meta := netip.MustParseAddr("169.254.169.254")
	s := New(aws.Config{Region: "us-east-1"}, cfg, Options{Resolve: map[string][]netip.Addr{"metadata.test": {meta}}})
	const want = "address 169.254.169.254 is link-local (the cloud instance metadata endpoint: AWS, GCP, Azure, Oracle, OpenStack): not allowed (deployed: ALLOW_NETWORKS=169.254.169.254/32, named exactly; ALLOW_PRIVATE_NETWORKS=true never opens it)"
	if err := s.Ingester.Guard(netip.AddrPortFrom(meta, 80), []int{80}); err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("ingest guard on the metadata endpoint: %v, want %q", err, want)
	}
	if err := s.Ingester.Guard(netip.MustParseAddrPort("10.0.0.1:8080"), []int{80}); err != nil {
		t.Errorf("ingest guard on a private address with ALLOW_PRIVATE_NETWORKS=true: %v", err)
	}
	// The name resolves from the fixed table: no query, and the dial is
	// refused before connect, so no packet leaves.
	_, err = s.Engine.Fetcher(params.Defaults()).Fetch(t.Context(), fetch.Request{URL: "http://metadata.test/latest/meta-data/"})
	if fetch.KindOf(err) != fetch.KindDenied || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("fetch of a name on the metadata endpoint: %v, want a denial ending %q", err, want)
	}
}

// TestWarcSpoolFitsEphemeralStorage: with WarcOutput, the check function
// refuses a MaxBodyBytes whose spools, for as many workers as its memory
// runs, would not fit in its /tmp (EPHEMERAL_STORAGE_MB): in 512 MB the
// default 10 MiB gives way to the largest that fits; in 10,240 MB it
// stands. Without WarcOutput nothing is spooled and nothing is bounded.
func TestWarcSpoolFitsEphemeralStorage(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name    string
		warc    bool
		storage int
		fits    bool
	}{
		{"WARC in 512 MB", true, 512, false},
		{"WARC in 10,240 MB", true, 10240, true},
		{"no WARC in 512 MB", false, 512, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Config{TableName: "t", OutputQueueURL: "http://127.0.0.1:1/q", ParamPath: "/p/", ShardCount: 1,
				BodyBucket: "b", WarcOutput: tc.warc, EphemeralStorageMB: tc.storage, CheckRun: time.Minute}
			// SSM on a closed port, and no time to retry: the values in
			// force are the defaults, as bounded.
			s := New(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1")}, cfg, Options{Budget: BudgetFor(512), Log: slog.New(slog.DiscardHandler)})
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			p := s.Params.Get(ctx)
			workers := s.Engine.WorkerLimit(p)
			spools := int64(workers)*2*p.MaxBodyBytes + params.SpoolMargin
			if tc.fits {
				if p.MaxBodyBytes != params.DefaultMaxBodyBytes {
					t.Errorf("MaxBodyBytes = %d, want the default", p.MaxBodyBytes)
				}
				return
			}
			if p.MaxBodyBytes >= params.DefaultMaxBodyBytes || spools > int64(tc.storage)*mib {
				t.Errorf("MaxBodyBytes = %d: %d workers spool %d MiB, want within %d MiB", p.MaxBodyBytes, workers, spools/mib, tc.storage)
			}
		})
	}
}
