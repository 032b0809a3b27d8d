package wiring

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// Parts are what both functions are made of, whatever the store: New fills
// them from AWS clients, local mode from its embedded store. The engine,
// the ingester and the two handlers are built from Parts here and only
// here, so a field one deployment needs (the ingest handler's idempotency
// store, the parameters' readiness) cannot be forgotten by another.
type Parts struct {
	Store hostqueue.Store
	// Idempotency remembers POST /urls requests by Idempotency-Key; nil
	// leaves the header ignored (a store that cannot keep them).
	Idempotency hostqueue.IdempotencyStore
	// Publisher receives results, ingest's (denied, dropped) and the
	// engine's.
	Publisher hostqueue.Publisher
	Params    func(context.Context) params.Params
	// ParamsReady, when set, holds both functions until the parameters
	// were read from where the operator sets them (see
	// ingesthandler.Handler.ParamsReady and engine.Engine.ParamsReady).
	ParamsReady func(context.Context) error
	// Fetcher returns the fetcher for the parameters in force.
	Fetcher func(params.Params) engine.Fetcher
	// Guard judges IP-literal hosts at ingest by the fetcher's policy.
	Guard hostqueue.AddressGuard
	// Waker wakes check shards when ingest gives their hosts work; nil:
	// the schedule alone runs them.
	Waker ingesthandler.Waker
	// ShardCount is how many check shards there are.
	ShardCount int
	Clock      engine.Clock
	Log        *slog.Logger
	// Metrics is the process's recorder (nil records nothing).
	Metrics *metrics.Recorder
	// Budget bounds the engine's host workers in the process.
	Budget engine.Budget
	// Bodies keeps bodies too large for a message; nil cuts them.
	Bodies body.Store
	// InlineLimit caps InlineBodyBytes (see engine.Engine.InlineLimit).
	InlineLimit int64
	// Resolver, when set, places hosts in the virtual shard of their
	// server's address (ingesthandler.Handler.Resolver): on AWS, where
	// one server's names would otherwise be worked by several check
	// invocations at once. Nil places every host by name.
	Resolver ingesthandler.Resolver
	// NoRefresh, when set, says why the store keeps no refreshing URLs
	// (hostqueue.Ingester.NoRefresh): ingest refuses them with it.
	NoRefresh string
	// Gate is the process's gate per server address (engine.NewGate),
	// which the fetcher meets too (engine.FetchGate); nil paces per host
	// only.
	Gate *server.Gate
}

// Engine builds a check engine on the parts.
func (p Parts) Engine() *engine.Engine {
	e := &engine.Engine{
		Store: p.Store, Publisher: p.Publisher, Fetcher: p.Fetcher,
		Params: p.Params, ParamsReady: p.ParamsReady, Clock: p.Clock, Log: p.Log,
		Budget: p.Budget, Bodies: p.Bodies, InlineLimit: p.InlineLimit, Metrics: p.Metrics,
		Gate: p.Gate,
	}
	if p.Resolver != nil {
		// Hosts ingest placed by address stay with their address.
		e.Placement = &engine.Placement{Resolver: p.Resolver}
	}
	return e
}

// Ingester builds the ingest domain service on the parts.
func (p Parts) Ingester() *hostqueue.Ingester {
	return &hostqueue.Ingester{Store: p.Store, Publisher: p.Publisher, Now: p.Clock.Now, Guard: p.Guard, NoRefresh: p.NoRefresh}
}

// IngestHandler builds the ingest function's handler around ing (the
// ingester from Ingester, or one that wraps it).
func (p Parts) IngestHandler(ing ingesthandler.Ingester) *ingesthandler.Handler {
	h := &ingesthandler.Handler{Ingester: ing, Params: p.Params, ParamsReady: p.ParamsReady, Waker: p.Waker, Log: p.Log, Metrics: p.Metrics, Resolver: p.Resolver}
	if p.Idempotency != nil {
		h.Idempotency = &ingesthandler.Idempotency{Store: p.Idempotency, Now: p.Clock.Now}
	}
	return h
}

// CheckHandler builds the check function's handler around runner (an
// engine from Engine), for runs that start requests for run.
func (p Parts) CheckHandler(runner checkhandler.Runner, run time.Duration) *checkhandler.Handler {
	return &checkhandler.Handler{Runner: runner, ShardCount: p.ShardCount, Run: run, Now: p.Clock.Now, Log: p.Log, Metrics: p.Metrics}
}

// FetchOptions are the fetcher's options for the parameters in force and
// the deployment's address policy.
func FetchOptions(p params.Params, addresses fetch.AddressPolicy, resolve map[string][]netip.Addr, maxConns int) fetch.Options {
	return fetch.Options{
		UserAgent:    p.UserAgent,
		Timeout:      p.FetchTimeout,
		MaxBodyBytes: p.MaxBodyBytes,
		Addresses:    addresses,
		AllowedPorts: p.Ports(),
		Resolve:      resolve,
		MaxConns:     maxConns,
	}
}

// Guard judges an IP-literal host at ingest by the fetcher's own address
// policy, so ingest and dial refuse the same addresses and ports.
func Guard(addresses fetch.AddressPolicy) hostqueue.AddressGuard {
	return addresses.Check
}
