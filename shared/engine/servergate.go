package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// ServerAddresser is a Fetcher that tells which address a request to a
// host would go to (fetch.Fetcher.ServerAddr): the first of its DNS
// answers, from the cache only when cachedOnly. The engine claims that
// address's gate before the request (Engine.Gate), and looks at its
// backlog before giving the host a worker.
type ServerAddresser interface {
	ServerAddr(ctx context.Context, host string, cachedOnly bool) (netip.Addr, bool)
}

// FetchGate adapts g to the fetcher's Options.Gate: the fetcher meets the
// gate where the connection is known, using the engine's claim when the
// address is the one claimed.
func FetchGate(g *server.Gate) fetch.Gate {
	if g == nil {
		return nil
	}
	return fetchGate{g}
}

type fetchGate struct{ g *server.Gate }

func (f fetchGate) EnterConn(ctx context.Context, host string, a netip.Addr) (fetch.GatePass, error) {
	p, err := f.g.EnterConn(ctx, host, a)
	if p == nil {
		return noPass{}, err
	}
	return p, err
}

type noPass struct{}

func (noPass) Leave(int) {}

// NewGate returns a gate for the engine's runs that counts its waits in
// m (metrics.ServerWait).
func NewGate(clock Clock, m *metrics.Recorder) *server.Gate {
	g := server.New(clock)
	if m != nil {
		g.OnWait = func(d time.Duration) { m.AddDuration(metrics.ServerWait, d) }
	}
	return g
}

// errNoClaim marks a request never made because its wait at the server's
// gate ended (the run's end, or the worker gave its slot up): it is not
// counted as a request.
var errNoClaim = errors.New("no request: the server's gate did not let it through")

// countRequest counts a request in the run's summary unless it was never
// made for want of the gate's claim.
func (w *worker) countRequest(err error) {
	if !errors.Is(err, errNoClaim) {
		w.reqs.Add(1)
	}
}

// claimServer waits at the gate of the address the worker's request to
// target is expected to go to, and returns ctx carrying the claim and the
// parameters, which the fetcher uses where the connection is known. The
// wait happens before the request's own timeout starts, so a host that
// waits on a busy address does not time out; it is bounded by the run's
// end. The func returned gives the claim back if no request used it.
func (w *worker) claimServer(ctx context.Context, target string) (context.Context, func(), error) {
	g := w.engine.Gate
	if g == nil {
		return ctx, func() {}, nil
	}
	ctx = server.WithParams(ctx, w.p)
	host := hostname(target)
	a, ok := serverAddr(ctx, w.fetcher, host, false)
	if !ok {
		// Unresolved (the dial will say why): the fetcher's gate alone.
		return ctx, func() {}, nil
	}
	s := w.p.ServerFor(host, a)
	if w.wanted() && g.Backlog(a, s) > max(w.fetchDelay(), s.Delay) {
		// Due hosts wait for a worker slot, and this one would only wait
		// on a busy address: it gives its slot up (dispatch holds it
		// back until the address's backlog is short again).
		return ctx, func() {}, fmt.Errorf("%w: yield the worker, server %s is busy (ServerDelay)", errNoClaim, a)
	}
	cctx, cancel := context.WithDeadline(ctx, w.req.Until)
	defer cancel()
	var claim *server.Pass
	var err error
	w.unlocked(func() { claim, err = g.Acquire(cctx, host, a, s) })
	if err != nil {
		return ctx, func() {}, fmt.Errorf("%w: wait for server %s (ServerDelay): %w", errNoClaim, a, err)
	}
	// The host's own pace planned the request earlier: the gate's wait is
	// not the process's lateness (Admission).
	if now := w.engine.Clock.Now(); now.After(w.planned) {
		w.planned = now
	}
	return server.WithClaim(ctx, claim), claim.Cancel, nil
}

// serverAddr asks f for host's address, if f can tell.
func serverAddr(ctx context.Context, f Fetcher, host string, cachedOnly bool) (netip.Addr, bool) {
	sa, ok := f.(ServerAddresser)
	if !ok || host == "" {
		return netip.Addr{}, false
	}
	return sa.ServerAddr(ctx, host, cachedOnly)
}

// heldForServer tells whether the due host key should wait for a worker:
// its address (as the DNS cache knows it) has a backlog at its gate
// longer than the host's own delay, so a worker given to it would only
// wait there. The gate counts it as waiting (the progress line).
func (e *Engine) heldForServer(p params.Params, key string) bool {
	if e.Gate == nil {
		return false
	}
	host := hostname("http://" + key)
	a, ok := serverAddr(context.Background(), e.Fetcher(p), host, true)
	if !ok {
		return false
	}
	s := p.ServerFor(host, a)
	if s.Off() {
		return false
	}
	d := p.FetchDelay
	if r, ok := p.HostRules.Match(key); ok && r.HasDelay {
		d = r.Delay
	}
	if e.Gate.Backlog(a, s) <= max(d, s.Delay) {
		return false
	}
	e.Gate.Hold(host, a)
	return true
}
