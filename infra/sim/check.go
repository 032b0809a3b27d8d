package main

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// The check function: scheduled and woken invocations, the run loop of
// engine.Engine.Run (leases, due-host queries, dispatch, idle exit) and the
// host worker of worker.work (rounds of ten, pacing, robots.txt, back-off,
// give-up, linger, commits). The model follows the code step by step; the
// comments name the code each step stands for, and drift_test.go holds
// its request times to the engine's on one workload.

type invocation struct {
	start   int64
	runs    int
	all     []*run
	workers int
	// nextStart is the soonest the invocation may start its next request
	// (Config.InvocationRPS).
	nextStart int64
	pub       *publisher
	wake      bool
	msgs      int
	pos       positions // its store's due-bucket positions (dueindex.go)
	ended     bool
	// paramsFailed: its parameter load failed, it does nothing.
	paramsFailed bool
	// gates are its in-memory gates by server address, learned the lease
	// ends it learned, worked its hosts in workers by address (gate.go).
	gates   map[int64]*procGate
	learned map[int64]int64
	worked  map[int64]int
}

type run struct {
	id       int
	inv      *invocation
	shard    int
	gen      generation
	owned    []int
	wake     bool
	start    int64
	until    int64
	deadline int64

	held       map[int]int64 // lease expiry by virtual shard
	leasedAt   map[int]int64 // when the run last took each shard's lease
	leasedEver bool
	contended  map[int]bool
	renewed    bool
	lastRenew  int64
	rechecked  bool

	active     int
	activeByVS map[int]int
	starved    bool
	lingering  map[*session]bool
	remember   map[*host]int64

	stopping, finished, unrecorded bool
}

// startSchedules starts each shard's EventBridge rule, rate(1 minute), at
// a phase of its own.
func (s *Sim) startSchedules() {
	n := s.cfg.ShardCount
	if m := s.cfg.Migrate; m != nil {
		n = max(n, m.ShardCount)
	}
	s.runs.phase = make([]int64, n)
	for sh := 0; sh < n; sh++ {
		s.runs.phase[sh] = int64(s.rng.Float64() * float64(60*sec))
		sh := sh
		var fire func()
		fire = func() {
			if sh < s.rules(s.now) {
				s.scheduled(sh)
			}
			if !s.settled() {
				s.after(60*sec, fire)
			}
		}
		s.at(s.runs.phase[sh], fire)
	}
}

// rules is how many schedule rules exist at t (a deploy replaces them at
// the migration).
func (s *Sim) rules(t int64) int {
	if m := s.cfg.Migrate; m != nil && t >= int64(m.At) {
		return m.ShardCount
	}
	return s.cfg.ShardCount
}

// genAt is the configuration an invocation started at t runs: during a
// migration's overlap, old and new instances both take invocations.
func (s *Sim) genAt(t int64) generation {
	m := s.cfg.Migrate
	if m != nil && t >= int64(m.At) && t < int64(m.At+m.Overlap) && s.rng.Float64() < 0.5 {
		return s.gens[0]
	}
	return s.gen(t)
}

func (s *Sim) newInvocation(wake bool) (*invocation, int64) {
	inv := &invocation{start: s.now, wake: wake, pos: positions{}}
	inv.pub = &publisher{s: s}
	over := s.lambdaStart(lambdaCheck, nil)
	// Parameters at its start (a warm instance's are a minute old),
	// then every paramTTL (ssm.go). A new instance whose first load never
	// succeeds fails the invocation: the schedule's next minute runs.
	var w int64
	if s.runs.lastCold {
		var ok bool
		w, ok = s.firstLoad(s.cfg.CheckTimeout / 2)
		inv.paramsFailed = !ok
	} else {
		// A warm instance's failed reload keeps its values.
		w, _ = s.loadParams(0)
	}
	s.reloadParams(inv)
	return inv, over + w
}

// scheduled is the schedule's {"shard": N}.
func (s *Sim) scheduled(shard int) { s.scheduledAfter(shard, sec) }

// scheduledAfter is scheduled, retried backoff later when throttled: Lambda
// keeps a throttled asynchronous event and tries again, backing off from a
// second up to five minutes
// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).
func (s *Sim) scheduledAfter(shard int, backoff int64) {
	if !s.lambdaRoom() {
		s.ddb.throttled[lambdaThrottle]++
		next := min(2*backoff, 5*60*sec)
		s.after(backoff+int64(s.rng.Float64()*float64(backoff)/2), func() { s.scheduledAfter(shard, next) })
		return
	}
	s.runs.scheduled++
	inv, over := s.newInvocation(false)
	g := s.genAt(s.now)
	s.after(over, func() {
		if shard >= g.shards || inv.paramsFailed {
			// The handler refuses a shard past its ShardCount.
			s.endInvocation(inv)
			return
		}
		inv.runs++
		s.startRun(inv, shard, g, false)
	})
}

// wakeArrive puts a wake-up on the wake queue at t.
func (s *Sim) wakeArrive(t int64, shard int, g generation) {
	s.at(t, func() {
		s.runs.wakeQueue = append(s.runs.wakeQueue, wakeMsg{shard: shard, gen: g})
		s.pumpWake()
	})
}

// pumpWake is the wake queue's mapping: batches of WakeBatchSize (one
// shard an invocation in the template), no window, at most WakeMaxConc
// invocations at once; an invocation runs the shards its messages name
// side by side (handler.wake), sharing one process's workers.
func (s *Sim) pumpWake() {
	r := &s.runs
	for len(r.wakeQueue) > 0 && r.wakeInFlight < s.cfg.WakeMaxConc {
		if !s.lambdaRoom() {
			// The mapping's invocation throttled: the message waits
			// (tried again as an invocation ends; counted once a wait).
			if !r.wakeThrottled {
				s.ddb.throttled[lambdaThrottle]++
			}
			r.wakeThrottled = true
			return
		}
		r.wakeThrottled = false
		n := min(max(1, s.cfg.WakeBatchSize), len(r.wakeQueue))
		msgs := r.wakeQueue[:n]
		r.wakeQueue = append([]wakeMsg(nil), r.wakeQueue[n:]...)
		r.wakeInFlight++
		r.woken++
		s.m.sqsReq(s.now, "wake ReceiveMessage", 1)
		inv, over := s.newInvocation(true)
		inv.msgs = n
		g := s.genAt(s.now)
		lat := s.cfg.SQSLatency.sample(s.rng, s.cfg.FixedLatency)
		s.after(over+lat, func() {
			var shards []int
			for _, m := range msgs {
				if m.shard < g.shards && !containsInt(shards, m.shard) {
					shards = append(shards, m.shard)
				}
			}
			if len(shards) == 0 || inv.paramsFailed {
				s.endInvocation(inv)
				return
			}
			inv.runs = len(shards)
			for _, sh := range shards {
				s.startRun(inv, sh, g, true)
			}
		})
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func (s *Sim) endInvocation(inv *invocation) {
	inv.ended = true
	s.lambdaEnd(lambdaCheck, inv.start, s.now)
	if inv.wake {
		s.m.sqsReq(s.now, "wake DeleteMessageBatch", 1)
		s.runs.wakeInFlight--
	}
	s.pumpWake()
}

// startRun is handler.run and the start of Engine.Run.
func (s *Sim) startRun(inv *invocation, shard int, g generation, wake bool) {
	untilD, deadlineD := runTimes(s.cfg)
	s.runs.nextID++
	r := &run{
		id: s.runs.nextID, inv: inv, shard: shard, gen: g, wake: wake,
		owned: ownedShards(shard, g.shards, g.vshards),
		start: s.now, until: s.now + int64(untilD), deadline: inv.start + int64(deadlineD),
		held: map[int]int64{}, leasedAt: map[int]int64{}, contended: map[int]bool{}, activeByVS: map[int]int{},
		lingering: map[*session]bool{}, remember: map[*host]int64{},
	}
	inv.all = append(inv.all, r)
	s.tick(r)
}

// lingeringSorted lists the run's lingering workers in the order they
// started (map order would make runs differ from seed to seed).
func (r *run) lingeringSorted() []*session {
	out := make([]*session, 0, len(r.lingering))
	for w := range r.lingering {
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b *session) int { return cmp.Compare(a.id, b.id) })
	return out
}

func (r *run) heldCount(now int64) int {
	n := 0
	for _, u := range r.held {
		if u > now {
			n++
		}
	}
	return n
}

func (r *run) holding(v int, now int64) bool { return r.held[v] > now }

// tick is one turn of Engine.Run's loop.
func (s *Sim) tick(r *run) {
	if r.stopping {
		return
	}
	now := s.now
	if now >= r.until {
		s.stopRun(r)
		return
	}
	p := s.cfg.P
	ttl := int64(leaseTTL(p))
	lw := int64(leaseWait)
	if r.wake {
		lw = 0
	}
	var wait int64
	if !r.renewed || now-r.lastRenew >= ttl/4 || r.heldCount(now) < len(r.owned) && now-r.start < lw {
		// renew: the owned shards' leases side by side.
		for _, v := range r.owned {
			w, ok, errored := s.acquire(v, r, now+ttl)
			wait = max(wait, w)
			switch {
			case ok:
				if r.held[v] <= now {
					r.leasedAt[v] = now + w
				}
				r.held[v] = now + ttl
			case !errored:
				delete(r.held, v)
			}
		}
		if r.heldCount(now) == len(r.owned) || now-r.start >= lw {
			r.lastRenew, r.renewed = now, true
		}
	}
	if r.wake && !r.leasedEver && r.heldCount(now) < len(r.owned) {
		s.runs.contendRuns++
		s.releaseAll(r)
		s.stopRun(r)
		return
	}
	// Proposal (Config.GiveWay): a scheduled run that still lacks leases
	// after LeaseWait leaves the shard to their holder, as a woken one does.
	if s.cfg.GiveWay && !r.wake && !r.leasedEver && now-r.start >= lw && r.heldCount(now) < len(r.owned) {
		s.releaseAll(r)
		s.stopRun(r)
		return
	}
	var qwait int64
	starved := false
	for _, v := range r.owned {
		if r.holding(v, now) {
			r.leasedEver = true
			w, st := s.dispatch(r, v, now+wait)
			qwait = max(qwait, w)
			starved = starved || st
		}
	}
	r.starved = starved
	if starved {
		// A process-wide budget starves every run of the invocation.
		runs := []*run{r}
		if s.cfg.ProcessWorkers > 0 {
			runs = r.inv.all
		}
		for _, x := range runs {
			for _, w := range x.lingeringSorted() {
				w.stopLinger(now)
			}
		}
	}
	if (r.wake || r.rechecked) && r.heldCount(now) == 0 {
		s.stopRun(r)
		return
	}
	if (r.heldCount(now) == len(r.owned) || r.wake || r.rechecked) && r.active == 0 && !s.dueBefore(r, r.until) {
		if r.unrecorded {
			s.stopRun(r)
			return
		}
		s.releaseAll(r)
		if r.rechecked || !s.dueBefore(r, r.until) {
			s.runs.idleRuns++
			s.stopRun(r)
			return
		}
		r.rechecked, r.renewed = true, false
		s.after(wait+qwait, func() { s.tick(r) })
		return
	}
	tick := min(int64(tickMax), int64(p.CheckHostPeriod)/2)
	// Proposal (Config.StarvedTick): a run whose dispatch left due hosts
	// without a slot looks again sooner, so a slot freed by a finishing
	// worker waits less than a whole tick for its next host.
	if starved && s.cfg.StarvedTick > 0 {
		tick = min(tick, int64(s.cfg.StarvedTick))
	}
	if r.heldCount(now) < len(r.owned) && now-r.start < lw {
		tick = min(tick, 250*ms)
	}
	s.after(wait+qwait+min(tick, r.until-now), func() { s.tick(r) })
}

// dispatch is run.dispatch: query the shard's due hosts (MaxConcurrentHosts
// + 1 of them, the earliest first; hosts this run works are among them)
// and start a worker for each that is not active, while slots last. It
// returns the query's wait and whether a due host found no slot.
func (s *Sim) dispatch(r *run, v int, at int64) (int64, bool) {
	mch := s.cfg.P.MaxConcurrentHosts
	b := s.cfg.GSIBuckets
	visible := mch + 1 - r.activeByVS[v]
	returned := r.activeByVS[v]
	starved := false
	var skipped []*host
	for visible > 0 {
		best, bestDue := -1, int64(math.MaxInt64)
		for k := v * b; k < (v+1)*b; k++ {
			if d, ok := s.firstDue(k); ok && d <= s.now && d < bestDue {
				best, bestDue = k, d
			}
		}
		if best < 0 {
			break
		}
		if r.active >= mch || s.cfg.ProcessWorkers > 0 && r.inv.workers >= s.cfg.ProcessWorkers {
			starved = true
			returned++
			break
		}
		h := s.takeDue(best, s.now)
		returned++
		if s.holdsAddress(r.inv, h) {
			// Read past: the query pages on (its reads billed by
			// returned), the host stays in the index.
			skipped = append(skipped, h)
			continue
		}
		visible--
		s.startSession(r, h, v, at)
	}
	for _, h := range skipped {
		s.offer(h)
	}
	if s.cfg.Layout == LayoutListsBuckets {
		return s.queryDue(v, returned), starved
	}
	// One query per GSI key; KEYS_ONLY items of ~40 bytes, eventually
	// consistent (half a unit per 4 KB).
	var wait int64
	for k := v * b; k < (v+1)*b; k++ {
		units := 0.5 * math.Ceil(float64(max(1, returned/b)*40)/4096)
		w, _ := s.ddb.read(catQuery, &s.ddb.gsi[k], units, s.cfg.QueryLatency)
		wait = max(wait, w)
	}
	return wait, starved
}

// dueBefore is run.dueBefore: is any host of the owned shards due before t?
func (s *Sim) dueBefore(r *run, t int64) bool {
	b := s.cfg.GSIBuckets
	for _, v := range r.owned {
		if s.cfg.Layout == LayoutListsBuckets {
			s.queryDue(v, 0)
		}
		for k := v * b; k < (v+1)*b; k++ {
			if s.cfg.Layout != LayoutListsBuckets {
				s.ddb.read(catQuery, &s.ddb.gsi[k], 0.5, s.cfg.QueryLatency)
			}
			if d, ok := s.firstDue(k); ok && d < t {
				return true
			}
		}
	}
	return false
}

// releaseAll is run.release: the leases still held go back, one after the
// other.
func (s *Sim) releaseAll(r *run) int64 {
	var wait int64
	for _, v := range r.owned {
		if r.held[v] > s.now {
			wait += s.releaseLease(v, r)
		}
	}
	clear(r.held)
	return wait
}

// stopRun ends the loop: no more dispatch; workers finish what they are
// doing (a request never starts past Until), then the run releases its
// leases and returns.
func (s *Sim) stopRun(r *run) {
	if r.stopping {
		return
	}
	r.stopping = true
	for _, w := range r.lingeringSorted() {
		w.stopLinger(s.now)
	}
	if r.active == 0 {
		s.finishRun(r)
	}
}

func (s *Sim) finishRun(r *run) {
	if r.finished {
		return
	}
	r.finished = true
	if !r.wake && !r.leasedEver {
		s.runs.blocked++
		s.runs.blockedGBs += float64(s.now-r.start) / float64(sec) * float64(s.cfg.CheckMemoryMB) / 1024
	}
	var wait int64
	if !r.unrecorded {
		wait = s.releaseAll(r)
	}
	s.after(wait, func() {
		r.inv.runs--
		if r.inv.runs == 0 {
			s.endInvocation(r.inv)
		}
	})
}

// Worker outcomes (worker.go).
type outcome int

const (
	outDone outcome = iota
	outRetry
	outStop
	outGiveUp
)

// session is one worker on one host (worker.work).
type session struct {
	id int64
	s  *Sim
	r  *run
	h  *host
	v  int

	// st is the host's politeness state, every rule on it the product's
	// (Sim.pol); took is how long the latest response took.
	st                                politeness.State
	took                              time.Duration
	robotsAt                          int64
	haveRobots, newRobots, crawlKnown bool
	unresolvable                      bool

	// head is the queue's head as the worker last read it (two rounds
	// deep), pending the queue's length then; inflightIDs the round being
	// committed in the background, landed the state its commit returned.
	head          []int32
	pending       int
	round         []int32
	ri, done      int
	out           outcome
	inflightIDs   map[int32]bool
	landedHead    []int32
	landedPending int

	inflight       bool
	inflightLanded bool
	inflightFailed bool
	waiting        func()

	// The hand-off (handoff.go): results kept until ten or half an SQS
	// batch, then handed to the publisher, one hand-over in flight; rd is
	// the current round's hand-overs, which its commit waits for.
	hoItems []resultItem
	hoBytes int
	hoBusy  bool
	hoNext  func()
	rd      *handed

	lingering  bool
	lingerFrom int64
	lingerGen  int

	// deferTo: due no sooner than this when released (GateLease's
	// deferral, gate.go).
	deferTo int64
}

func (s *Sim) startSession(r *run, h *host, v int, at int64) {
	if h.session != nil {
		s.fail("host %s dispatched to run %d while run %d works it", h.key, r.id, h.session.r.id)
	}
	w := &session{id: s.m.sessions, s: s, r: r, h: h, v: v}
	h.session = w
	s.addrWorked(r.inv, h, 1)
	r.active++
	r.inv.workers++
	r.activeByVS[v]++
	s.runs.workers++
	s.runs.peakWorkers = max(s.runs.peakWorkers, s.runs.workers)
	s.m.sessions++
	s.at(at, func() {
		wait, ok := s.loadHost(h)
		s.after(wait, func() {
			if !ok {
				w.end()
				return
			}
			w.begin()
		})
	})
}

// begin is worker.begin: the stored state, with the last fetch this run
// remembers when later.
func (w *session) begin() {
	h, s := w.h, w.s
	w.st = h.pol
	if t := w.r.remember[h]; t > 0 {
		w.st.Fetched(wall(t))
	}
	w.haveRobots = h.robotsAt != 0
	w.robotsAt = h.robotsAt
	w.crawlKnown = w.haveRobots
	w.head, w.pending = head(h, 2*headBatch), h.pending()
	if s.dnsMove(w) {
		return
	}
	w.startRound()
}

// delay is worker.delay: politeness.Policy.Delay of the host's state and
// the Crawl-delay its robots.txt asks for once the session knows it.
func (w *session) delay() time.Duration {
	var crawl time.Duration
	if w.crawlKnown {
		crawl = time.Duration(w.h.crawlDelay)
	}
	return w.s.pol.Delay(w.st, crawl)
}

// startRound takes the next round of up to ten entries from the head the
// worker last read (two rounds deep), past those being committed.
// handed counts a round's hand-overs still being sent.
type handed struct {
	out    int
	waiter func()
}

// then runs fn once the round's hand-overs are out.
func (rd *handed) then(fn func()) {
	if rd.out == 0 {
		fn()
		return
	}
	rd.waiter = fn
}

const handOffBytes = 256 << 10 // check's handOffBytes: one SQS batch

// flushHandOff is handOff.flush: hand the kept results over once the
// previous hand-over is out, then go on.
func (w *session) flushHandOff(then func()) {
	if len(w.hoItems) == 0 {
		then()
		return
	}
	if w.hoBusy {
		w.hoNext = func() { w.flushHandOff(then) }
		return
	}
	items := w.hoItems
	w.hoItems, w.hoBytes, w.hoBusy = nil, 0, true
	rd := w.rd
	rd.out++
	w.r.inv.pub.publish(items, func() {
		w.hoBusy = false
		rd.out--
		if rd.out == 0 && rd.waiter != nil {
			fn := rd.waiter
			rd.waiter = nil
			fn()
		}
		if fn := w.hoNext; fn != nil {
			w.hoNext = nil
			fn()
		}
	})
	then()
}

func (w *session) startRound() {
	w.rd = &handed{}
	w.round = w.round[:0]
	for _, id := range w.head {
		if len(w.round) == headBatch {
			break
		}
		if !w.inflightIDs[id] {
			w.round = append(w.round, id)
		}
	}
	w.ri, w.done, w.out = 0, 0, outDone
	if w.s.pol.Expired(w.st, wall(w.s.now)) {
		w.out = outGiveUp
	}
	w.next()
}

func (w *session) next() {
	if w.out != outDone || w.ri == len(w.round) {
		// The round's kept results are handed over before it ends.
		w.flushHandOff(w.roundEnd)
		return
	}
	w.process(w.round[w.ri])
}

// entryDone is an entry with a result: it is kept for the hand-off
// (handOff.add), handed over when ten are kept or half a batch's bytes.
func (w *session) entryDone(it resultItem) {
	w.done++
	w.ri++
	if len(w.hoItems) > 0 && w.hoBytes+int(it.bytes) > handOffBytes {
		w.flushHandOff(func() { w.entryDone2(it) })
		return
	}
	w.entryDone2(it)
}

func (w *session) entryDone2(it resultItem) {
	w.hoItems = append(w.hoItems, it)
	w.hoBytes += int(it.bytes)
	if len(w.hoItems) >= headBatch || w.hoBytes >= handOffBytes/2 {
		w.flushHandOff(w.next)
		return
	}
	w.next()
}

func (w *session) entryOut(o outcome) {
	w.out = o
	w.next()
}

// disallowed decides, per URL, whether robots.txt forbids it.
func (w *session) disallowed(id int32) bool {
	return w.h.robotsKind != robots404 && mix(w.s.cfg.Seed, int(id), 11) < w.s.cfg.Web.DisallowP
}

// process is worker.process for one entry.
func (w *session) process(id int32) {
	s, p := w.s, w.s.cfg.P
	if w.unresolvable {
		w.entryDone(resultItem{id: id, status: stFetchError, bytes: 600})
		return
	}
	if p.RespectRobots && !(w.haveRobots && s.now-w.robotsAt < int64(p.RobotsTTL)) {
		// policyFor: a stored answer too large for the host item is read
		// from its own item first; then robots.txt is fetched.
		var wait int64
		if w.haveRobots && w.h.robotsKind == robotsLarge {
			wait, _ = s.ddb.read(catRobots, &w.h.bins, 0.5, s.cfg.DynamoLatency)
		}
		s.after(wait, func() {
			w.request(true, func(o outcome, r response) {
				if o != outDone {
					w.entryOut(o)
					return
				}
				switch {
				case r == respNXDomain:
					w.unresolvable = true
					w.entryDone(resultItem{id: id, status: stFetchError, bytes: 600})
				case r.transient():
					// Unreachable or refused (5xx, 429): a failure of the
					// host, never a rate-limit signal (policyFor's w.fail
					// without the response).
					w.fail(robotsFailure+r.String(), 0)
					w.entryOut(outRetry)
				default:
					// A usable answer; its duration does not move the
					// adaptive delay (policyFor: answered(LastTook)).
					s.pol.Answered(&w.st, wall(s.now), w.st.LastTook)
					w.haveRobots, w.newRobots, w.crawlKnown = true, true, true
					w.robotsAt = s.now
					w.page(id)
				}
			})
		})
		return
	}
	w.page(id)
}

// page fetches an entry's URL once robots.txt allows it.
func (w *session) page(id int32) {
	s, p := w.s, w.s.cfg.P
	if p.RespectRobots && w.disallowed(id) {
		w.entryDone(resultItem{id: id, status: stDenied, bytes: 600})
		return
	}
	w.request(false, func(o outcome, r response) {
		if o != outDone {
			w.entryOut(o)
			return
		}
		switch {
		case r == respNXDomain:
			w.unresolvable = true
			w.entryDone(resultItem{id: id, status: stFetchError, bytes: 600})
		case r.transient():
			w.fail(r.String(), r.code())
			if w.h.attempts == nil {
				w.h.attempts = map[int32]uint8{}
			}
			w.h.attempts[id]++
			if int(w.h.attempts[id]) >= p.MaxAttempts {
				delete(w.h.attempts, id)
				w.entryDone(resultItem{id: id, status: stFetchError, bytes: 600})
				return
			}
			w.entryOut(outRetry)
		case r == respNotFound:
			w.answered()
			w.entryDone(resultItem{id: id, status: stFetchError, bytes: 600})
		default:
			w.answered()
			body := min(lognormal(s.rng, s.cfg.Web.BodyMedian, s.cfg.Web.BodySigma), float64(p.MaxBodyBytes))
			bin := s.rng.Float64() < s.cfg.Web.BinaryP
			w.entryDone(resultItem{id: id, status: stFetched, bytes: s.resultBytes(int(body), bin)})
		}
	})
}

// fail is worker.fail: msg says what happened, code is the HTTP status
// when the server answered (0: no answer). politeness.Policy's Refused (a
// 429 or 503 is a rate-limit signal) and Failed: the failure run goes on
// and the host backs off.
func (w *session) fail(msg string, code int) {
	now := wall(w.s.now)
	if code != 0 {
		w.s.pol.Refused(&w.st, now, msg, code, 0, false)
		return
	}
	w.s.pol.Failed(&w.st, now, msg)
}

// answered is worker.answered: a usable answer to a page, which took
// w.took (politeness.Policy.Answered: the failure run ends, the adaptive
// delay follows the response's duration).
func (w *session) answered() {
	w.s.pol.Answered(&w.st, wall(w.s.now), w.took)
}

// request is worker.pace followed by one request: it waits for the host's
// delay (and any pause), refuses to start past the run's end, its deadline
// or its lease (fencing), and calls cb when the response ends.
func (w *session) request(robots bool, cb func(outcome, response)) {
	s, p, r := w.s, w.s.cfg.P, w.r
	now := s.now
	d := w.delay()
	start := max(now, fromWall(w.st.Next(d)))
	if !engine.WaitsInPlace(w.st.LastFetch.Add(d), wall(now)) {
		// A long delay: the host is released, due again at its next
		// request (progress).
		s.m.longDelays++
		cb(outStop, 0)
		return
	}
	if s.pol.Expired(w.st, wall(start)) {
		// The failure run's bound comes before the next request, or the
		// server asked for a pause beyond it.
		b, _ := s.pol.Bound(w.st)
		if w.st.PauseUntil.After(b) {
			cb(outGiveUp, 0)
			return
		}
		bt := fromWall(b)
		if bt > now && bt >= r.until {
			cb(outStop, 0)
			return
		}
		s.at(bt, func() { cb(outGiveUp, 0) })
		return
	}
	if start >= r.until || start+int64(p.FetchTimeout)+int64(commitMargin) > r.deadline {
		cb(outStop, 0)
		return
	}
	// Proposal (Config.ReleaseOnWait): a host whose next request is far
	// off (a back-off, a long Retry-After) goes back to the due index, due
	// then, instead of holding a worker slot while it sleeps.
	if s.cfg.ReleaseOnWait > 0 && start-now > int64(s.cfg.ReleaseOnWait) {
		s.m.released++
		cb(outStop, 0)
		return
	}
	s.at(start, func() {
		s.invocationSlot(r, cb, func() {
			s.serverGate(w, cb, func(gateDone func()) {
				if !engine.LeaseFences(time.Duration(r.held[w.v]-s.now), p.FetchTimeout, w.delay()) {
					gateDone()
					cb(outStop, 0)
					return
				}
				h := w.h
				s.checkPlaced(w)
				s.noteAddrStart(h)
				resp, dur := s.respond(h, robots)
				w.took = time.Duration(dur)
				if s.starts != nil {
					s.starts = append(s.starts, s.now)
				}
				if s.hostStarts != nil {
					s.hostStarts[h.key] = append(s.hostStarts[h.key], s.now)
				}
				if resp != respNXDomain {
					s.checkPolite(w)
					h.inflight = true
				}
				s.m.requests++
				s.after(dur, func() {
					s.noteAddrEnd(h)
					gateDone()
					if resp != respNXDomain {
						h.inflight = false
						h.lastEnd = s.now
					}
					w.st.Fetched(wall(s.now))
					if s.now > r.remember[h] {
						r.remember[h] = s.now
					}
					cb(outDone, resp)
				})
			})
		})
	})
}

// invocationSlot runs start at the invocation's next free request slot
// (now, unless Config.InvocationRPS binds): requests queue in the order
// they fall due, spaced 1/InvocationRPS apart. A request the queue would
// push past the run's end is not made.
func (s *Sim) invocationSlot(r *run, cb func(outcome, response), start func()) {
	rps := s.cfg.InvocationRPS
	if rps <= 0 {
		start()
		return
	}
	at := max(s.now, r.inv.nextStart)
	if at >= r.until {
		cb(outStop, 0)
		return
	}
	r.inv.nextStart = at + int64(float64(time.Second)/rps)
	if at > s.now {
		s.m.rateWait += at - s.now
		s.at(at, start)
		return
	}
	start()
}

// checkPolite asserts the politeness rule at a request's start, from the
// server's side: no request while another is in flight, and none sooner
// than the delay the core decided for it (politeness.Policy.Delay of the
// worker's state: FetchDelay, the Crawl-delay the worker knows, DelayFactor
// x the last answer's duration, the delay rate limits taught) after the
// last response to this host ended, whichever run or shard made it.
func (s *Sim) checkPolite(w *session) {
	h := w.h
	if h.session != w {
		s.fail("host %s requested by a worker that does not hold it", h.key)
	}
	if h.inflight {
		s.fail("host %s: two requests at once", h.key)
	}
	if h.lastEnd > 0 {
		gap := time.Duration(s.now - h.lastEnd)
		d := w.delay()
		s.m.gaps++
		if rel := float64(gap) / float64(d); rel < s.m.minGapRel {
			s.m.minGapRel = rel
		}
		if gap < d {
			s.fail("host %s: request %s after the previous response, delay %s", h.key, gap, d)
		}
	}
}

type response int

const (
	respOK response = iota
	respNotFound
	respServerError
	respTimeout
	respRefused
	respNXDomain
	respRateLimited
)

// transient tells the answers that are a failure of the host (no usable
// answer: worker.process's fetch.IsTransient errors and !usable codes).
func (r response) transient() bool {
	return r == respServerError || r == respTimeout || r == respRefused || r == respRateLimited
}

// code is the HTTP status of an answer that is not usable, 0 when the
// server gave none (a timeout, a refused connection). A 5xx of the model is
// a 500: only 429 and 503 are rate-limit signals to the core, and the
// model's rate limits are the 429s of kindRateLimit.
func (r response) code() int {
	switch r {
	case respServerError:
		return http.StatusInternalServerError
	case respRateLimited:
		return http.StatusTooManyRequests
	}
	return 0
}

// String is what the failure's LastError says.
func (r response) String() string {
	switch r {
	case respServerError:
		return "server answered 500"
	case respRateLimited:
		return "server answered 429"
	case respTimeout:
		return "timeout"
	case respRefused:
		return "connection refused"
	case respNXDomain:
		return "no such host"
	case respNotFound:
		return "server answered 404"
	}
	return "ok"
}

// robotsFailure is giveup.go's prefix of LastError for a failure to read
// robots.txt: a host that gives up on it answers denied.
const robotsFailure = "robots.txt: "

// respond draws a host's answer and how long it takes.
func (s *Sim) respond(h *host, robots bool) (response, int64) {
	web, p := s.cfg.Web, s.cfg.P
	if len(s.script) > 0 {
		sc := s.script[0]
		s.script = s.script[1:]
		return sc.resp, int64(sc.dur)
	}
	if s.answer != nil {
		a := s.answer(h, robots)
		return a.resp, int64(a.dur)
	}
	switch h.kind {
	case kindNXDomain:
		return respNXDomain, 30 * ms
	case kindRefused:
		return respRefused, 30 * ms
	case kindBlackhole:
		return respTimeout, int64(p.FetchTimeout)
	case kindRateLimit:
		// nginx's limit_req without a burst: a request sooner than
		// RateLimitEvery after the last one it accepted is refused at once.
		if h.limitAt > 0 && s.now-h.limitAt < int64(web.RateLimitEvery) {
			s.m.limited++
			h.limited++
			s.m.limitedMax = max(s.m.limitedMax, int(h.limited))
			if h.limited == 1 {
				s.m.limitedHosts++
			}
			return respRateLimited, 5 * ms
		}
		h.limitAt = s.now
	}
	d := int64(lognormal(s.rng, float64(h.medianMS), web.RequestSigma) * float64(ms))
	if d >= int64(p.FetchTimeout) {
		return respTimeout, int64(p.FetchTimeout)
	}
	if h.kind == kindFlaky && s.rng.Float64() < web.FlakyP {
		return respServerError, d
	}
	if robots {
		if h.robotsKind == robots404 {
			return respNotFound, d
		}
		return respOK, d
	}
	u := s.rng.Float64()
	switch {
	case u < web.NotFoundP:
		return respNotFound, d
	case u < web.NotFoundP+web.ServerErrorP:
		return respServerError, d
	}
	return respOK, d
}

// roundEnd is the end of one turn of worker.work's loop.
func (w *session) roundEnd() {
	if w.inflight && !w.inflightLanded {
		w.waiting = w.roundEnd
		return
	}
	stop := w.out == outStop
	if w.inflight {
		w.inflight = false
		stop = stop || w.inflightFailed
		if !w.inflightFailed {
			w.head, w.pending = w.landedHead, w.landedPending
		}
		w.inflightIDs = nil
	}
	h := w.h
	done := make(map[int32]bool, w.done)
	for _, id := range w.round[:w.done] {
		done[id] = true
	}
	// h still holds this round's entries: it ends the queue when the whole
	// round is done and nothing else is queued.
	drained := w.done == len(w.round) && w.pending <= len(w.round)
	release := stop || w.out == outGiveUp || len(w.round) == 0 || drained
	following := false
	for _, id := range w.head {
		if !done[id] {
			following = true
			break
		}
	}
	if !release && following {
		// commitInBackground: once the round's hand-overs are out, commit
		// it while the next round is fetched.
		c := w.progress(done, false, false)
		w.inflight, w.inflightLanded, w.inflightFailed = true, false, false
		w.inflightIDs = done
		w.r.remember[h] = max(w.r.remember[h], fromWall(w.st.LastFetch))
		w.rd.then(func() {
			w.commit(c, func(ok bool) {
				w.inflightLanded = true
				w.inflightFailed = !ok
				w.landedHead, w.landedPending = head(h, 2*headBatch), h.pending()
				if wt := w.waiting; wt != nil {
					w.waiting = nil
					wt()
				}
			})
		})
		w.startRound()
		return
	}
	w.rd.then(func() {
		if w.out == outGiveUp && !stop {
			// The round's results are out: they are committed with the
			// first batch of the given-up URLs.
			w.giveUp()
			return
		}
		w.r.remember[h] = max(w.r.remember[h], fromWall(w.st.LastFetch))
		after := func() {
			if drained {
				// Every URL of the failure run has ended.
				w.st.Drained()
			}
			c := w.progress(done, release, drained && !stop)
			w.commit(c, func(ok bool) {
				if !ok {
					w.r.unrecorded = true
					w.end()
					return
				}
				if release && (!c.cont || h.pending() == 0) {
					w.end()
					return
				}
				w.head, w.pending = head(h, 2*headBatch), h.pending()
				w.startRound()
			})
		}
		if drained && !stop && w.done > 0 {
			w.linger(after)
			return
		}
		after()
	})
}

// progress is worker.progress.
func (w *session) progress(done map[int32]bool, release, cont bool) commitReq {
	// worker.nextDue: the staggered check, never before the host may be
	// requested again.
	due := engine.NextDue(wall(w.s.now), w.h.key, w.s.cfg.P.CheckHostPeriod, w.st, w.delay())
	c := commitReq{done: done, release: release, cont: cont, nextDue: max(fromWall(due), w.deferTo), robots: w.newRobots}
	w.newRobots = false
	return c
}

// publishThen publishes results through the invocation's publisher.
func (w *session) publishThen(results []resultItem, then func()) {
	if len(results) == 0 {
		then()
		return
	}
	w.r.inv.pub.publish(results, then)
}

// commit is worker.commit: up to five attempts, 200 ms to 1.6 s apart.
func (w *session) commit(c commitReq, cb func(bool)) {
	s, h := w.s, w.h
	var try func(attempt int)
	try = func(attempt int) {
		// The store keeps the worker's state; a last fetch only moves
		// forward.
		last := h.pol.LastFetch
		h.pol = w.st
		if last.After(h.pol.LastFetch) {
			h.pol.LastFetch = last
		}
		wait, ok := s.commitHost(h, c, w)
		if ok || attempt == 4 {
			s.after(wait, func() { cb(ok) })
			return
		}
		s.after(wait+int64(100<<(attempt+1))*ms, func() { try(attempt + 1) })
	}
	try(0)
}

// linger is worker.linger: a drained host stays with its worker until its
// next staggered check time, at least one CheckHostPeriod away, unless the
// run ends or its dispatcher is starved first (checked every 250 ms).
func (w *session) linger(then func()) {
	s, p := w.s, w.s.cfg.P
	now := s.now
	until := fromWall(engine.LingerUntil(wall(now), w.h.key, p.CheckHostPeriod))
	if s.cfg.LingerRun {
		// Proposal: the host stays with its worker for the rest of the
		// run, so URLs appended meanwhile find it in the index (no index
		// write) and wait for the linger's end.
		until = w.r.until
	}
	end := min(until, w.r.until)
	if w.r.starved || w.r.stopping || end <= now {
		then()
		return
	}
	w.lingering, w.lingerFrom = true, now
	s.addrWorked(w.r.inv, w.h, -1) // a lingering host is not fetching
	w.lingerGen++
	gen := w.lingerGen
	w.waiting = then
	w.r.lingering[w] = true
	s.at(end, func() {
		if w.lingering && w.lingerGen == gen {
			w.endLinger()
		}
	})
}

// stopLinger ends a linger at its next 250 ms step.
func (w *session) stopLinger(now int64) {
	if !w.lingering {
		return
	}
	step := int64(lingerStep)
	k := (now - w.lingerFrom + step - 1) / step
	gen := w.lingerGen
	w.s.at(w.lingerFrom+k*step, func() {
		if w.lingering && w.lingerGen == gen {
			w.endLinger()
		}
	})
}

func (w *session) endLinger() {
	w.lingering = false
	w.s.addrWorked(w.r.inv, w.h, 1)
	delete(w.r.lingering, w)
	then := w.waiting
	w.waiting = nil
	then()
}

// giveUp is worker.giveUp: every URL queued ends at once, in rounds of a
// hundred, each published and then committed; the last releases the host
// and clears its failure run.
func (w *session) giveUp() {
	s, h := w.s, w.h
	status := stFetchError
	if strings.HasPrefix(w.st.LastError, robotsFailure) {
		status = stDenied
	}
	// Load(allEntries): the item and every chunk.
	wait, _ := s.loadHost(h)
	for _, c := range h.chunks[min(1, len(h.chunks)):] {
		cw, _ := s.ddb.read(catLoad, &h.bins, readUnits(int(c.bytes)), s.cfg.DynamoLatency)
		wait += cw
	}
	var results []resultItem
	roundDone := map[int32]bool{}
	for _, id := range w.round[:w.done] {
		roundDone[id] = true
	}
	var queue []int32
	for _, id := range h.q[h.qh:] {
		if !roundDone[id] {
			queue = append(queue, id)
		}
	}
	var walk func()
	walk = func() {
		n := min(giveUpBatch, len(queue))
		rs := results
		results = nil
		ids := roundDone
		roundDone = map[int32]bool{}
		for _, id := range queue[:n] {
			rs = append(rs, resultItem{id: id, status: status, bytes: 700})
			ids[id] = true
		}
		s.m.givenUp += n
		queue = queue[n:]
		w.publishThen(rs, func() {
			last := len(queue) == 0
			release := last || !w.mayWalkOn()
			if last {
				w.st.GivenUp()
				h.attempts = nil
			}
			c := w.progress(ids, release, false)
			w.commit(c, func(ok bool) {
				if !ok {
					w.r.unrecorded = true
					w.end()
					return
				}
				if release {
					w.end()
					return
				}
				walk()
			})
		})
	}
	s.after(wait, walk)
}

// mayWalkOn is giveup.go's mayWalkOn.
func (w *session) mayWalkOn() bool {
	s, r := w.s, w.r
	p := s.cfg.P
	if s.now >= r.until+int64(p.FetchTimeout) || s.now+int64(commitMargin) >= r.deadline {
		return false
	}
	return r.held[w.v]-s.now > int64(commitMargin)
}

// end is the worker's return: the host leaves the run's active set and,
// still due, waits in the index for the next dispatch.
func (w *session) end() {
	h, r := w.h, w.r
	s := w.s
	if h.session == w {
		h.session = nil
	}
	s.addrWorked(r.inv, h, -1)
	r.active--
	r.inv.workers--
	r.activeByVS[w.v]--
	s.runs.workers--
	delete(r.lingering, w)
	if h.inIndex {
		s.offer(h)
	}
	if r.stopping && r.active == 0 {
		s.finishRun(r)
	}
}
