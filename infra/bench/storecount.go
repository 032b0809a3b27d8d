package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// countingStore counts the domain calls on the store, to explain the
// billed units: how often a host was appended to, loaded, committed, and
// released (a check session ending).
type countingStore struct {
	hostqueue.Store
	appends, loads, commits, releases, dueQueries, moves atomic.Int64
}

// StoreCalls are a countingStore's counts.
type StoreCalls struct {
	Appends, Loads, Commits, Releases, DueQueries int64
	// Moves are hosts moved to their address's shard (hostqueue.Mover).
	Moves int64
}

func (c *countingStore) calls() StoreCalls {
	return StoreCalls{c.appends.Load(), c.loads.Load(), c.commits.Load(), c.releases.Load(), c.dueQueries.Load(), c.moves.Load()}
}

func (a StoreCalls) plus(b StoreCalls) StoreCalls {
	return StoreCalls{a.Appends + b.Appends, a.Loads + b.Loads, a.Commits + b.Commits, a.Releases + b.Releases, a.DueQueries + b.DueQueries, a.Moves + b.Moves}
}

// Move passes a move on (hostqueue.Mover), so the engine moves hosts
// through the counting store as it would through the store.
func (c *countingStore) Move(ctx context.Context, key string, from, to int) (*hostqueue.Host, error) {
	c.moves.Add(1)
	mv, ok := c.Store.(hostqueue.Mover)
	if !ok {
		return c.Store.Load(ctx, key, 0)
	}
	return mv.Move(ctx, key, from, to)
}

func (c *countingStore) Append(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
	c.appends.Add(1)
	return c.Store.Append(ctx, req)
}

func (c *countingStore) Load(ctx context.Context, key string, want int) (*hostqueue.Host, error) {
	c.loads.Add(1)
	return c.Store.Load(ctx, key, want)
}

func (c *countingStore) Commit(ctx context.Context, key string, cm hostqueue.Commit) (*hostqueue.Host, error) {
	c.commits.Add(1)
	if cm.Release {
		c.releases.Add(1)
	}
	return c.Store.Commit(ctx, key, cm)
}

func (c *countingStore) DueHosts(ctx context.Context, vshard int, now time.Time, limit int) ([]string, error) {
	c.dueQueries.Add(1)
	return c.Store.DueHosts(ctx, vshard, now, limit)
}

// AppendBatchUntil passes a batch on as the store takes it, so the
// benchmark bills the store's batch path (a DynamoDB batch's due lists):
// hostqueue.Ingester prefers it.
func (c *countingStore) AppendBatchUntil(ctx context.Context, reqs []hostqueue.AppendRequest, until time.Time) []hostqueue.AppendOutcome {
	c.appends.Add(int64(len(reqs)))
	if ub, ok := c.Store.(hostqueue.UntilBatchAppender); ok {
		return ub.AppendBatchUntil(ctx, reqs, until)
	}
	if ba, ok := c.Store.(hostqueue.BatchAppender); ok {
		return ba.AppendBatch(ctx, reqs)
	}
	out := make([]hostqueue.AppendOutcome, len(reqs))
	for i, r := range reqs {
		out[i].Result, out[i].Err = c.Store.Append(ctx, r)
	}
	return out
}

// AppendBatch implements hostqueue.BatchAppender.
func (c *countingStore) AppendBatch(ctx context.Context, reqs []hostqueue.AppendRequest) []hostqueue.AppendOutcome {
	return c.AppendBatchUntil(ctx, reqs, time.Time{})
}

// reset starts the counts again (a scenario billing only its later part).
func (c *countingStore) reset() {
	for _, n := range []*atomic.Int64{&c.appends, &c.loads, &c.commits, &c.releases, &c.dueQueries, &c.moves} {
		n.Store(0)
	}
}
