// Package server keeps politeness per server address: many host names on
// one IP address (a shared-hosting server) share one gate, so that server
// sees requests spaced by ServerDelay and at most ServerConnections of
// them at once, whatever host names they carry (Nutch's and
// StormCrawler's byIP queues, Heritrix's one connection per server).
//
// The gate is keyed by the remote address of the connection a request goes
// over, a new or a reused one, so redirects and robots.txt requests count
// too, and a name whose DNS answer changes mid-job, or that has several
// addresses, is paced at the address it actually reaches. It sits beside
// the host's own politeness (package politeness), which it never relaxes.
//
// The gate is in memory: on AWS the hosts of one address are placed in one
// shard, worked by one check invocation at a time, and each gate starts
// closed for ServerDelay from the run's start (Open), so consecutive runs
// keep the spacing without storing anything.
package server

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// Clock is the gate's time source (the engine's clock).
type Clock interface {
	Now() time.Time
	// Sleep waits d or until ctx is done.
	Sleep(ctx context.Context, d time.Duration) error
}

// Slow-down of an address whose answers say it struggles (5xx, 429, slow
// answers) from several of its hosts, as Googlebot slows a whole site:
// each such answer doubles the address's delay, up to maxFactor times
// ServerDelay (and MaxServerDelay), and each good answer takes a quarter
// of the extra off again. One host alone answering badly slows that host
// only (its own back-off), not its neighbours.
const (
	// SlowAnswer is how long an answer takes to count as a sign of a
	// struggling server: half the default FetchTimeout.
	SlowAnswer = 5 * time.Second
	// struggleHosts is how many of an address's hosts must have answered
	// badly within struggleWindow before the address slows down.
	struggleHosts = 2
	// struggleWindow is how long a bad answer counts.
	struggleWindow = time.Minute
	// maxFactor bounds the slow-down.
	maxFactor = 8
	// heldFor is how long a host held back at dispatch (Hold) counts as
	// waiting on its address, for the progress line.
	heldFor = 2 * time.Second
	// forgetAfter drops an address idle this long: it starts fresh.
	forgetAfter = 10 * time.Minute
)

// Gate is the gate of every server address one process requests. It is
// safe for concurrent use; the zero value is not usable: use New.
type Gate struct {
	clock Clock
	// OnWait, when set, is told of every request that waited at the gate,
	// with how long (metrics).
	OnWait func(d time.Duration)

	mu     sync.Mutex
	opened time.Time
	addrs  map[netip.Addr]*addrState
	calls  int
}

type addrState struct {
	// next is the earliest start of the address's next request.
	next time.Time
	// inflight counts passes given and not yet left (claims included).
	inflight int
	// changed is closed, and replaced, whenever a pass leaves.
	changed chan struct{}
	// touched is when a request last started or ended.
	touched time.Time
	// queue are the requests waiting, in their order of arrival;
	// waiting counts them by host; held the hosts held back at dispatch,
	// with when.
	queue   []*waiter
	waiting map[string]int
	held    map[string]time.Time
	// delay is the delay in force at the latest request (for the
	// progress line), before the slow-down.
	delay time.Duration
	// factor is the slow-down (at least 1); bad the hosts that answered
	// badly lately, with when.
	factor float64
	bad    map[string]time.Time
}

// New returns a gate on clock, open from now (see Open).
func New(clock Clock) *Gate {
	return &Gate{clock: clock, addrs: map[netip.Addr]*addrState{}}
}

// Open closes every address not requested since t until t plus its delay:
// a run that starts at t cannot know what the run before it (another
// process, the previous Lambda invocation of its shard) sent to an address
// just before, so its first request there waits a delay. Local mode opens
// once, at the process's start; a check invocation at each run's start.
func (g *Gate) Open(t time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.After(g.opened) {
		g.opened = t
	}
}

// state returns a's state, made fresh (closed until the opening plus the
// delay) when a is new or was last used before the latest Open.
func (g *Gate) state(a netip.Addr, s params.Server) *addrState {
	st := g.addrs[a]
	if st == nil {
		st = &addrState{changed: make(chan struct{}), factor: 1, waiting: map[string]int{}, held: map[string]time.Time{}, bad: map[string]time.Time{}}
		g.addrs[a] = st
	}
	if st.inflight == 0 && st.touched.Before(g.opened) {
		if t := g.opened.Add(s.Delay); t.After(st.next) {
			st.next = t
		}
		st.touched = g.opened
	}
	st.delay = s.Delay
	return st
}

// effective is s's delay slowed by the address's struggle factor.
func (st *addrState) effective(s params.Server) time.Duration {
	if st.factor <= 1 {
		return s.Delay
	}
	d := time.Duration(float64(s.Delay) * st.factor)
	return max(s.Delay, min(d, params.MaxServerDelay))
}

func connections(s params.Server) int { return max(1, s.Connections) }

// Pass is one request's place at an address's gate, from its start until
// Leave (or Cancel for a claim that never carried a request). A nil Pass
// (no gate) does nothing.
type Pass struct {
	g       *Gate
	addr    netip.Addr
	host    string
	s       params.Server
	started time.Time
	entered bool
	done    bool
}

// Addr is the address the pass is for.
func (p *Pass) Addr() netip.Addr {
	if p == nil {
		return netip.Addr{}
	}
	return p.addr
}

// Acquire waits until a request to host may start over a (no sooner than
// the address's next start, while fewer than its connections are in
// flight) and takes its place. It returns a nil Pass at once when s has no
// gate (params.Server.Off), and ctx's error when ctx ends first: every wait
// is bounded by ctx.
func (g *Gate) Acquire(ctx context.Context, host string, a netip.Addr, s params.Server) (*Pass, error) {
	if g == nil || s.Off() || !a.IsValid() {
		return nil, nil
	}
	a = a.Unmap()
	var began time.Time
	var waited bool
	defer func() {
		if waited && g.OnWait != nil {
			g.OnWait(g.clock.Now().Sub(began))
		}
	}()
	me := &waiter{host: host}
	queued := false
	for {
		g.mu.Lock()
		now := g.clock.Now()
		g.prune(now)
		st := g.state(a, s)
		head := len(st.queue) == 0 || st.queue[0] == me
		if head && !now.Before(st.next) && st.inflight < connections(s) {
			if queued {
				st.dequeue(me)
			}
			st.inflight++
			st.next = now.Add(st.effective(s))
			st.touched = now
			g.mu.Unlock()
			return &Pass{g: g, addr: a, host: host, s: s, started: now}, nil
		}
		if !queued {
			// First come, first served: a host that arrived first is not
			// overtaken by one whose wake-up happened to come sooner.
			queued, waited, began = true, true, now
			st.queue = append(st.queue, me)
			st.waiting[host]++
			head = len(st.queue) == 1
		}
		ch, wait := st.changed, st.next.Sub(now)
		sleep := head && st.inflight < connections(s) && wait > 0
		g.mu.Unlock()
		var err error
		if sleep {
			err = g.clock.Sleep(ctx, wait)
		} else {
			select {
			case <-ch:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if err != nil {
			g.mu.Lock()
			st.dequeue(me)
			g.mu.Unlock()
			return nil, err
		}
	}
}

// waiter is one request waiting at an address's gate.
type waiter struct{ host string }

// dequeue takes w out of the queue (it got its pass, or gave up) and
// tells the others: the next one may be the head now.
func (st *addrState) dequeue(w *waiter) {
	if i := slices.Index(st.queue, w); i >= 0 {
		st.queue = slices.Delete(st.queue, i, i+1)
		if st.waiting[w.host]--; st.waiting[w.host] <= 0 {
			delete(st.waiting, w.host)
		}
		st.signal()
	}
}

// signal wakes every waiter of the address to look again.
func (st *addrState) signal() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// Enter is Acquire where the connection is known: a claim in ctx (Claim)
// for the same address is used as it is, its start stamped now; one for
// another address (DNS moved the host, or it has several addresses) is
// given back and a is waited for.
func (g *Gate) Enter(ctx context.Context, host string, a netip.Addr, s params.Server) (*Pass, error) {
	if c, _ := ctx.Value(claimKey{}).(*Pass); c != nil && c.g == g {
		g.mu.Lock()
		if !c.entered && !c.done {
			if c.addr == a.Unmap() {
				c.entered = true
				now := g.clock.Now()
				st := g.state(c.addr, c.s)
				c.started = now
				if t := now.Add(st.effective(c.s)); t.After(st.next) {
					st.next = t
				}
				st.touched = now
				g.mu.Unlock()
				return c, nil
			}
			g.mu.Unlock()
			c.Cancel()
		} else {
			g.mu.Unlock()
		}
	}
	return g.Acquire(ctx, host, a, s)
}

type claimKey struct{}

type paramsKey struct{}

// WithClaim returns ctx carrying a claim: the pass the engine took for the
// address it expects a request to go over, which Enter uses when the
// connection turns out to be there.
func WithClaim(ctx context.Context, p *Pass) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, claimKey{}, p)
}

// WithParams returns ctx carrying the parameters a request is made under,
// which EnterConn reads the gate's settings from (params.ServerFor).
func WithParams(ctx context.Context, p params.Params) context.Context {
	return context.WithValue(ctx, paramsKey{}, &p)
}

// EnterConn is Enter with the settings of the parameters in ctx
// (WithParams), or the defaults: what the fetcher calls once it knows the
// connection's remote address.
func (g *Gate) EnterConn(ctx context.Context, host string, a netip.Addr) (*Pass, error) {
	p, _ := ctx.Value(paramsKey{}).(*params.Params)
	if p == nil {
		d := params.Defaults()
		p = &d
	}
	return g.Enter(ctx, host, a, p.ServerFor(host, a))
}

// struggling tells an answer that says the server struggles: a 5xx, a
// 429, or a slow answer.
func struggling(status int, took time.Duration) bool {
	return status >= 500 || status == 429 || took >= SlowAnswer
}

// Leave ends the request, whose answer had status (0 without an answer):
// the address's next request starts no sooner than the delay from now (as
// FetchDelay counts from a response's end), and one more may be in
// flight. Leaving twice is leaving once.
func (p *Pass) Leave(status int) {
	if p == nil {
		return
	}
	g := p.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	now := g.clock.Now()
	st := g.addrs[p.addr]
	if st == nil {
		return
	}
	st.note(p.host, status, now.Sub(p.started), now)
	if t := now.Add(st.effective(p.s)); t.After(st.next) {
		st.next = t
	}
	st.touched = now
	st.release()
}

// Cancel gives back a claim that carried no request (the fetch failed
// before a connection, or went to another address): the address's next
// start is left as it was. It does nothing to a pass a request entered
// (Leave ends that one) or that was already given back.
func (p *Pass) Cancel() {
	if p == nil {
		return
	}
	g := p.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.done || p.entered {
		return
	}
	p.done = true
	if st := g.addrs[p.addr]; st != nil {
		st.release()
	}
}

func (st *addrState) release() {
	st.inflight = max(0, st.inflight-1)
	st.signal()
}

// note counts an answer in the address's slow-down.
func (st *addrState) note(host string, status int, took time.Duration, now time.Time) {
	for h, t := range st.bad {
		if now.Sub(t) > struggleWindow {
			delete(st.bad, h)
		}
	}
	if !struggling(status, took) {
		if st.factor = 1 + (st.factor-1)*0.75; st.factor < 1.05 {
			st.factor = 1
		}
		return
	}
	st.bad[host] = now
	if len(st.bad) >= struggleHosts {
		st.factor = min(maxFactor, st.factor*2)
	}
}

// prune forgets addresses idle for forgetAfter, now and then.
func (g *Gate) prune(now time.Time) {
	if g.calls++; g.calls%1024 != 0 {
		return
	}
	for a, st := range g.addrs {
		if st.inflight == 0 && len(st.queue) == 0 && now.Sub(st.touched) > forgetAfter && !st.next.After(now) {
			delete(g.addrs, a)
		}
	}
}

// Backlog is how long a request to a would wait at the gate now: until
// the address's next start, plus a delay for each request already waiting
// there. The engine holds back a host whose backlog is longer than it
// would wait for itself anyway, so its worker slots go to hosts that can
// be requested. Zero without a gate.
func (g *Gate) Backlog(a netip.Addr, s params.Server) time.Duration {
	if g == nil || s.Off() || !a.IsValid() {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.addrs[a.Unmap()]
	if st == nil {
		return 0
	}
	now := g.clock.Now()
	d := max(0, st.next.Sub(now)) + time.Duration(len(st.queue))*st.effective(s)
	if st.inflight >= connections(s) {
		d = max(d, st.effective(s))
	}
	return d
}

// Hold records that host was held back at dispatch for its address's
// backlog: it counts as waiting on a for a moment (Waiting).
func (g *Gate) Hold(host string, a netip.Addr) {
	if g == nil || !a.IsValid() {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.addrs[a.Unmap()]; st != nil {
		st.held[host] = g.clock.Now()
	}
}

// Waiting is an address hosts wait on now.
type Waiting struct {
	Addr netip.Addr
	// Hosts is how many host names wait on it: at its gate, or held back
	// at dispatch.
	Hosts int
	// Delay is its delay in force, slowed down if it struggles.
	Delay time.Duration
}

// Waiting lists the addresses that hosts wait on now, the most waited on
// first.
func (g *Gate) Waiting() []Waiting {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	var out []Waiting
	for a, st := range g.addrs {
		hosts := map[string]bool{}
		for h := range st.waiting {
			hosts[h] = true
		}
		for h, t := range st.held {
			if now.Sub(t) > heldFor {
				delete(st.held, h)
				continue
			}
			hosts[h] = true
		}
		if len(hosts) > 0 {
			out = append(out, Waiting{Addr: a, Hosts: len(hosts), Delay: st.effective(params.Server{Delay: st.delay})})
		}
	}
	slices.SortFunc(out, func(x, y Waiting) int {
		if x.Hosts != y.Hosts {
			return y.Hosts - x.Hosts
		}
		return x.Addr.Compare(y.Addr)
	})
	return out
}
