// Package handler translates the check function's scheduled event
// ({"shard": N}) into one shard run and returns its summary.
package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/urldownloader/urldownloader/shared/check"
)

// Runner is the domain service the handler calls.
type Runner interface {
	Run(ctx context.Context, req check.RunRequest) (check.Summary, error)
}

var _ Runner = (*check.Engine)(nil)

// Event is the schedule's input for one shard.
type Event struct {
	Shard *int `json:"shard"`
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
}

// DeadlineMargin is kept between the run's end and the Lambda deadline for
// in-flight requests to finish and their results to be committed.
const DeadlineMargin = 15 * time.Second

// leaseWait covers a predecessor that is still finishing its in-flight
// requests when the next minute's invocation starts.
const leaseWait = 20 * time.Second

// Handle runs the shard named by the event.
func (h *Handler) Handle(ctx context.Context, ev Event) (check.Summary, error) {
	if ev.Shard == nil {
		return check.Summary{}, fmt.Errorf("check: event has no \"shard\": want {\"shard\": N} with N from 0 to %d", h.ShardCount-1)
	}
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
	sum, err := h.Runner.Run(ctx, check.RunRequest{
		Shard: *ev.Shard, ShardCount: h.ShardCount, Owner: owner, Until: until, Deadline: deadline, LeaseWait: leaseWait,
	})
	if err != nil {
		return sum, fmt.Errorf("check shard %d: %w", *ev.Shard, err)
	}
	h.Log.InfoContext(ctx, "checked", "shard", sum.Shard, "leased", sum.Leased, "hosts", sum.Hosts, "requests", sum.Requests, "results", sum.Results, "errors", sum.Errors, "requestId", owner)
	return sum, nil
}
