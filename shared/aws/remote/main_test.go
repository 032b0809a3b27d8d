package remote

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
)

// sdkChainOnMoto points the SDK's default chain at moto's test account
// through the environment only, as a user's shell would, and keeps it from
// reading this machine's files or asking an instance metadata service.
// The shared moto is started first: it must not inherit these.
func sdkChainOnMoto(t *testing.T) {
	moto.Shared(t)
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
		"AWS_REGION": moto.Region, "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "",
	} {
		t.Setenv(k, v)
	}
}

type cmdResult struct {
	code           int
	stdout, stderr string
}

func runCmd(ctx context.Context, stdin string, args ...string) cmdResult {
	var out, errb bytes.Buffer
	code := run(ctx, args, env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, aws: loadConfig})
	return cmdResult{code, out.String(), errb.String()}
}

// TestCommandsThroughTheStackOutputs runs `send` and `receive` as a user
// would: flags, the SDK's default chain, the queues from the stack's
// CloudFormation outputs.
func TestCommandsThroughTheStackOutputs(t *testing.T) {
	sdkChainOnMoto(t)
	st, cfg := stack.DeployForTest(t, stack.Options{})
	name := createOutputsStack(t, cfg, st)
	endpoint := moto.Shared(t).Endpoint
	path, urls := writeList(t, 250, 5)

	r := runCmd(t.Context(), "", "send", "--endpoint-url", endpoint, "--stack", name, "--urls", path)
	if r.code != ExitOK || !strings.Contains(r.stdout, "sent 250 URLs") {
		t.Fatalf("send: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(path + ".sent.json"); err != nil {
		t.Errorf("no progress beside the list: %v", err)
	}
	r = runCmd(t.Context(), "", "send", "--endpoint-url", endpoint, "--stack", name, "--urls", path)
	if r.code != ExitOK || !strings.Contains(r.stdout, "sent 0 URLs") || !strings.Contains(r.stdout, "252 lines sent by earlier runs skipped") {
		t.Fatalf("send again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	exactlyOnce(t, urlsOf(t, drain(t, sqs.NewFromConfig(cfg), st.InputQueueURL)), urls)

	r = runCmd(t.Context(), "http://a.example/\nnot a url\n", "send", "--endpoint-url", endpoint, "--input-queue", st.InputQueueURL)
	if r.code != ExitError || !strings.Contains(r.stderr, "line 2 refused") || !strings.Contains(r.stderr, "cannot resume") {
		t.Fatalf("send from stdin with a bad line: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	seedResults(t, st, cfg)
	dir := t.TempDir()
	out := filepath.Join(dir, "results.jsonl")
	r = runCmd(t.Context(), "", "receive", "--endpoint-url", endpoint, "--stack", name, "--out", out, "--bodies", filepath.Join(dir, "b"), "--until-idle", "2s")
	if r.code != ExitOK || !strings.Contains(r.stdout, "wrote 3 results") || !strings.Contains(r.stdout, "1 bodies fetched") {
		t.Fatalf("receive: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if ids := idsIn(t, out); len(ids) != 3 {
		t.Fatalf("out ids %v", ids)
	}
}

func TestCommandUsage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "usage:"},
		{"unknown command", []string{"fetch"}, `unknown command "fetch"`},
		{"send without a queue", []string{"send", "--urls", "x"}, "--stack NAME"},
		{"receive without out", []string{"receive", "--output-queue", "http://q"}, "--out FILE is required"},
		{"bodies and inline", []string{"receive", "--output-queue", "http://q", "--out", "o", "--bodies", "d", "--inline"}, "exclude each other"},
		{"unknown flag", []string{"send", "--queue", "x"}, "flag provided but not defined"},
		{"missing list", []string{"send", "--input-queue", "http://q", "--urls", "/nonexistent/list"}, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(t.Context(), c.args, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
				aws: func(context.Context, awsFlags) (aws.Config, error) {
					t.Error("an AWS configuration was loaded for a usage error")
					return aws.Config{}, nil
				}})
			if code != ExitUsage || !strings.Contains(errb.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), ExitUsage, c.want)
			}
		})
	}
}

func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"send", "--help"}, {"receive", "-h"}, {"--help"}} {
		var out, errb bytes.Buffer
		code := run(t.Context(), args, env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb})
		if code != ExitOK || !strings.Contains(out.String()+errb.String(), "--") {
			t.Errorf("%q: exit %d, output %q", args, code, out.String()+errb.String())
		}
	}
}
