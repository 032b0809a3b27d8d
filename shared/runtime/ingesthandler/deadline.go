package ingesthandler

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Ingest's time. An invocation that outlives its timeout is killed: the
// whole SQS batch comes back (the hosts already written are written again,
// as duplicates) and, killed five times, lands in the dead-letter queue,
// and a POST /urls gets no answer at all. So ingest stops starting host
// writes early enough to finish those under way and answer in time: what
// it could not write is reported as batch item failures (SQS redelivers
// only those records) or answered 503 (the client sends those items
// again).
const (
	// answerMargin is kept between the end of the host writes and the
	// deadline: waking check shards, building and returning the answer.
	answerMargin = 2 * time.Second
	// startMargin is kept, before that, between the last host write
	// started and the end of the writes: one write (a read and a
	// conditional put, retried on a conflict) takes tens of milliseconds;
	// one that takes longer is cut off by the context and fails alone.
	startMargin = 3 * time.Second
	// apiGatewayTimeout is API Gateway's integration timeout: an answer to
	// POST /urls later than that reaches nobody (the client got a 504),
	// whatever the function's own timeout.
	apiGatewayTimeout = 29 * time.Second
)

// apiDeadline is when API Gateway stops waiting for the answer to ev: 29 s
// after the request arrived (its RequestTimeEpoch), not after the handler
// started, since a cold start or a wait for a free instance spends the
// same 29 s ("Amazon API Gateway quotas", integration timeout). An event
// without the time (a local server that does not set it), one stamped
// after now (clocks apart), or one whose 29 s had passed before the
// handler began (a saved event replayed, as `sam local invoke -e` does:
// on AWS the gateway would not be waiting, and refusing every item would
// only make a replay fail) counts from now.
func apiDeadline(ev events.APIGatewayProxyRequest, now time.Time) time.Time {
	d := now.Add(apiGatewayTimeout)
	if ms := ev.RequestContext.RequestTimeEpoch; ms > 0 {
		if arrived := time.UnixMilli(ms).Add(apiGatewayTimeout); arrived.Before(d) && arrived.After(now) {
			d = arrived
		}
	}
	return d
}

// timeBox returns the context the host writes run under (it ends
// answerMargin before ctx's deadline) and the time after which no host
// write starts (zero when ctx has no deadline).
func timeBox(ctx context.Context) (context.Context, context.CancelFunc, time.Time) {
	deadline, ok := ctx.Deadline()
	if !ok {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, time.Time{}
	}
	wctx, cancel := context.WithDeadline(ctx, deadline.Add(-answerMargin))
	return wctx, cancel, deadline.Add(-answerMargin - startMargin)
}

// wakeBox bounds the wake-up sent after the writes: it must not cost the
// answer. Three quarters of answerMargin, 1.5 s, are left for that: a
// wake-up that a loaded Lambda API answers late is cut off (the schedule
// comes within a minute), and the batch is answered over a second before
// its timeout, not a few milliseconds.
func wakeBox(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, deadline.Add(-answerMargin*3/4))
	}
	return context.WithCancel(ctx)
}
