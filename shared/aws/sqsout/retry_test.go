package sqsout_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/urldownloader/urldownloader/shared/aws/sqsout"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// flaky fails its first fails calls, then takes every entry.
type flaky struct {
	fails int64
	calls atomic.Int64
}

func (f *flaky) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	if f.calls.Add(1) <= f.fails {
		return nil, errors.New("throttled")
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m")})
	}
	return out, nil
}

func TestPublishRetriesAFailedBatch(t *testing.T) {
	c := &flaky{fails: 2}
	var retried atomic.Int64
	p := sqsout.New(c, "q", sqsout.Options{Linger: time.Millisecond, OnRetry: func(n int) { retried.Add(int64(n)) }})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Publish(ctx, []result.Result{{ID: "a", URL: "http://h/a", Status: result.StatusFetched}}); err != nil {
		t.Fatalf("Publish after two failed sends: %v", err)
	}
	if got := c.calls.Load(); got != 3 {
		t.Errorf("SendMessageBatch calls = %d, want 3", got)
	}
	if got := retried.Load(); got != 2 {
		t.Errorf("OnRetry counted %d messages, want 2", got)
	}
}
