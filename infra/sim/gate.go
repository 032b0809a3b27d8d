package main

import (
	"math"
	"sort"
	"strconv"
	"time"
)

// One gate per server address on AWS (issue 40, point 2): the designs the
// simulation compares, on the engine model as it runs (check.go calls
// serverGate before each request), and the address each host resolves to.
//
// Every design paces one address at ServerDelay between request starts and
// ServerConnections in flight; what differs is where the gate lives:
//   - GateItem (a): one item per address in DynamoDB, shared by every
//     invocation: a conditional write takes the next start (next <= now,
//     in flight < ServerConnections) and a second one, at the response's
//     end, gives the connection back. A worker whose write fails learns the
//     next start from the failed condition and tries again then; every
//     waiter tries at that instant, one wins, the others' writes fail and
//     are billed (a failed condition costs what a write would).
//   - GateLease (b): a lease item per address, taken by a conditional
//     write when an invocation first fetches from the address, for
//     gateLeaseTerm and renewed by the holder's request that finds less
//     than half of it left; the holder paces the address in its own
//     memory. Another invocation's first meeting of a held address is a
//     failed conditional write; then it defers that address's hosts (the
//     host released, due when the lease ends) without writing again.
//   - GatePlace (c, the chosen one): ingest places a host in the virtual
//     shard of the address it resolves to (the real hash on the address),
//     so every host of an address is worked by the one invocation that
//     holds that shard's lease, which paces the address in memory: no
//     write in the steady state. A CDN-exempt host is placed by its name.
//     With GateHold, the dispatcher takes at most that many hosts of one
//     address at once; the others stay in the index, unwritten, and its
//     due query reads on past them, instead of their waiting at the gate
//     in worker slots (holdsAddress).
//
// Simplifications, one line each:
//   - A host has one address for a whole run (DNS changes are priced
//     apart, gateDNS), and no host has several.
//   - GateItem's waiters retry exactly at the learned next start (no
//     jitter), the herd's worst case; the failed writes are billed, not
//     throttled apart from the key's 1,000 units a second.
//   - GateLease's holder keeps its lease to its term even after its last
//     host of the address left (no release write: a release would cost a
//     write and not bring a deferred host back sooner than its due time).
//   - An in-memory gate forgets its last start when a shard's lease moves
//     to another invocation: under (c) a run starts no request in a shard
//     sooner than ServerDelay after taking its lease (without it the
//     measured gap at a hand-over fell to 0.93 of ServerDelay).

// GateDesign is where the gate per server address lives.
type GateDesign int

const (
	// GateNone is today: politeness per host name only.
	GateNone GateDesign = iota
	GateItem
	GateLease
	GatePlace
	nGates
)

var gateNames = [nGates]string{
	"today (per host only)",
	"(a) gate item per address",
	"(b) lease per invocation and address",
	"(c) placement by address (chosen)",
}

// gateLeaseTerm is GateLease's lease: long enough that a holder renews it
// at most every 7.5 s, short enough that a deferred host waits at most
// that long past the holder's last request.
const gateLeaseTerm = 15 * time.Second

// AddrModel says which hosts share a server address. The zero value puts
// every host alone on its address.
//
// Reasoning for the mix (an assumption, like every fraction of the web
// model): most sites a list names run on an address of their own or on a
// cloud address of their own; shared hosting puts many small sites behind
// one address, its servers' sizes heavy-tailed (most carry a few names, a
// few carry thousands); CDNs front unrelated sites on shared ranges, which
// ServerExempt paces per host only.
type AddrModel struct {
	// Shared is the share of hosts on shared-hosting servers, CDN the
	// share behind exempt CDN ranges; the rest are alone on their address.
	Shared, CDN float64
	// MaxNames is the largest shared server's names; sizes follow
	// P(size >= k) = 2/k from 2 to MaxNames (a Pareto tail of index 1).
	MaxNames int
	// OneAddr, when above 0, puts hosts of rank below it on one address
	// and the rest alone (the 40-names job).
	OneAddr int
	// DNSChangePerDay is the share of hosts whose address changes in a
	// day (gateDNS prices it; the run keeps addresses fixed).
	DNSChangePerDay float64
}

// SharedMix is the shared-hosting mix: 70% of hosts alone, 20% on shared
// servers of up to maxNames names, 10% behind CDN ranges.
func SharedMix(maxNames int) AddrModel {
	return AddrModel{Shared: 0.2, CDN: 0.1, MaxNames: maxNames, DNSChangePerDay: 0.01}
}

// addrExempt is the address of a host behind an exempt (CDN) range.
const addrExempt = -1

// addrs is the run's address plan: the shared servers' cumulative sizes,
// which shared hosts are drawn into in proportion to their size.
type addrs struct {
	cum   []float64 // cumulative names of servers 0..i
	total float64
}

// serverSizes are the names of each shared server for about n shared
// hosts: quantiles of P(size >= k) = 2/k capped at maxNames, largest first.
func serverSizes(n, maxNames int) []int {
	if n <= 0 || maxNames < 2 {
		return nil
	}
	// m servers of mean 2(1 + ln(maxNames/2)) names hold about n.
	m := max(1, int(float64(n)/(2*(1+math.Log(float64(maxNames)/2)))))
	out := make([]int, m)
	for i := range out {
		out[i] = min(maxNames, max(2, int(2/((float64(i)+0.5)/float64(m)))))
	}
	return out
}

func (s *Sim) initAddrs() {
	a := s.cfg.Addr
	if a.Shared <= 0 {
		return
	}
	sizes := serverSizes(int(a.Shared*float64(len(s.cdf))), a.MaxNames)
	acc := 0.0
	for _, n := range sizes {
		acc += float64(n)
		s.addr.cum = append(s.addr.cum, acc)
	}
	s.addr.total = acc
}

// addrOf is the address host rank r resolves to: a shared server's number
// (from 0), an address of its own (past the servers), or addrExempt.
func (s *Sim) addrOf(r int) int64 {
	a := s.cfg.Addr
	if a.OneAddr > 0 {
		if r < a.OneAddr {
			return 0
		}
		return int64(r) + 1
	}
	u := mix(s.cfg.Seed, r, 12)
	switch {
	case u < a.CDN:
		return addrExempt
	case u < a.CDN+a.Shared && len(s.addr.cum) > 0:
		x := mix(s.cfg.Seed, r, 13) * s.addr.total
		return int64(sort.SearchFloat64s(s.addr.cum, x))
	}
	return int64(len(s.addr.cum) + r)
}

// addrKey is an address as the placement hashes it.
func addrKey(a int64) string {
	return "10." + strconv.Itoa(int(a>>16&255)) + "." + strconv.Itoa(int(a>>8&255)) + "." + strconv.Itoa(int(a&255)) + "/" + strconv.FormatInt(a>>24, 10)
}

// placeOf is the virtual shard a host's item is written to: by its name
// (hostqueue.VirtualShard) today and under (a) and (b); by the address it
// resolves to under (c), unless the address is exempt.
func (s *Sim) placeOf(h *host, vshards int) int {
	if s.cfg.Gate == GatePlace && h.addr != addrExempt {
		return vshardOf(addrKey(h.addr), vshards)
	}
	return vshardOf(h.key, vshards)
}

// addrState is one address as the server and the designs see it.
type addrState struct {
	// The server's view: the last request start and those in flight.
	lastStart int64
	started   bool
	inflight  int
	requests  int64
	// GateItem: the item, as an in-memory gate, and its partition key.
	item *procGate
	bins keyBins
	// GateLease: the lease.
	owner *invocation
	until int64
}

// procGate is an in-memory gate: request starts at least ServerDelay
// apart, at most ServerConnections in flight, in the order they asked.
type procGate struct {
	next     int64
	inflight int
	queue    []func()
	timer    bool
	used     bool
}

func (s *Sim) addrState(a int64) *addrState {
	st := s.addrMap[a]
	if st == nil {
		st = &addrState{}
		s.addrMap[a] = st
	}
	return st
}

func (s *Sim) serverConns() int { return max(1, s.cfg.ServerConnections) }

// pump grants the queue's first waiter when the gate is open; onGrant
// runs for each grant before it (GateItem bills its writes there).
func (s *Sim) pump(g *procGate, onGrant func(waiting int)) {
	s.m.gateQueue = max(s.m.gateQueue, len(g.queue))
	for len(g.queue) > 0 && g.inflight < s.serverConns() {
		if s.now < g.next {
			if !g.timer {
				g.timer = true
				s.at(g.next, func() {
					g.timer = false
					s.pump(g, onGrant)
				})
			}
			return
		}
		fn := g.queue[0]
		g.queue = g.queue[1:]
		g.next = s.now + int64(s.cfg.ServerDelay)
		g.inflight++
		if onGrant != nil {
			onGrant(len(g.queue))
		}
		fn()
	}
}

// serverGate runs start once the design's gate lets w's request go to its
// host's address; start gets the function that gives the gate back when
// the request ends (or does not start). A design may instead end the
// request with cb(outStop) (GateLease's deferral).
func (s *Sim) serverGate(w *session, cb func(outcome, response), start func(done func())) {
	h := w.h
	if s.cfg.ServerDelay <= 0 || h.addr == addrExempt {
		start(func() {})
		return
	}
	st := s.addrState(h.addr)
	if s.cfg.Gate != GateNone {
		// A request that waited at the gate past its run's end or
		// deadline is not made (pace's checks, again after the wait).
		r, p, inner := w.r, s.cfg.P, start
		start = func(done func()) {
			if s.now >= r.until || s.now+int64(p.FetchTimeout)+int64(commitMargin) > r.deadline {
				done()
				cb(outStop, 0)
				return
			}
			inner(done)
		}
	}
	switch s.cfg.Gate {
	case GateNone:
		start(func() {})
	case GatePlace:
		g := w.r.inv.gate(h.addr)
		if !g.used {
			// The shard's previous holder may have started a request to
			// this address just before it let the lease go: a run starts
			// none in a shard sooner than ServerDelay after taking it.
			g.used = true
			g.next = max(g.next, w.r.leasedAt[w.v]+int64(s.cfg.ServerDelay))
		}
		g.queue = append(g.queue, func() { start(func() { g.inflight--; s.pump(g, nil) }) })
		s.pump(g, nil)
	case GateItem:
		if st.item == nil {
			st.item = &procGate{}
		}
		g := st.item
		key := "gate " + addrKey(h.addr)
		if s.now < g.next || g.inflight >= s.serverConns() {
			// Its first try finds the gate closed.
			s.ddb.write(catGate, &st.bins, key, 1, -1, 0, -1)
		}
		onGrant := func(waiting int) {
			// The herd: every waiter tries at the instant the gate opens.
			for range waiting {
				s.ddb.write(catGate, &st.bins, key, 1, -1, 0, -1)
			}
		}
		var take func()
		take = func() {
			wait, ok := s.ddb.write(catGate, &st.bins, key, 1, -1, 0, -1)
			if !ok {
				// Throttled past the SDK's retries: no request; the
				// worker asks again first in line.
				s.after(wait, func() {
					g.inflight--
					g.queue = append([]func(){take}, g.queue...)
					s.pump(g, onGrant)
				})
				return
			}
			s.after(wait, func() {
				began := s.now
				start(func() {
					// The second write gives the connection back and
					// moves the next start to ServerDelay after this
					// one's (its write may have waited).
					s.ddb.write(catGate, &st.bins, key, 1, -1, 0, -1)
					g.next = max(g.next, began+int64(s.cfg.ServerDelay))
					g.inflight--
					s.pump(g, onGrant)
				})
			})
		}
		g.queue = append(g.queue, take)
		s.pump(g, onGrant)
	case GateLease:
		inv := w.r.inv
		g := inv.gate(h.addr)
		key := "gate lease " + addrKey(h.addr)
		g.queue = append(g.queue, func() {
			done := func() { g.inflight--; s.pump(g, nil) }
			var wait int64
			switch {
			case st.owner != inv && st.until > s.now:
				if inv.learned[h.addr] < st.until {
					s.ddb.write(catGate, &st.bins, key, 1, -1, 0, -1)
					inv.learned[h.addr] = st.until
				}
				w.deferTo = max(w.deferTo, st.until)
				s.m.deferred++
				done()
				cb(outStop, 0)
				return
			case st.owner != inv || st.until-s.now < int64(gateLeaseTerm)/2:
				wait, _ = s.ddb.write(catGate, &st.bins, key, 1, -1, 0, -1)
				st.owner, st.until = inv, s.now+int64(gateLeaseTerm)
			}
			s.after(wait, func() {
				// The holder paces the starts themselves, after its write.
				g.next = max(g.next, s.now+int64(s.cfg.ServerDelay))
				start(done)
			})
		})
		s.pump(g, nil)
	}
}

// gate is the invocation's in-memory gate for address a.
func (inv *invocation) gate(a int64) *procGate {
	if inv.gates == nil {
		inv.gates = map[int64]*procGate{}
		inv.learned = map[int64]int64{}
	}
	g := inv.gates[a]
	if g == nil {
		g = &procGate{}
		inv.gates[a] = g
	}
	return g
}

// noteAddrStart records a request start to h's address, as the server
// sees it: the gap since the last start to the address from anywhere and
// the requests in flight.
func (s *Sim) noteAddrStart(h *host) {
	if s.cfg.ServerDelay <= 0 || h.addr == addrExempt {
		return
	}
	st := s.addrState(h.addr)
	if st.started {
		rel := float64(s.now-st.lastStart) / float64(s.cfg.ServerDelay)
		s.m.addrGaps++
		s.m.addrMinGapRel = min(s.m.addrMinGapRel, rel)
		if rel < 1 {
			s.m.addrClose++
		}
	}
	st.started, st.lastStart = true, s.now
	st.inflight++
	st.requests++
	s.m.addrMaxInflight = max(s.m.addrMaxInflight, st.inflight)
}

// noteAddrEnd records a response's end at h's address.
func (s *Sim) noteAddrEnd(h *host) {
	if s.cfg.ServerDelay <= 0 || h.addr == addrExempt {
		return
	}
	s.addrState(h.addr).inflight--
}

// dnsMove is the check that finds its host's address changed (its
// DNSChangePerDay, over the time since the host was last resolved). Under
// (c) a host whose new address is in another virtual shard is moved: the
// host item rewritten with the new shard, the host added to that shard's
// due index, and the session ended without a request; the new shard's
// run works it. The other designs store no address: the gate met is the
// new address's, at no cost. A changed host moves to an address of its
// own. It reports whether the session ended.
func (s *Sim) dnsMove(w *session) bool {
	h := w.h
	rate := s.cfg.Addr.DNSChangePerDay
	if rate <= 0 || h.addr == addrExempt {
		return false
	}
	p := 1 - math.Exp(-rate*float64(s.now-h.resolvedAt)/float64(24*time.Hour))
	if s.rng.Float64() >= p {
		return false
	}
	s.m.dnsChanges++
	h.resolvedAt = s.now
	h.addr = int64(len(s.addr.cum)+len(s.cdf)) + s.m.dnsChanges
	v := s.placeOf(h, w.r.gen.vshards)
	if s.cfg.Gate != GatePlace || v == int(h.vs) || s.cfg.Migrate != nil {
		return false
	}
	w0, r0 := s.ddb.wByKey, s.ddb.rByKey
	h.vs = int32(v)
	g, gsiUnits, wait := s.indexWrite(h, idxMove, false, h.due, w.r.inv.pos)
	size := h.itemSize(s.cfg.Web)
	ww, _ := s.ddb.write(catGate, &h.bins, h.key, writeUnits(size, size), g, gsiUnits, -1)
	s.m.moves++
	s.m.moveW += s.ddb.wByKey - w0
	s.m.moveR += s.ddb.rByKey - r0
	s.after(wait+ww, w.end)
	return true
}

// checkPlaced asserts, under (c), that a request goes out from the
// virtual shard of its host's address.
func (s *Sim) checkPlaced(w *session) {
	h := w.h
	if s.cfg.Gate == GatePlace && s.cfg.Migrate == nil && int(h.vs) != s.placeOf(h, w.r.gen.vshards) {
		s.fail("host %s fetched in virtual shard %d, its address's is %d", h.key, h.vs, s.placeOf(h, w.r.gen.vshards))
	}
}

// holdsAddress is the dispatcher's bound under (c) with GateHold: inv
// already works GateHold hosts of h's address.
func (s *Sim) holdsAddress(inv *invocation, h *host) bool {
	return s.cfg.Gate == GatePlace && s.cfg.GateHold > 0 && h.addr != addrExempt && inv.worked[h.addr] >= s.cfg.GateHold
}

// addrWorked counts inv's workers on h's address (GateHold's bound).
func (s *Sim) addrWorked(inv *invocation, h *host, d int) {
	if s.cfg.GateHold <= 0 || h.addr == addrExempt {
		return
	}
	if inv.worked == nil {
		inv.worked = map[int64]int{}
	}
	inv.worked[h.addr] += d
	if inv.worked[h.addr] == 0 {
		delete(inv.worked, h.addr)
	}
}

// alone reports whether h is alone on its (not exempt) address.
func (s *Sim) alone(h *host) bool {
	if h.addr == addrExempt {
		return false
	}
	if a := s.cfg.Addr; a.OneAddr > 0 {
		return h.addr != 0
	}
	return h.addr >= int64(len(s.addr.cum))
}
