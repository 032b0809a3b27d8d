package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestPrintedCommandsWork starts the up mode with the in-process API (no
// Docker here) and runs the banner's commands exactly as printed, in bash
// from the repository's folder, as a user would paste them: the curl post
// and the SQS send come out as results read with the AWS CLI, and the
// put-parameter cuts the bodies of the next results.
func TestPrintedCommandsWork(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	const ttl = time.Second
	d, err := start(ctx, options{
		Listen: "127.0.0.1:0", API: apiInProcess, DemoHosts: 2, ParamTTL: ttl,
		ScheduleEvery: time.Minute, CheckRun: 20 * time.Second,
		Params: map[string]string{"FetchDelay": "200ms"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() { defer close(served); d.serve(serveCtx) }()
	defer func() { stopServe(); <-served }()

	var banner bytes.Buffer
	d.banner(&banner, ttl)
	cmds := map[string]string{}
	for _, c := range d.commands() {
		if !strings.Contains(banner.String(), c.Line+"\n") {
			t.Fatalf("the banner does not print %q", c.Line)
		}
		switch {
		case strings.HasPrefix(c.Line, "curl "):
			cmds["post"] = c.Line
		case strings.HasPrefix(c.Line, "export "):
			cmds["env"] = c.Line
		case strings.Contains(c.Line, " send-message "):
			cmds["send"] = c.Line
		case strings.Contains(c.Line, " receive-message "):
			cmds["receive"] = c.Line
		case strings.Contains(c.Line, " put-parameter "):
			cmds["param"] = c.Line
		}
	}
	if len(cmds) != 5 {
		t.Fatalf("the banner lacks commands: got %v", cmds)
	}
	sh := func(line string) []byte {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, "bash", "-c", "set -eu\n"+cmds["env"]+"\n"+line)
		cmd.Dir = root
		// No developer profile may redirect the CLI.
		cmd.Env = append(cmd.Environ(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, stderr.String())
		}
		return out
	}
	// receive runs the printed receive (and deletes what it got, as the
	// banner says to) until n results have come, and returns them by URL.
	receive := func(n int) map[string]result.Result {
		t.Helper()
		got := map[string]result.Result{}
		deadline := time.Now().Add(90 * time.Second)
		for len(got) < n {
			if time.Now().After(deadline) {
				t.Fatalf("after 90 s, %d of %d results: %v", len(got), n, got)
			}
			out := sh(cmds["receive"])
			if len(bytes.TrimSpace(out)) == 0 {
				continue
			}
			var msgs struct {
				Messages []struct{ Body, ReceiptHandle string }
			}
			if err := json.Unmarshal(out, &msgs); err != nil {
				t.Fatalf("receive-message printed %q: %v", out, err)
			}
			for _, m := range msgs.Messages {
				var r result.Result
				if err := json.Unmarshal([]byte(m.Body), &r); err != nil {
					t.Fatalf("result %q: %v", m.Body, err)
				}
				got[r.URL] = r
				sh(".venv/bin/aws sqs delete-message --endpoint-url " + d.endpoint + " --queue-url " + d.pipe.Stack.OutputQueueURL + " --receipt-handle '" + m.ReceiptHandle + "'")
			}
		}
		return got
	}

	began := time.Now()
	var posted struct {
		Accepted int      `json:"accepted"`
		IDs      []string `json:"ids"`
	}
	if out := sh(cmds["post"]); json.Unmarshal(out, &posted) != nil || posted.Accepted != 2 {
		t.Fatalf("the curl printed %q, want 202 with 2 accepted", out)
	}
	sh(cmds["send"])
	first := receive(3)
	for u, r := range first {
		if r.Status != result.StatusFetched || r.Truncated || !strings.HasPrefix(r.Data, "demo page ") {
			t.Errorf("%s: %s truncated=%v data %q, want fetched in full", u, r.Status, r.Truncated, r.Data)
		}
	}
	t.Logf("posted and sent URLs fetched and read with the AWS CLI in %v", time.Since(began).Round(time.Millisecond))

	sh(cmds["param"])
	changed := time.Now()
	time.Sleep(ttl + 200*time.Millisecond)
	sh(cmds["post"])
	second := receive(2)
	for u, r := range second {
		if r.Status != result.StatusFetched || !r.Truncated || r.Data != "demo page 12" {
			t.Errorf("%s after MaxBodyBytes=12: %s truncated=%v data %q, want fetched, truncated to \"demo page 12\"", u, r.Status, r.Truncated, r.Data)
		}
	}
	t.Logf("put-parameter showed in the results %v after it", time.Since(changed).Round(time.Millisecond))
}
