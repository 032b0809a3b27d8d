package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/urldownloader/urldownloader/infra/moto"
)

// TestSmoke runs every part of the benchmark at tiny sizes (the -smoke
// mode), so `make test` keeps `make bench` working.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto and the lambda emulator")
	}
	cfg := SmokeConfig()
	dir := t.TempDir()
	cfg.Out = filepath.Join(dir, "benchmarks.md")
	cfg.PNG = filepath.Join(dir, "plot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log strings.Builder
	res, err := Run(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("smoke run: %v\nlog:\n%s", err, log.String())
	}
	if len(res.Politeness) != 1 || len(res.Cost) != 3 || res.Lambda == nil {
		t.Fatalf("smoke run is missing parts: %d politeness, %d cost, lambda %v", len(res.Politeness), len(res.Cost), res.Lambda != nil)
	}
	p := res.Politeness[0]
	if p.Ours.MinGap < p.Delay {
		t.Errorf("our smallest gap %s is below the delay %s", p.Ours.MinGap, p.Delay)
	}
	for _, c := range res.Cost {
		if tot := c.Usage.Total(); tot.WriteUnits == 0 || tot.Requests == 0 {
			t.Errorf("%s: no DynamoDB usage metered: %+v", c.Name, tot)
		}
	}
	doc, err := os.ReadFile(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{beginMarker, endMarker, "steady / (H/d)", "write units / URL", "bootstrap"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if st, err := os.Stat(cfg.PNG); err != nil || st.Size() == 0 {
		t.Errorf("no plot: %v", err)
	}
	// A second write keeps the text around the generated section.
	if err := os.WriteFile(cfg.Out, []byte("intro\n"+string(doc)+"\nanalysis\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := res.Write(cfg.Out, cfg.PNG); err != nil {
		t.Fatal(err)
	}
	doc2, _ := os.ReadFile(cfg.Out)
	if !strings.HasPrefix(string(doc2), "intro\n") || !strings.HasSuffix(string(doc2), "\nanalysis\n") || strings.Count(string(doc2), beginMarker) != 1 {
		t.Errorf("rewrite lost the hand-written text around the generated section")
	}
}

// BenchmarkIngest is the ingest CPU per URL figure: go test -bench Ingest ./infra/bench.
func BenchmarkIngest(b *testing.B) { benchmarkIngest(b) }

// TestMotoShim checks that the shimmed moto answers as stock moto does on
// what the shim touches: counts, receives, batch deletes (a bad handle
// fails alone, one deleted before succeeds), and that it is fast.
func TestMotoShim(t *testing.T) {
	undo, err := installMotoShim()
	if err != nil {
		t.Fatal(err)
	}
	defer undo()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := moto.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg, err := moto.AWSConfig(ctx, srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	q := sqs.NewFromConfig(cfg)
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("shim")})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	start := time.Now()
	for i := 0; i < n; i += 10 {
		var es []sqstypes.SendMessageBatchRequestEntry
		for j := 0; j < 10; j++ {
			es = append(es, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(strconv.Itoa(i + j))})
		}
		if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: out.QueueUrl, Entries: es}); err != nil {
			t.Fatal(err)
		}
	}
	attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	if got := attrs.Attributes["ApproximateNumberOfMessages"]; got != strconv.Itoa(n) {
		t.Errorf("ApproximateNumberOfMessages = %s, want %d", got, n)
	}
	seen := map[string]bool{}
	var handles []*string
	for len(seen) < n {
		r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: out.QueueUrl, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			t.Fatalf("receive returned nothing after %d of %d", len(seen), n)
		}
		for _, m := range r.Messages {
			seen[*m.Body] = true
			handles = append(handles, m.ReceiptHandle)
		}
	}
	for i := 0; i < len(handles); i += 8 {
		es := []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("bad"), ReceiptHandle: aws.String("not-a-handle")}}
		for j, h := range handles[i:min(i+8, len(handles))] {
			es = append(es, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), ReceiptHandle: h})
		}
		if i > 0 {
			// A handle deleted before is deleted again without error.
			es = append(es, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String("again"), ReceiptHandle: handles[0]})
		}
		r, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: out.QueueUrl, Entries: es})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Failed) != 1 || aws.ToString(r.Failed[0].Id) != "bad" || len(r.Successful) != len(es)-1 {
			t.Fatalf("delete batch: %d ok, failed %+v; want all but the bad handle", len(r.Successful), r.Failed)
		}
	}
	attrs, err = q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"} {
		if got := attrs.Attributes[a]; got != "0" {
			t.Errorf("%s = %s after deleting everything, want 0", a, got)
		}
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("%d messages took %s through the shimmed moto", n, d)
	}
}
