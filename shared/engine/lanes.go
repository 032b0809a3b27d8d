package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// Lanes: a host fetched over several connections.
//
// A host is fetched one request at a time unless a HostRules rule gives it
// more connections (params.HostRule.Connections, 2 to 16): only then is a
// round of its queue fetched by up to that many lanes at once. A lane is
// one connection's worth of requests: it takes the round's next entry,
// waits the host's delay after the end of its own previous response (not
// the host's latest), requests, and takes the next. The host so sees at
// most N requests in flight, and every lane keeps the delay between its
// own requests ("each connection keeping the rule's delay"). The first
// request of each lane is staggered over the delay, so the lanes do not
// start in one burst and the host sees about N requests per delay, evenly.
//
// Only the requests overlap. Everything else (the politeness state, the
// attempts, robots.txt, the duplicates, the metrics, the hand-over of
// results) is the sequential code run by one lane at a time: a lane holds
// the worker's lock (laneSet.lock) while it works and lets it go only
// while it waits (pace's sleep, a request slot, a copy's fetch on another
// lane) and while its request is on the wire (request). So the rules are
// the sequential path's, written once:
//
//   - every lane's response updates the host's state: its last fetch is
//     the latest response end of any lane (what is stored, conservative
//     after a crash: a successor waits the delay from the last of them);
//   - a failure, back-off, Retry-After or rate-limit signal on any lane
//     pauses the host (PauseUntil) and ends the round: no lane starts
//     another request; a lane that was waiting finds the pause when it
//     wakes (pace) and leaves its entry queued. A failing host is then
//     probed one request at a time, as any host (the give-up bound is the
//     host's), and gets its lanes back with its first usable answer (one
//     to a request already in flight when the failure came counts);
//   - robots.txt is read once, before the lanes start (and, for an origin
//     a lane meets later, by that lane while the others wait: pin);
//   - two copies of a URL are never in flight together: the second waits
//     for the first's result and is answered from it (laneEntry,
//     processOnce);
//   - results are handed over in the round's order (handInOrder): a
//     commit removes only a prefix of the queue, so a result that ends
//     behind an entry still in flight waits for it, and one behind an
//     entry that must wait (a failure, the run's end) is kept (held) and
//     handed over when its entry comes up in the next round, without a
//     request. The round's commit marks done only what was handed over,
//     as on the sequential path (r.ended, r.handed). Held results die
//     with the session (its entries are fetched again by the next one)
//     and a give-up ends their entries like the rest of the queue.
//
// A host with such a rule goes through this code also when it gets one
// lane: a lone lane paces from the host's last response and takes the
// entries in order, which is the sequential rule, and it hands over what
// an earlier round held.
//
// A round (HeadBatch entries) ends when its last lane is done, so lanes
// idle a moment at each round's end: 40 URLs on 4 lanes take about 11
// lane turns instead of 10.
//
// Lanes are used only where the sequential path waits in place: a host
// whose delay is within waitInPlace (so also fenceDelay: no request needs
// its start recorded, recordStart) and whose robots.txt sets no
// Crawl-delay. A Crawl-delay is the site's own spacing between any two of
// our requests, which N lanes would cut to a Nth; such a host, and one
// whose delay is longer (it is released between requests), is fetched on
// one connection whatever the rule says.
//
// Each lane beyond the first takes a worker slot of the process's Budget
// (memory for a body in flight, a connection), and each request a request
// slot, as every request does: a host with 16 connections costs 16
// workers, never more than the budget holds; when the budget has fewer
// slots free the host gets fewer lanes. The admission counts the host at
// N times its rate (hostRate).

// A rule's connections must all reach the host: the fetcher's transport
// opens that many to it (this fails to compile otherwise).
var _ [fetch.MaxConnsPerHost - params.MaxConnections]struct{}

// laneSet is the lanes of one round.
type laneSet struct {
	// lock is held by the lane that works; a channel, not a sync.Mutex, so
	// a lane waiting for it is durably blocked for testing/synctest (whose
	// virtual clock moves only when every goroutine is).
	lock chan struct{}
	// The fields below are the holder's.
	cur *lane
	// pinned: the holder keeps the lock through its waits (robots.txt).
	pinned int
	// busy are the requests in flight by key: a copy waits for its close.
	busy  map[dupeKey]chan struct{}
	round *round
	next  int // the round's next entry to take
	// res and done are the results of the round's entries that ended, by
	// position, until they are handed over: entries before handed are.
	res    []result.Result
	done   []bool
	handed int
	err    error // ErrCrashed once a lane met an injected crash
}

// lane is one connection's pacing.
type lane struct {
	// last is when this lane's latest response ended.
	last time.Time
	// planned is pace's planned start of the lane's request (Admission),
	// kept while another lane holds the worker.
	planned time.Time
}

// laneRule is how many connections the host's rule gives it (1 without
// one).
func (w *worker) laneRule() int {
	if r, ok := w.hostRule(); ok {
		return r.Connections
	}
	return 1
}

// fetchLanes fetches the round of a host whose rule gives it several
// connections over as many lanes as apply now (see above; one while it
// fails, has a Crawl-delay, or a long delay). robots.txt is read first,
// so its Crawl-delay is known before lanes are chosen.
func (w *worker) fetchLanes(ctx context.Context, r *round, ho *handOff) error {
	n := w.laneCount(len(r.entries))
	extra := 0
	if n > 1 {
		extra = w.takeLaneSlots(n - 1)
		n = 1 + extra
	}
	defer func() { w.giveLaneSlots(extra) }()
	if n > 1 && w.p.RespectRobots {
		ent := r.entries[0]
		if _, unresolved := w.unresolved(ent, ent.URL, 0); !unresolved {
			pol, out := w.policyFor(ctx, ent.URL)
			if out != outDone {
				// As entry 0 on the sequential path: the round waits.
				r.out = out
				return nil
			}
			if pol != nil && pol.rules != nil && pol.rules.CrawlDelay(w.p.UserAgent) > 0 {
				w.giveLaneSlots(extra)
				n, extra = 1, 0
			}
		}
	}
	ls := &laneSet{lock: make(chan struct{}, 1), busy: map[dupeKey]chan struct{}{}, round: r,
		res: make([]result.Result, len(r.entries)), done: make([]bool, len(r.entries))}
	lanes := w.startLanes(n)
	w.lanes = ls
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Go(func() { w.runLane(ctx, ls, l, ho) })
	}
	wg.Wait()
	w.lanes = nil
	w.laneEnds, w.laneMark = w.laneEnds[:0], w.st.LastFetch
	for _, l := range lanes {
		w.laneEnds = append(w.laneEnds, l.last)
	}
	if ls.err != nil {
		return ls.err
	}
	// Results behind an entry that must wait are kept for the next round
	// (see held).
	for i := ls.handed; i < len(r.entries); i++ {
		if ls.done[i] {
			if w.held == nil {
				w.held = map[string]result.Result{}
			}
			w.held[r.entries[i].ID] = ls.res[i]
		}
	}
	if !ho.flush(ctx, r.handed) {
		return ErrCrashed
	}
	return nil
}

// laneCount is how many lanes a round of n entries may use now: the rule's
// connections, while the host answers (a failing host is probed one
// request at a time), its delay keeps its worker in place, and no
// Crawl-delay is known.
func (w *worker) laneCount(n int) int {
	conns := min(w.laneRule(), n)
	if conns <= 1 || !w.st.FailingSince.IsZero() || w.crawlDelay > 0 ||
		w.pol().Delay(w.st, w.crawlDelay) > waitInPlace {
		return 1
	}
	return conns
}

// takeLaneSlots claims up to n worker slots of the process's Budget for
// extra lanes, as many as are free, and none while due hosts wait for a
// slot (wanted): a host's first connection comes before another's fifth.
func (w *worker) takeLaneSlots(n int) int {
	if w.wanted() {
		return 0
	}
	limit := w.engine.Budget.Workers(w.engine.keptBody(w.p))
	got := 0
	for got < n && w.engine.slots.take(limit) {
		got++
	}
	return got
}

func (w *worker) giveLaneSlots(n int) {
	for range n {
		w.engine.slots.give()
	}
	if n > 0 {
		w.engine.room.signal()
	}
}

// startLanes makes n lanes: those of the previous lane round, the earliest
// free first, unless a request was made outside them since (then their
// ends say nothing of the host's latest), and new ones counted from the
// host's last fetch, staggered over the delay: lane i as if its last
// response had ended i/n of a delay after the host's. With no last fetch
// (a host new to the run) they are staggered from its spread start. A
// lone lane is the sequential rule: the delay from the host's last
// response, whichever lane it ended.
func (w *worker) startLanes(n int) []*lane {
	var ends []time.Time
	if n > 1 && w.laneMark.Equal(w.st.LastFetch) {
		ends = slices.Clone(w.laneEnds)
		slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	}
	d := w.pol().Delay(w.st, w.crawlDelay)
	base := w.st.LastFetch
	if first := w.startAt.Add(-d); !w.startAt.IsZero() && first.After(base) {
		base = first
	}
	// Lanes that waited for the round's end are all free now: they are
	// kept d/n apart instead of starting together (a lane only ever starts
	// later for it).
	idle := w.engine.Clock.Now().Add(-d)
	lanes := make([]*lane, n)
	for i := range lanes {
		l := &lane{last: base.Add(d * time.Duration(i) / time.Duration(n))}
		if i < len(ends) {
			l.last = ends[i]
			if l.last.Before(idle) {
				l.last = idle
			}
			if i > 0 {
				if next := lanes[i-1].last.Add(d / time.Duration(n)); l.last.Before(next) {
					l.last = next
				}
			}
		}
		lanes[i] = l
	}
	return lanes
}

// runLane takes the round's entries one after another, as fetchRound does,
// until none is left, one must wait (r.out), or a crash stops the run.
func (w *worker) runLane(ctx context.Context, ls *laneSet, l *lane, ho *handOff) {
	ls.lock <- struct{}{}
	ls.cur = l
	defer func() {
		ls.cur = nil
		<-ls.lock
	}()
	r := ls.round
	for r.out == outDone && ls.err == nil && ls.next < len(r.entries) {
		i := ls.next
		ls.next++
		res, o := w.laneEntry(ctx, ls, r.entries[i])
		if w.crash(CrashFetched, r.entries[i].ID) {
			ls.err = ErrCrashed
			return
		}
		if o != outDone {
			r.out = worse(r.out, o)
			continue
		}
		ls.res[i], ls.done[i] = res, true
		if !w.handInOrder(ctx, ls, ho) {
			ls.err = ErrCrashed
			return
		}
	}
}

// laneEntry is processOnce for a lane: an entry whose result a previous
// round kept (held) is answered from it; a copy of a URL another lane is
// fetching waits for that fetch (and is then answered from it).
func (w *worker) laneEntry(ctx context.Context, ls *laneSet, ent hostqueue.Entry) (result.Result, outcome) {
	if res, ok := w.held[ent.ID]; ok {
		delete(w.held, ent.ID)
		return res, outDone
	}
	k := keyOf(ent)
	for busy, ok := ls.busy[k]; ok && ctx.Err() == nil; busy, ok = ls.busy[k] {
		w.unlocked(func() {
			select {
			case <-busy:
			case <-ctx.Done():
			}
		})
	}
	done := make(chan struct{})
	ls.busy[k] = done
	defer func() {
		delete(ls.busy, k)
		close(done)
	}()
	return w.processOnce(ctx, ent)
}

// handInOrder hands over the results of the round's entries that ended,
// in the round's order, up to the first that has not: a round's commit
// removes only a prefix of the queue (hostqueue.Commit.Done), so a result
// handed over beyond it would be sent again when its entry comes up
// again. False means an injected crash stopped the run.
func (w *worker) handInOrder(ctx context.Context, ls *laneSet, ho *handOff) bool {
	r := ls.round
	for ; ls.handed < len(r.entries) && ls.done[ls.handed]; ls.handed++ {
		res := ls.res[ls.handed]
		ls.res[ls.handed] = result.Result{}
		r.ended = append(r.ended, res.ID)
		if !ho.add(ctx, r.handed, res) {
			return false
		}
	}
	return true
}

// worse is the outcome that decides a round two lanes ended with a and b:
// stopping the host beats giving it up, which beats a retry.
func worse(a, b outcome) outcome {
	rank := func(o outcome) int {
		switch o {
		case outStop:
			return 3
		case outGiveUp:
			return 2
		case outRetry:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// laneWoke decides, for a lane whose pace is over, whether it may request:
// not when another lane ended the round meanwhile (the entry stays queued:
// outRetry, which ends nothing and counts no attempt), and not yet when the
// host was paused meanwhile (again: pace waits once more).
func (w *worker) laneWoke() (out outcome, again bool) {
	if w.lanes.round.out != outDone || w.lanes.err != nil {
		return outRetry, false
	}
	if w.st.PauseUntil.After(w.engine.Clock.Now()) {
		return outDone, true
	}
	return outDone, false
}

// paceState is the politeness state pace reads: the host's, with a lane's
// own last response in place of the host's latest.
func (w *worker) paceState() politeness.State {
	st := w.st
	if ls := w.lanes; ls != nil && ls.cur != nil {
		st.LastFetch = ls.cur.last
	}
	return st
}

// unlocked runs f, a wait, without the worker's lock when a lane holds it
// (not pinned), so the other lanes work meanwhile; on the sequential path
// it just runs f. The lane's planned start, a worker field, is kept
// across.
func (w *worker) unlocked(f func()) {
	ls := w.lanes
	if ls == nil || ls.pinned > 0 || ls.cur == nil {
		f()
		return
	}
	l := ls.cur
	l.planned = w.planned
	ls.cur = nil
	<-ls.lock
	defer func() {
		ls.lock <- struct{}{}
		ls.cur = l
		w.planned = l.planned
	}()
	f()
}

// sleep is the clock's Sleep, without the worker's lock for a lane.
func (w *worker) sleep(ctx context.Context, d time.Duration) error {
	var err error
	w.unlocked(func() { err = w.engine.Clock.Sleep(ctx, d) })
	return err
}

// request makes the request through the session's fetcher; a lane lets
// the others work while it is on the wire, and notes its end as its own
// last response.
func (w *worker) request(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	if w.lanes == nil {
		return w.fetcher.Fetch(ctx, req)
	}
	f := w.fetcher
	var resp *fetch.Response
	var err error
	w.unlocked(func() { resp, err = f.Fetch(ctx, req) })
	if l := w.lanes.cur; l != nil {
		l.last = w.engine.Clock.Now()
	}
	return resp, err
}

// pin keeps a lane's lock through its waits until the returned func is
// called: while one lane reads robots.txt (paced, so it may wait), the
// others must not read it too nor request a page it may disallow. A no-op
// on the sequential path.
func (w *worker) pin() func() {
	ls := w.lanes
	if ls == nil {
		return func() {}
	}
	ls.pinned++
	return func() { ls.pinned-- }
}
