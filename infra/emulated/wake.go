package emulated

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
)

// unsetWakeConcurrency bounds the wake-ups run at once when the template
// sets no MaximumConcurrency (template.yaml derives it from ShardCount).
const unsetWakeConcurrency = 16

// WakeInvocations counts the check invocations the wake queue made.
func (p *Pipeline) WakeInvocations() int { return int(p.wakes.Load()) }

// ServeWakes is the check function's wake-queue event source mapping, until
// ctx ends: it receives batches of wake-ups and invokes the check handler
// with each (side by side, up to the mapping's concurrency), deleting a
// batch once its invocation returns. A template without a wake queue makes
// it return at once.
func (p *Pipeline) ServeWakes(ctx context.Context) {
	esm := p.Stack.WakeEventSource
	if esm.QueueURL == "" {
		return
	}
	conc := esm.MaximumConcurrency
	if conc <= 0 {
		conc = unsetWakeConcurrency
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &esm.QueueURL, MaxNumberOfMessages: int32(min(10, max(1, esm.BatchSize))), WaitTimeSeconds: 1,
		})
		if err != nil {
			if ctx.Err() == nil {
				p.log.Error("wake poll", "error", err)
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		ev := checkhandler.Event{}
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body), EventSource: "aws:sqs"})
		}
		msgs := out.Messages
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if !p.lambda.acquire() {
				// Throttled: the wake-ups stay on the queue and come back
				// after its visibility timeout, as the mapping retries.
				return
			}
			ictx, cancel := context.WithTimeout(ctx, p.opts.CheckRun+checkhandler.DeadlineMargin+15*time.Second)
			_, _ = p.check.Handle(p.opts.Faults.CheckCrash(ictx), ev)
			cancel()
			p.lambda.release()
			p.wakes.Add(1)
			var del []sqstypes.DeleteMessageBatchRequestEntry
			for i, m := range msgs {
				del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
			}
			for b := range slices.Chunk(del, 10) {
				if _, err := p.sqs.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: &esm.QueueURL, Entries: b}); err != nil {
					p.log.Error("delete wake-ups", "error", err)
				}
			}
		}()
	}
}
