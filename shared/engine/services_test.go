package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/config"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/wiring"
)

// TestEngineAsWired runs the engine exactly as the check function wires it
// (wiring.New: SSM parameters, the SQS output publisher, the fetcher
// cache) on a deployed template, and reads the results back from the
// output queue: the fetch semantics above hold through the real wiring.
func TestEngineAsWired(t *testing.T) {
	t.Parallel()
	st, awsCfg := stack.DeployForTest(t, stack.Options{ShardCount: 1, ParamOverrides: map[string]string{
		"FetchDelay": "200ms", "CheckHostPeriod": "2s", "RespectRobots": "true",
	}})
	env := st.Env()
	env["ALLOW_PRIVATE_NETWORKS"] = "true"
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	svc := wiring.New(awsCfg, cfg, wiring.Options{ParamTTL: time.Second})
	t.Cleanup(svc.Publisher.Close)

	site := startDemo(t, 2, 120)
	var msgs []urlmsg.Message
	for i, u := range site.URLs(3) {
		m, err := urlmsg.Validate(urlmsg.Input{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		m.ID = urlmsg.MakeID("wired", i, m.URL)
		msgs = append(msgs, m)
	}
	p := svc.Params.Get(t.Context())
	if p.FetchDelay != 200*time.Millisecond {
		t.Fatalf("FetchDelay from SSM = %v, want the deployed 200ms", p.FetchDelay)
	}
	res := svc.Ingester.Ingest(t.Context(), hostqueue.IngestParams{PersistLimit: p.PersistLimit}, msgs)
	if len(res.Failed) != 0 {
		t.Fatalf("ingest: %v", res.Failed)
	}

	// Hosts are due within two periods of the ingest; stop once the site
	// has answered robots.txt and three pages on both hosts.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if settled(site.Requests(), 8) {
				cancel()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	sum, err := svc.Engine.Run(ctx, engine.RunRequest{
		Shard: 0, ShardCount: 1, Owner: "wired", Until: time.Now().Add(2*p.CheckHostPeriod + 8*time.Second),
		Tick: 250 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("summary %+v", sum)

	got := receiveResults(t, awsCfg, cfg.OutputQueueURL, len(msgs))
	for _, m := range msgs {
		r, ok := got[m.ID]
		if !ok {
			t.Errorf("%s: no result on the output queue", m.URL)
			continue
		}
		if r.Status != result.StatusFetched || r.URL != m.URL || r.Attempts != 1 {
			t.Errorf("%s: %s attempts=%d err=%q, want fetched", m.URL, r.Status, r.Attempts, r.Error)
		}
	}
	checkPolite(t, site.Requests(), p.FetchDelay)
}

// receiveResults reads the output queue until it holds want distinct
// result ids (or 15s pass), failing on a duplicate.
func receiveResults(t *testing.T, awsCfg aws.Config, queueURL string, want int) map[string]result.Result {
	t.Helper()
	client := sqs.NewFromConfig(awsCfg)
	got := map[string]result.Result{}
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: &queueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatalf("receive results: %v", err)
		}
		for _, m := range out.Messages {
			var r result.Result
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &r); err != nil {
				t.Fatalf("result %q: %v", aws.ToString(m.Body), err)
			}
			if _, dup := got[r.ID]; dup {
				t.Errorf("duplicate result %s for %s", r.ID, r.URL)
			}
			got[r.ID] = r
			if _, err := client.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete result: %v", err)
			}
		}
	}
	if len(got) != want {
		t.Errorf("%d results on the output queue, want %d", len(got), want)
	}
	return got
}
