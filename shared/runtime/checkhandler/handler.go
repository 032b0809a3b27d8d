// Package handler translates the check function's events into shard runs:
// the schedule's {"shard": N}, and wake-up batches from the wake queue whose
// messages carry the same body.
package checkhandler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// Runner is the domain service the handler calls.
type Runner interface {
	Run(ctx context.Context, req engine.RunRequest) (engine.Summary, error)
}

var _ Runner = (*engine.Engine)(nil)

// Event is the schedule's input for one shard, or a batch from the wake
// queue whose message bodies are such inputs.
type Event struct {
	Shard *int `json:"shard"`
	// Records are the wake queue's messages (ingest gave the shards in
	// their bodies new work).
	Records []events.SQSMessage `json:"Records"`
}

// Handler runs one shard per invocation.
type Handler struct {
	Runner     Runner
	ShardCount int
	// Run is how long an invocation keeps starting requests (it also stops
	// DeadlineMargin before the Lambda deadline).
	Run time.Duration
	Now func() time.Time
	Log *slog.Logger
	// Metrics is the process's Recorder (the engine's): Handle flushes it
	// once per invocation. Nil records nothing.
	Metrics *metrics.Recorder
}

// DeadlineMargin is kept between the run's end and the Lambda deadline for
// in-flight requests to finish and their results to be committed.
const DeadlineMargin = 15 * time.Second

// RunWindow is the least time from a run's start to its deadline
// (engine.RunRequest.Deadline) for runs of the given length, when the
// function's timeout leaves DeadlineMargin after the run (template.yaml
// gives 120 s for a 55 s run): the deadline is DeadlineMargin/3 before the
// invocation's, so at least run + 2/3 DeadlineMargin after the start. A
// FetchTimeout that does not fit in it (engine.FetchTimeoutLimit) would let
// no run start a request.
func RunWindow(run time.Duration) time.Duration {
	return run + DeadlineMargin - DeadlineMargin/3
}

// LeaseWait covers a predecessor that is still finishing its in-flight
// requests when the next minute's invocation starts.
const LeaseWait = 20 * time.Second

// Handle runs the shard named by the event, or the shards a wake-up names.
func (h *Handler) Handle(ctx context.Context, ev Event) (engine.Summary, error) {
	defer func() {
		if err := h.Metrics.Flush(); err != nil {
			h.Log.ErrorContext(ctx, "write metrics", "error", err)
		}
	}()
	if len(ev.Records) > 0 {
		return h.wake(ctx, ev.Records), nil
	}
	if ev.Shard == nil {
		return engine.Summary{}, fmt.Errorf("check: event has no \"shard\": want {\"shard\": N} with N from 0 to %d", h.ShardCount-1)
	}
	return h.run(ctx, *ev.Shard, false)
}

// wake runs each shard named by the wake queue's messages, at once and side
// by side, each ending at once if another run holds it. It never fails: a
// wake-up is a hint (the schedule runs every shard anyway), and a retried
// batch would only come after the queue's visibility timeout.
func (h *Handler) wake(ctx context.Context, recs []events.SQSMessage) engine.Summary {
	var shards []int
	for _, rec := range recs {
		var ev Event
		if err := json.Unmarshal([]byte(rec.Body), &ev); err != nil || ev.Shard == nil || *ev.Shard < 0 || *ev.Shard >= h.ShardCount {
			h.Log.ErrorContext(ctx, "ignore wake-up", "messageId", rec.MessageId, "body", rec.Body, "shardCount", h.ShardCount)
			continue
		}
		if !slices.Contains(shards, *ev.Shard) {
			shards = append(shards, *ev.Shard)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var all engine.Summary
	for _, s := range shards {
		wg.Go(func() {
			sum, err := h.run(ctx, s, true)
			if err != nil {
				h.Log.ErrorContext(ctx, "woken check", "shard", s, "error", err)
			}
			mu.Lock()
			defer mu.Unlock()
			all = merge(all, sum)
		})
	}
	wg.Wait()
	return all
}

// merge adds b's counts to a (the summary of a wake-up's several shards).
func merge(a, b engine.Summary) engine.Summary {
	if a.VirtualShards == nil {
		a.Shard = b.Shard
	}
	a.VirtualShards = append(a.VirtualShards, b.VirtualShards...)
	a.Leased = append(a.Leased, b.Leased...)
	a.Hosts += b.Hosts
	a.Requests += b.Requests
	a.Errors += b.Errors
	a.LocalErrors += b.LocalErrors
	for k, n := range b.Results {
		if a.Results == nil {
			a.Results = map[result.Status]int{}
		}
		a.Results[k] += n
	}
	return a
}

func (h *Handler) run(ctx context.Context, shard int, woken bool) (engine.Summary, error) {
	now := h.Now()
	until := now.Add(h.Run)
	var deadline time.Time
	if dl, ok := ctx.Deadline(); ok {
		deadline = dl.Add(-DeadlineMargin / 3)
		if dl.Add(-DeadlineMargin).Before(until) {
			until = dl.Add(-DeadlineMargin)
		}
	}
	owner := ""
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		owner = lc.AwsRequestID
	}
	if owner == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		owner = "local-" + hex.EncodeToString(b[:])
	}
	req := engine.RunRequest{
		Shard: shard, ShardCount: h.ShardCount, Owner: owner, Until: until, Deadline: deadline, LeaseWait: LeaseWait, Wake: woken,
	}
	if woken {
		req.LeaseWait = 0
	}
	sum, err := h.Runner.Run(ctx, req)
	if err != nil {
		return sum, fmt.Errorf("check shard %d: %w", shard, err)
	}
	h.Log.InfoContext(ctx, "checked", "shard", sum.Shard, "woken", woken, "leased", sum.Leased, "hosts", sum.Hosts, "requests", sum.Requests, "results", sum.Results, "errors", sum.Errors, "localErrors", sum.LocalErrors, "requestId", owner)
	// Store and publish calls that failed after their retries (the SDK's,
	// the store's and the publisher's own) fail the invocation, so Lambda's
	// Errors metric and the errors alarm see a DynamoDB or SQS outage; a
	// call that succeeded on a retry counts nothing. Requests this process
	// could not make (LocalErrors) are its budget's, reported in the line
	// above, not an outage.
	if n := sum.Errors - sum.LocalErrors; n > 0 {
		return sum, fmt.Errorf("check shard %d: %d store or publish calls failed after retries (see the error lines of this request)", shard, n)
	}
	return sum, nil
}
