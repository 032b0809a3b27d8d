package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/backoff"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// maxRedirects is how many redirect hops one URL may take in all: same-host
// hops followed inline, and cross-host hops, whose targets are queued on
// their own hosts with the hops so far (hostqueue.Entry.Hops), so a loop
// across hosts ends too.
const maxRedirects = 5

// fenceDelay is the longest delay the shard's lease fences: a request
// starts only while the lease outlives it and that much delay after it, so
// a successor that takes the shard over after this run dies mid-request
// still keeps the delay from the request's end. A host whose delay is
// longer (a long Crawl-delay) is fenced by the store instead: before each
// such request its worker commits a pause until the request's start plus
// FetchTimeout (the latest its response can end) plus the delay (one write
// per request, and only for these hosts), so a successor after a crash
// waits the whole delay; the commit after the response replaces that pause
// with the real state (the delay from the real end). The lease length then stays FetchTimeout +
// fenceDelay + a margin however long a Crawl-delay is.
const fenceDelay = 30 * time.Second

// waitInPlace is the longest a worker waits for its host's next request:
// a host whose delay leaves it longer idle is released (its worker slot
// and, with the session's last commit, its place in the run) and is due
// again at its last fetch plus the delay, found by the due index. No
// Lambda time or local worker is spent waiting a long Crawl-delay.
const waitInPlace = fenceDelay

// yieldAfter is the shortest pause a failing host gives its worker up for
// when due hosts wait for one (see pace): shorter ones cost less waiting
// than the store writes of a release and a new session.
const yieldAfter = time.Second

// worker works one host for one run.
type worker struct {
	*run
	key     string
	vshard  int
	p       params.Params
	fetcher Fetcher

	// st is the host's politeness state; every rule on it is in package
	// politeness (pol), which the worker only calls.
	st       politeness.State
	attempts map[string]int
	// unresolvable holds, by host name, the "no such host" error seen in
	// this session: the name's other URLs end with it, unrequested.
	unresolvable map[string]string
	// crawlDelay is the largest robots.txt Crawl-delay seen for this queue.
	crawlDelay time.Duration
	// inlineRobots are the robots.txt answers kept in the host's state;
	// newRobots those fetched since the last commit, stored with the next.
	inlineRobots map[string]hostqueue.Robots
	newRobots    map[string]hostqueue.Robots
	// robotsItems are the origins whose robots.txt is stored apart.
	robotsItems map[string]bool
	// planned is when pace let the latest request start (Admission).
	planned time.Time
	// startAt is the earliest first request of a host new to the run
	// (Engine.Spread); zero for a host with a last fetch.
	startAt time.Time
	// dialed are the host names this session requested: their kept-alive
	// connections are closed when it ends (HostCloser).
	dialed map[string]bool
	// emptied: the session's last commit left the host's queue empty.
	emptied bool
	// grew, with Engine.Appends, is closed by the first append to the
	// host's queue after its last read (the session's load, or the latest
	// commit, each of which re-arms it first); unwatch stops watching.
	grew    <-chan struct{}
	unwatch func()
	// dupes answers copies of a URL from its fetch (dedupe.go).
	dupes dupes
	// lanes is set while a round is fetched over several connections, as
	// a HostRules rule allows (lanes.go); nil on the sequential path, the
	// one of every host without such a rule. laneEnds are the last
	// response ends of the latest such round's lanes, valid while the
	// host's last fetch is still laneMark.
	lanes    *laneSet
	laneEnds []time.Time
	laneMark time.Time
	// held are results a lane round fetched behind an entry that had to
	// wait, by entry id: handed over when their entries come up again
	// (lanes.go: handInOrder).
	held map[string]result.Result
	// doneRequesting, when set, gives the host's admitted rate back
	// (Admission) once the session will make no request any more; it
	// runs at most once, the session's end calling it too.
	doneRequesting func()
}

// outcome of processing one entry.
type outcome int

const (
	outDone   outcome = iota // a terminal result was produced
	outRetry                 // the entry stays queued; the host pauses
	outStop                  // the run must stop working this host now
	outGiveUp                // the host's failure run is over: end its queue
)

// roundEnd is what a fetched round leaves its worker to do.
type roundEnd int

const (
	// endNext: more is queued and known; the round is committed in the
	// background while the next one is fetched.
	endNext roundEnd = iota
	// endCommit: commit the round, then go on with the host (what follows
	// it is known only from the commit's answer).
	endCommit
	// endDrained: every entry ended and nothing else is queued: linger,
	// then commit, releasing the host unless URLs arrived meanwhile.
	endDrained
	// endRelease: leave the host now (the run or its lease ends, or the
	// output queue refused results): commit and release it.
	endRelease
	// endGiveUp: the host's failure run is over: end its whole queue.
	endGiveUp
)

// round is one batch of a host's queue as its worker works it.
type round struct {
	entries []hostqueue.Entry
	// ended are the entries with a result, handed over (see handOff).
	ended  []string
	handed *handed
	// out is why fetching stopped: outDone when every entry ended.
	out outcome
	// prevRefused: the output queue refused some results of the round
	// committed in the background meanwhile.
	prevRefused bool
	// drained: every entry ended and the store holds nothing more.
	drained bool
}

// work runs one host's session: rounds of up to HeadBatch URLs, each
// fetched, handed to the publisher and committed, until the host's queue
// is drained, the run or its lease ends, or the host is given up.
//
// Results are handed to the publisher as they are fetched (see handOff),
// and a round's commit waits for them: nothing leaves the queue before its
// result is out. The commit runs in the background while the next round is
// fetched (its entries are known: state is read two rounds deep), so a slow
// store or output queue never stretches the gap between two requests.
func (w *worker) work(ctx context.Context) error {
	w.rewatch()
	defer w.stopWatching()
	h, err := w.engine.Store.Load(ctx, w.key, 2*HeadBatch)
	if errors.Is(err, hostqueue.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !h.DueBy(w.engine.Clock.Now()) || w.placedElsewhere(ctx, h) {
		// Named by the due index but not due as stored: drained or moved
		// since the index was read (dynamo.Store.DueHosts judges hosts by
		// eventually consistent reads and by what it saw of them last),
		// or in another shard's hands (placedElsewhere).
		// Its entry, if it has one, finds it again.
		return nil
	}
	w.begin(h)
	defer w.closeConns()
	// inflight is the round still being committed; h the state after the
	// last finished commit.
	var inflight *background
	ho := &handOff{w: w}
	defer func() {
		if inflight != nil {
			inflight.wait()
		}
		ho.wait()
	}()
	for {
		if w.refreshDueNow(h) {
			// Due refreshes go between rounds, so a long queue does not
			// hold them back to the session's end; the round committing
			// in the background is finished first (refreshDue commits
			// the state it leaves).
			if inflight != nil {
				prev := inflight.wait()
				inflight = nil
				if prev.err != nil {
					return prev.err
				}
				if prev.refused {
					// Its unsent results stay queued: leave the host,
					// as a round does (finishRound).
					w.stopRequesting()
					w.remember(w.key, w.st.LastFetch)
					if _, err := w.commit(ctx, w.progress(nil, true)); err != nil {
						w.unrecorded.Store(true)
						return fmt.Errorf("commit the release of %s: %w", w.key, err)
					}
					return nil
				}
				h = prev.h
				w.inlineRobots, w.robotsItems = h.Robots, h.RobotsItems
			}
			stop := false
			if h, stop, err = w.refreshDue(ctx, h, ho); err != nil || stop {
				return err
			}
		}
		w.refreshParams(ctx)
		w.noteDupes(h.Head)
		r := &round{entries: next(h.Head, inflight.ids(), HeadBatch), handed: &handed{}}
		if err := w.fetchRound(ctx, r, ho); err != nil {
			return err
		}
		if inflight != nil {
			prev := inflight.wait()
			inflight = nil
			if prev.err != nil {
				return prev.err
			}
			h = prev.h
			w.inlineRobots, w.robotsItems = h.Robots, h.RobotsItems
			r.prevRefused = prev.refused
		}
		end := r.end(h)
		if end == endNext {
			inflight = w.commitInBackground(ctx, r.handed, r.ended)
			continue
		}
		if h, err = w.finishRound(ctx, r, end); err != nil || h == nil {
			return err
		}
	}
}

// begin takes the host's stored state as the session's.
func (w *worker) begin(h *hostqueue.Host) {
	if a := w.engine.Appends; a != nil {
		a.drained.forget(w.key)
	}
	w.notePending(w.key, h.Pending)
	w.fetcher = w.engine.Fetcher(w.p)
	w.st = h.State
	w.unresolvable = map[string]string{}
	if t := w.remembered(w.key); t.After(w.st.LastFetch) {
		w.st.LastFetch = t
	}
	w.inlineRobots, w.robotsItems = h.Robots, h.RobotsItems
	w.attempts = maps.Clone(h.Attempts)
	if w.attempts == nil {
		w.attempts = map[string]int{}
	}
	if w.st.LastFetch.IsZero() && w.st.PauseUntil.IsZero() {
		now := w.engine.Clock.Now()
		var wait time.Duration
		if spread := w.engine.Spread; spread != nil {
			wait = spread(w.fetchDelay())
		} else {
			wait = w.engine.starts.wait(now, w.fetchDelay())
		}
		w.startAt = now.Add(max(0, wait))
	}
}

// fetch performs one request through the session's fetcher, noting the
// host name whose connection the session leaves behind.
//
// sent is when the request really starts, once it has a request slot: the
// response's duration (the adaptive delay) and the admission's lateness
// count from then. A process behind its CPU queues its requests at the
// slots, so a start read before the wait would hide the lateness from the
// admission (3,295 of 10,000 hosts' workers waited there while it saw
// none) and charge the process's own queue to the host as a slow answer.
func (w *worker) fetch(ctx context.Context, req fetch.Request) (resp *fetch.Response, sent time.Time, err error) {
	if u, err := url.Parse(req.URL); err == nil && u.Hostname() != "" {
		if w.dialed == nil {
			w.dialed = map[string]bool{}
		}
		w.dialed[u.Hostname()] = true
	}
	ctx, unclaim, err := w.claimServer(ctx, req.URL)
	if err != nil {
		return nil, w.engine.Clock.Now(), &fetch.Error{Kind: fetch.KindCanceled, Op: "wait for the server's gate", URL: req.URL, Err: err}
	}
	defer unclaim()
	var release func()
	w.unlocked(func() { release, err = w.engine.requests.acquire(ctx, w.engine.Budget.Requests) })
	sent = w.engine.Clock.Now()
	if err != nil {
		return nil, sent, &fetch.Error{Kind: fetch.KindCanceled, Op: "wait for a request slot", URL: req.URL, Err: err}
	}
	defer release()
	// The wait may have eaten into the lease (the fencing of pace).
	if w.fenced() {
		return nil, sent, &fetch.Error{Kind: fetch.KindCanceled, Op: "wait for a request slot", URL: req.URL,
			Err: errors.New("the shard's lease would not outlive the request")}
	}
	if a := w.engine.Admission; a != nil && a.observe(sent, sent.Sub(w.planned)) {
		w.engine.room.signal()
	}
	resp, err = w.request(ctx, req)
	return resp, sent, err
}

// closeConns closes the connections the session kept alive to its host
// names when the host cannot be requested again before they would time out
// idle anyway (keepIdle: a back-off, a Retry-After, a long Crawl-delay), so
// they hold no descriptor and no place in the pool meanwhile. A host due
// again soon keeps its connection: URLs of a later input batch, or the
// next check, come back to it (closing every session's connection at its
// end made a third of 10,000 hosts connect twice). The pool stays within
// the budget whatever is kept: at the connection cap the fetcher closes
// the connection idle longest before it dials.
func (w *worker) closeConns() {
	c, ok := w.fetcher.(HostCloser)
	if !ok {
		return
	}
	finished := w.emptied && w.finished()
	next := w.st.Next(w.delay())
	if !finished && next.Sub(w.engine.Clock.Now()) < keepIdle {
		if a := w.engine.Appends; w.emptied && w.engine.Finished != nil && a != nil {
			// Kept for a later batch of the input, closed if none comes.
			a.drained.keep(w.key, c, slices.Collect(maps.Keys(w.dialed)))
		}
		return
	}
	w.closeDialed()
}

// closeDialed closes the kept-alive connections of the host names the
// session requested.
func (w *worker) closeDialed() {
	c, ok := w.fetcher.(HostCloser)
	if !ok {
		return
	}
	for name := range w.dialed {
		c.CloseHost(name)
	}
	clear(w.dialed)
}

// finished tells that no URL will be queued for the host any more
// (Engine.Finished).
// stopRequesting gives the session's admitted rate back: it makes no
// request any more.
func (w *worker) stopRequesting() {
	if w.doneRequesting != nil {
		w.doneRequesting()
	}
}

func (w *worker) finished() bool {
	return w.engine.Finished != nil && w.engine.Finished(w.key)
}

// refreshParams reads the parameters again (from the cache) each round, so
// a change reaches a long session within a round, not at its end.
func (w *worker) refreshParams(ctx context.Context) {
	if p := w.engine.Params(ctx); p != w.p {
		w.p, w.fetcher = p, w.engine.Fetcher(p)
		// A fetch made under other parameters (MaxBodyBytes, UserAgent,
		// robots) is not the one a copy would get now: copies from here
		// on are fetched again (a URL posted again after a change of
		// MaxBodyBytes came back whole from the lingering session's
		// first fetch).
		w.dupes.fetched, w.dupes.kept = nil, 0
	}
}

// fetchRound takes r's entries to results, in order, handing each over as
// it comes, until one must wait (r.out). It fetches nothing once the
// host's failure run has outlived its bound. ErrCrashed means an injected
// crash stopped the run.
func (w *worker) fetchRound(ctx context.Context, r *round, ho *handOff) error {
	if w.expired(w.engine.Clock.Now()) {
		r.out = outGiveUp
	}
	if r.out == outDone && w.laneRule() > 1 {
		// Only a host whose rule gives it several connections (lanes.go).
		return w.fetchLanes(ctx, r, ho)
	}
	// waiting are the origins whose entries wait this round: one failed
	// or is paused beyond the host's next request, while entries of other
	// origins behind it go on (State.Switch: failure runs per origin).
	// A commit removes only a prefix of the queue, so a result fetched
	// behind a waiting entry is kept (held) and handed over when its
	// entry comes up, or with the give-up that ends the waiting origin.
	var waiting map[string]bool
	for i, ent := range r.entries {
		if r.out != outDone {
			break
		}
		if res, ok := w.held[ent.ID]; ok {
			if len(waiting) > 0 {
				continue
			}
			delete(w.held, ent.ID)
			r.ended = append(r.ended, ent.ID)
			if !ho.add(ctx, r.handed, res) {
				return ErrCrashed
			}
			continue
		}
		o := originOfURL(ent.URL)
		if waiting[o] || w.originWaits(o, r.entries[i+1:], waiting) {
			if waiting == nil {
				waiting = map[string]bool{}
			}
			waiting[o] = true
			continue
		}
		res, out := w.processOnce(ctx, ent)
		if w.crash(CrashFetched, ent.ID) {
			return ErrCrashed
		}
		if out == outRetry && w.laterOrigins(o, r.entries[i+1:], waiting) {
			if waiting == nil {
				waiting = map[string]bool{}
			}
			waiting[o] = true
			continue
		}
		if out != outDone {
			r.out = out
			continue
		}
		if len(waiting) > 0 {
			if w.held == nil {
				w.held = map[string]result.Result{}
			}
			w.held[ent.ID] = res
			continue
		}
		r.ended = append(r.ended, ent.ID)
		if !ho.add(ctx, r.handed, res) {
			return ErrCrashed
		}
	}
	if len(waiting) > 0 && r.out == outDone {
		r.out = outRetry
	}
	if !ho.flush(ctx, r.handed) {
		return ErrCrashed
	}
	return nil
}

// originWaits tells whether an entry of origin o should wait this round:
// o is paused (its own back-off or Retry-After) beyond the host's next
// request, and an entry of another origin behind it may go first.
func (w *worker) originWaits(o string, rest []hostqueue.Entry, waiting map[string]bool) bool {
	slot := w.st.LastFetch.Add(w.delay())
	if now := w.engine.Clock.Now(); now.After(slot) {
		slot = now
	}
	if !w.st.PausedUntil(o).After(slot) {
		return false
	}
	return w.laterOrigins(o, rest, waiting)
}

// laterOrigins tells whether rest holds an entry of an origin other than
// o that does not wait and is not answered yet (held).
func (w *worker) laterOrigins(o string, rest []hostqueue.Entry, waiting map[string]bool) bool {
	for _, e := range rest {
		if _, ok := w.held[e.ID]; ok {
			continue
		}
		if eo := originOfURL(e.URL); eo != o && !waiting[eo] {
			return true
		}
	}
	return false
}

// useOrigin makes the failure run of raw's origin the worker's (see
// politeness.State.Switch): the rules that follow apply to that origin.
func (w *worker) useOrigin(raw string) {
	w.st.Switch(originOfURL(raw), w.engine.Clock.Now())
}

// originOfURL is raw's origin (scheme://host[:port]), "" if unparsable.
func originOfURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return originOf(u)
}

// end decides what the round leaves to do, h being the host's state after
// every commit before it. An entry that must wait stopped the round early,
// so a round with out != outDone is never drained (unless it was empty).
func (r *round) end(h *hostqueue.Host) roundEnd {
	// h still holds this round's entries: the round ends the queue when it
	// is done whole and nothing else is queued.
	r.drained = len(r.ended) == len(r.entries) && h.Pending <= len(r.entries)
	stop := r.out == outStop || r.prevRefused
	switch {
	case r.out == outGiveUp && !stop:
		return endGiveUp
	case r.drained && !stop:
		return endDrained
	case stop || r.out == outGiveUp || len(r.entries) == 0:
		return endRelease
	case len(next(h.Head, doneSet(r.ended), HeadBatch)) > 0:
		return endNext
	default:
		return endCommit
	}
}

// finishRound waits for the round's results to be out, then ends it as end
// says: given up, or committed (after lingering on a drained queue). It
// returns the host's state after the commit, or nil when the session is
// over.
func (w *worker) finishRound(ctx context.Context, r *round, end roundEnd) (*hostqueue.Host, error) {
	if end == endGiveUp || end == endRelease || (end == endDrained && w.finished()) {
		// No request follows, only the wait for the results to be out and
		// the commit: at 10,000 hosts a wave of sessions ending together
		// held the admission through thousands of queued commits, and the
		// process made 400-700 requests a second for two seconds while the
		// next hosts waited to be admitted.
		w.stopRequesting()
		if end == endDrained && w.finished() {
			// Nor will one ever come: its connections go now, not after
			// the wait and the commit, with their descriptors, buffers
			// and the transport's two goroutines each.
			w.closeDialed()
		}
	}
	done, refused := r.handed.wait()
	if refused {
		// Unsent results must stay queued: they will be fetched again.
		// Politeness state is still committed below.
		end, r.drained = endRelease, false
	}
	if end == endGiveUp {
		// No round is in flight and this one's results are out: they are
		// committed with the first batch of the given-up URLs.
		return nil, w.giveUp(ctx, nil, done)
	}
	if w.crash(CrashAfterPublish, w.key) {
		return nil, ErrCrashed
	}
	w.remember(w.key, w.st.LastFetch)
	// A host no URL will come to any more (Engine.Finished) has nothing
	// to linger for: it is released at once, its done URLs in the same
	// commit, and its worker slot, admission and connection go to a host
	// that waits.
	if end == endDrained && len(done) > 0 && !w.finished() {
		if w.engine.Appends != nil {
			// Where a session costs nothing (local mode), the done URLs are
			// committed before the linger, not after it: a crash while the
			// host lingers then fetches none of them again.
			w.rewatch()
			h, err := w.commit(ctx, w.progress(done, false))
			if err != nil {
				w.unrecorded.Store(true)
				return nil, fmt.Errorf("commit %d done urls: %w", len(done), err)
			}
			w.inlineRobots, w.robotsItems = h.Robots, h.RobotsItems
			done = nil
		}
		w.linger(ctx, len(r.entries))
	}
	if r.drained {
		// Every URL of the failure run has ended (by MaxAttempts): URLs
		// that come later get a bound of their own. The pause and
		// back-off stay: they are politeness.
		w.st.Drained()
	}
	// A batch that took the whole queue releases the host in the same
	// write (one write fewer per session); with Continue the store keeps
	// it with this worker if an ingest added URLs meanwhile.
	c := w.progress(done, end != endCommit)
	c.Continue = end == endDrained
	w.rewatch()
	h, err := w.commit(ctx, c)
	if err != nil {
		w.unrecorded.Store(true)
		return nil, fmt.Errorf("commit %d done urls: %w", len(done), err)
	}
	w.inlineRobots, w.robotsItems = h.Robots, h.RobotsItems
	w.notePending(w.key, h.Pending)
	if c.Release && (!c.Continue || h.Pending == 0) {
		w.emptied = h.Pending == 0
		return nil, nil
	}
	return h, nil
}

// ceilMilli rounds t up to a whole millisecond.
func ceilMilli(t time.Time) time.Time {
	if r := t.Truncate(time.Millisecond); r.Before(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

// progress is the commit of a round: its done entries and the worker's
// politeness state as of now (copied: the next round goes on changing it).
func (w *worker) progress(done []string, release bool) hostqueue.Commit {
	// The stores keep milliseconds: the last fetch is rounded up, so a
	// delay counted from the stored time is never a fraction short (a
	// server limiting at exactly our learned rate would see it).
	st := w.st
	st.LastFetch = ceilMilli(st.LastFetch)
	c := hostqueue.Commit{
		Done: done, State: st, Attempts: maps.Clone(w.attempts), Release: release, NextDue: w.nextDue(),
		Want: 2 * HeadBatch, IdleTTL: idleTTL, Robots: w.newRobots,
	}
	w.newRobots = nil
	return c
}

// background is a round being committed while the next one is fetched.
type background struct {
	done   map[string]bool
	result chan roundResult
}

type roundResult struct {
	h *hostqueue.Host
	// refused: the output queue did not take some results; they stay
	// queued (only those sent were marked done).
	refused bool
	err     error
}

func (b *background) ids() map[string]bool {
	if b == nil {
		return nil
	}
	return b.done
}

func (b *background) wait() roundResult { return <-b.result }

// commitInBackground commits a round once its results, handed over as they
// were fetched, are out (ended are its entries that have one), without
// holding up the next round.
func (w *worker) commitInBackground(ctx context.Context, rd *handed, ended []string) *background {
	w.remember(w.key, w.st.LastFetch)
	w.rewatch()
	c := w.progress(nil, false)
	b := &background{done: doneSet(ended), result: make(chan roundResult, 1)}
	go func() {
		var out roundResult
		defer func() { b.result <- out }()
		c.Done, out.refused = rd.wait()
		if w.crash(CrashAfterPublish, w.key) {
			out.err = ErrCrashed
			return
		}
		h, err := w.commit(ctx, c)
		if err != nil {
			w.unrecorded.Store(true)
			out.err = fmt.Errorf("commit %d done urls: %w", len(c.Done), err)
			return
		}
		out.h = h
	}()
	return b
}

// next returns up to n entries of head that are not in skip.
func next(head []hostqueue.Entry, skip map[string]bool, n int) []hostqueue.Entry {
	var out []hostqueue.Entry
	for _, e := range head {
		if len(out) == n {
			break
		}
		if !skip[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

func doneSet(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// LingerStep is how often a lingering worker looks whether it should stop
// waiting early.
const LingerStep = 250 * time.Millisecond

// keepIdle is how far off a host's next request may be for its session to
// leave its connection in the pool: less than the fetcher's idle timeout
// (fetch: 90 s), after which the connection would be gone anyway.
const keepIdle = time.Minute

// lingerWakeStep is LingerStep for a worker that Appends wakes.
const lingerWakeStep = time.Second

// LingerUntil is how long a worker whose host drained at now keeps it for
// late URLs: until the host's staggered check time, or the one after it
// when that is less than a period away, so late URLs get a whole period.
func LingerUntil(now time.Time, key string, period time.Duration) time.Time {
	until := hostqueue.NextHostCheck(now, key, period)
	if until.Sub(now) < period {
		until = until.Add(period)
	}
	return until
}

// linger keeps a host whose queue just drained with its worker until the
// host's next staggered check time (the reference formula) at least one
// CheckHostPeriod from now, so under two periods; then the commit that
// follows releases it or,
// when URLs arrived meanwhile, carries on with them. URLs that trickle in
// (an ingest batch after the one that activated the host) so join this
// session instead of paying for a new one: a session costs the due-index
// entry written at activation and removed at release, plus the release
// write, while a lingering host stays due with its index key untouched and
// its commit waits. Results are already out; only their removal from the
// store waits (a crash meanwhile means re-fetches, as between publishing and
// committing). The wait ends early when the run ends or its dispatcher has
// due hosts it has no room for, so lingering never holds a busy host back.
func (w *worker) linger(ctx context.Context, n int) {
	until := LingerUntil(w.engine.Clock.Now(), w.key, w.p.CheckHostPeriod)
	step := LingerStep
	if poll := w.engine.LingerPoll; poll > 0 {
		step = min(step, poll)
	}
	grew := w.grew
	if grew != nil {
		// Told of appends, the worker wakes only to see whether it is
		// wanted elsewhere: a timer per lingering host every 250 ms was 6%
		// of the CPU at 5,000 hosts.
		step = lingerWakeStep
		select {
		case <-grew:
			// URLs came after the last read of the queue: no need to wait,
			// nor to read it to find out.
			return
		default:
		}
	}
	var looked time.Time
	for {
		now := w.engine.Clock.Now()
		if !now.Before(until) || !now.Before(w.req.Until) || w.wanted() || w.crashed.Load() || ctx.Err() != nil {
			return
		}
		if poll := w.engine.LingerPoll; poll > 0 && now.Sub(looked) >= poll {
			looked = now
			if w.grown(ctx, n) {
				return
			}
		}
		wait := min(until.Sub(now), w.req.Until.Sub(now), step)
		if grew == nil {
			if w.engine.Clock.Sleep(ctx, wait) != nil {
				return
			}
			continue
		}
		// Told of appends, the worker needs no look at all unless a run
		// wants its slot: it sleeps on that level until the linger ends.
		// While the level is up for some other run's sake, and where
		// faults are injected (a crash must end the linger soon), it looks
		// every lingerWakeStep.
		var wanted <-chan struct{}
		if w.crashFn == nil && !w.engine.wanted.up() {
			wanted = w.engine.wanted.raised()
			wait = min(until.Sub(now), w.req.Until.Sub(now))
		}
		woke, err := sleepOrWake(ctx, w.engine.Clock, wait, grew, wanted)
		if err != nil {
			return
		}
		if woke {
			select {
			case <-grew:
				return
			default: // the wanted level rose: look again
			}
		}
	}
}

// sleepOrWake sleeps d on clock, or less when wake or also closes first
// (woke); a nil channel never does.
func sleepOrWake(ctx context.Context, clock Clock, d time.Duration, wake, also <-chan struct{}) (woke bool, err error) {
	if wc, ok := clock.(WakeClock); ok {
		return wc.SleepOrWake(ctx, d, wake, also)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(sctx, d) }()
	select {
	case <-wake:
	case <-also:
	case err := <-done:
		return false, err
	}
	cancel()
	<-done
	return true, nil
}

// rewatch starts watching the host's queue for appends anew, just before a
// read of it (Engine.Appends): what was appended before is in that read.
func (w *worker) rewatch() {
	a := w.engine.Appends
	if a == nil {
		return
	}
	w.stopWatching()
	w.grew, w.unwatch = a.watch(w.key)
}

func (w *worker) stopWatching() {
	if w.unwatch != nil {
		w.unwatch()
		w.grew, w.unwatch = nil, nil
	}
}

// grown reports whether the host's stored queue holds more than the n
// entries of the round just ended (they stay queued until the commit that
// follows the linger): URLs appended since. A failed read says no (the
// linger goes on, as without polling).
func (w *worker) grown(ctx context.Context, n int) bool {
	h, err := w.engine.Store.Load(ctx, w.key, 0)
	return err == nil && h.Pending > n
}

// commitRetry spaces out a worker's commit attempts: five in all, over a
// few seconds, well inside commit's own 20 s bound.
var commitRetry = backoff.Policy{Base: 200 * time.Millisecond, Max: 2 * time.Second, Attempts: 5}

// commit stores progress, retrying for a while: the results are already
// out, so a lost commit means duplicates, and a lost last-fetch time means
// the run must keep its leases to stay polite.
func (w *worker) commit(ctx context.Context, c hostqueue.Commit) (*hostqueue.Host, error) {
	// The commit must land even when the run's context is ending.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	policy := commitRetry
	policy.Sleep = w.engine.Clock.Sleep
	var h *hostqueue.Host
	err := policy.Retry(ctx, func(ctx context.Context) error {
		var err error
		h, err = w.engine.Store.Commit(ctx, w.key, c)
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// nextDue is when the host should be checked again after this run.
func (w *worker) nextDue() time.Time {
	st := w.st
	// The host is due when its first origin may be asked again.
	st.PauseUntil = st.EarliestPause()
	return NextDue(w.engine.Clock.Now(), w.key, w.p.CheckHostPeriod, st, w.delay())
}

// NextDue is when a host released at now with state st and this delay is
// checked next: its staggered check time (hostqueue.NextHostCheck), but
// never before the host may be requested again, so that a long
// Crawl-delay brings it back when its delay has passed, not sooner.
func NextDue(now time.Time, key string, period time.Duration, st politeness.State, delay time.Duration) time.Time {
	due := hostqueue.NextHostCheck(now, key, period)
	if next := st.Next(delay); next.After(due) {
		due = next
	}
	return due
}

// pol is the politeness policy of the current parameters for this host:
// its HostRules rule, if one matches, sets the base delay and the cap of
// the adaptive delays.
func (w *worker) pol() politeness.Policy {
	p := politeness.NewPolicy(w.p)
	p.FetchDelay = w.fetchDelay()
	if r, ok := w.hostRule(); ok && r.MaxDelay > 0 {
		p.MaxDelay = r.MaxDelay
	}
	return p
}

// delay is the pause between two requests to this host (see
// politeness.Policy.Delay). RandomizeDelay spreads FetchDelay only: the
// Crawl-delay and the delays the host taught are floors.
func (w *worker) delay() time.Duration {
	p := w.pol()
	if w.p.RandomizeDelay && p.FetchDelay > 0 {
		p.FetchDelay = time.Duration(float64(p.FetchDelay) * (0.5 + rand.Float64()))
	}
	return p.Delay(w.st, w.crawlDelay)
}

// pace waits until the host may be requested again. It returns outStop when
// the request could not finish before the run ends, or the shard's lease is
// gone, and outGiveUp (at the failure run's bound, or at once when the
// server asked for a pause beyond it) instead of a probe the bound forbids.
//
// A lane (lanes.go) paces from its own last response, and may find, once
// its wait is over, that another lane paused the host or ended the round
// meanwhile: it then waits again, or leaves its entry queued (outRetry).
// On the sequential path (w.lanes nil) pace waits once, as it always did.
func (w *worker) pace(ctx context.Context) outcome {
	for {
		out := w.paceOnce(ctx)
		if w.lanes == nil || out != outDone {
			return out
		}
		if out, again := w.laneWoke(); !again {
			return out
		}
	}
}

// paceOnce is one wait of pace: from the host's last response (a lane's
// own, see paceState) plus its delay, any pause, and the first request's
// spread.
func (w *worker) paceOnce(ctx context.Context) outcome {
	now := w.engine.Clock.Now()
	start := now
	if next := w.paceState().Next(w.delay()); next.After(start) {
		start = next
	}
	if w.startAt.After(start) {
		start = w.startAt
	}
	if !WaitsInPlace(w.st.LastFetch.Add(w.delay()), now) {
		// A long delay (Crawl-delay): release the host, due again at next.
		return outStop
	}
	if b, failing := w.bound(); failing && w.askedThisRun() {
		if w.st.PauseUntil.After(b) {
			return outGiveUp
		}
		if !start.Before(b) {
			if b.After(now) && !b.Before(w.req.Until) {
				return outStop
			}
			if err := w.sleep(ctx, b.Sub(now)); err != nil {
				return outStop
			}
			return outGiveUp
		}
	}
	if !start.Before(w.req.Until) {
		return outStop
	}
	if !w.req.Deadline.IsZero() && start.Add(w.p.FetchTimeout+CommitMargin).After(w.req.Deadline) {
		return outStop
	}
	w.planned = start
	if w.st.PauseUntil.Sub(now) >= yieldAfter {
		// A failing host waits out its back-off or Retry-After away from
		// its worker once due hosts wait for one: a host that never
		// answers would otherwise hold a slot for its whole session, a
		// probe per back-off step, while healthy hosts wait. Its pause is
		// stored with the release, and it is due again when it ends.
		if !w.waitOrYield(ctx, start) {
			return outStop
		}
	} else if err := w.sleep(ctx, start.Sub(now)); err != nil {
		return outStop
	}
	if w.fenced() {
		return outStop
	}
	return outDone
}

// fenced reports that no request may start now: the run crashed, or the
// shard's lease would not outlive the request and the delay after it, so a
// successor that takes the shard over after expiry keeps the delay even if
// this run dies mid-request.
func (w *worker) fenced() bool {
	return w.crashed.Load() || !LeaseFences(w.leaseLeft(w.vshard), w.p.FetchTimeout, w.delay())
}

// recordStart stores, before a request to a host whose delay the lease
// does not fence (longer than fenceDelay), the latest time its response
// can end as the host's last fetch (see fenceDelay). false when the write
// failed: the request is not made.
func (w *worker) recordStart(ctx context.Context) bool {
	if w.delay() <= fenceDelay {
		return true
	}
	c := w.progress(nil, false)
	// As a pause, not a last fetch: the store only moves a last fetch
	// forward, while the next commit replaces the pause with the real
	// state, so without a crash the delay counts from the real end.
	c.PauseUntil = ceilMilli(w.engine.Clock.Now().Add(w.p.FetchTimeout + w.delay()))
	// A failing host's recorded start never outlasts its failure run's
	// bound: a successor after a crash would take a pause beyond it for a
	// server's Retry-After and give the host up at once. At the bound it
	// gives up without a request anyway, so the cap lets nothing come early.
	if b, failing := w.pol().Bound(w.st); failing && c.PauseUntil.After(b) {
		c.PauseUntil = b
	}
	if w.st.PauseUntil.After(c.PauseUntil) {
		c.PauseUntil = w.st.PauseUntil
	}
	h, err := w.commit(ctx, c)
	if err != nil {
		w.engine.Log.ErrorContext(ctx, "record a request start: request not made", "host", w.key, "error", err)
		w.errs.Add(1)
		return false
	}
	w.inlineRobots, w.robotsItems = h.Robots, h.RobotsItems
	return true
}

// waitOrYield waits until t, looking every LingerStep whether due hosts
// wait for a worker slot; false when they do (the worker gives its slot up)
// or ctx ends.
func (w *worker) waitOrYield(ctx context.Context, t time.Time) bool {
	for {
		if w.wanted() {
			return false
		}
		now := w.engine.Clock.Now()
		if !now.Before(t) {
			return true
		}
		if w.sleep(ctx, min(t.Sub(now), LingerStep)) != nil {
			return false
		}
	}
}

// process takes one entry to a terminal result, or decides it must wait.
func (w *worker) process(ctx context.Context, ent hostqueue.Entry) (result.Result, outcome) {
	target := ent.URL
	seen := map[string]bool{target: true}
	for hop := 0; ; hop++ {
		if res, ok := w.unresolved(ent, target, hop); ok {
			return res, outDone
		}
		w.useOrigin(target)
		if w.expired(w.engine.Clock.Now()) {
			return result.Result{}, outGiveUp
		}
		if w.p.RespectRobots {
			pol, out := w.policyFor(ctx, target)
			if out != outDone {
				return result.Result{}, out
			}
			// robots.txt may have found that the name does not resolve.
			if res, ok := w.unresolved(ent, target, hop); ok {
				return res, outDone
			}
			if why := w.robotsVerdict(pol, target); why != "" {
				w.engine.Metrics.Add(metrics.RobotsDenials, 1)
				return result.Result{ID: ent.ID, Host: hostOf(ent.URL), URL: ent.URL, Status: result.StatusDenied,
					Error: why, FetchedAt: w.engine.Clock.Now().UTC(), Location: locationIf(hop > 0, target)}, outDone
			}
			if pol != nil && pol.rules != nil {
				w.crawlDelay = max(w.crawlDelay, pol.rules.CrawlDelay(w.p.UserAgent))
			}
		}
		ready := w.engine.Clock.Now()
		if out := w.pace(ctx); out != outDone {
			return result.Result{}, out
		}
		req := w.pageRequest(target)
		// The validators go with the request to the URL they were
		// recorded for (ent.ValidatorsFor), once: spent, they are neither
		// sent again nor queued with a cross-host target (see redirect).
		if target == ent.ValidatorsFor() {
			req.ETag, req.LastModified = ent.ETag, ent.LastModified
			ent.ETag, ent.LastModified, ent.ValidatorsURL = "", "", ""
		}
		if !w.recordStart(ctx) {
			return result.Result{}, outStop
		}
		w.engine.Metrics.AddDuration(metrics.PolitenessWait, w.engine.Clock.Now().Sub(ready))
		resp, sent, err := w.fetch(ctx, req)
		// Another lane may have worked another origin meanwhile.
		w.useOrigin(target)
		w.st.Fetched(w.engine.Clock.Now())
		w.remember(w.key, w.st.LastFetch)
		w.countRequest(err)
		w.fetchMetrics(sent, resp, err)
		res := result.Result{ID: ent.ID, Host: hostOf(ent.URL), URL: ent.URL, FetchedAt: w.st.LastFetch.UTC(), Location: locationIf(hop > 0, target)}
		if err != nil {
			switch {
			case fetch.KindOf(err) == fetch.KindCanceled:
				return res, outStop
			case fetch.KindOf(err) == fetch.KindLocal:
				w.localError(ctx, err)
				return res, outStop
			case fetch.KindOf(err) == fetch.KindDenied:
				res.Status, res.Error = result.StatusDenied, err.Error()
				return res, outDone
			case notFound(err):
				w.unresolvable[hostname(target)] = err.Error()
				res.Status, res.Error = result.StatusFetchError, err.Error()
				res.Attempts = w.attempts[ent.ID] + 1
				return res, outDone
			case fetch.IsTransient(err) || fetch.KindOf(err) == fetch.KindTLS:
				return w.failed(ent, res, err.Error(), nil)
			default:
				// A protocol error or a bad URL: final for this URL, and
				// neither a failure nor a usable answer of the host.
				res.Status, res.Error = result.StatusFetchError, err.Error()
				res.Attempts = w.attempts[ent.ID] + 1
				return res, outDone
			}
		}
		res.HTTPStatus, res.ContentType = resp.HTTPStatus, resp.ContentType
		res.ContentEncoding = resp.Encoding
		res.Warc = resp.Warc
		res.ETag, res.LastModified, res.ValidatorsURL = answerValidators(req, resp, hop)
		code := resp.HTTPStatus
		if usable(code) {
			w.answered(w.st.LastFetch.Sub(sent))
		}
		switch {
		case code >= 200 && code < 300:
			res.Status = result.StatusFetched
			if err := w.keepBody(ctx, &res, resp); err != nil {
				w.localError(ctx, fmt.Errorf("keep body of %s: %w", target, err))
				return res, outStop
			}
			res.Truncated = resp.Truncated
			res.Attempts = w.attempts[ent.ID] + 1
			return res, outDone
		case code == http.StatusNotModified:
			res.Status = result.StatusNotModified
			res.Attempts = w.attempts[ent.ID] + 1
			return res, outDone
		case code >= 300 && code < 400 && code != http.StatusNotModified:
			next, ok, r := w.redirect(ctx, ent, res, resp, seen, hop)
			if !ok {
				return r, outDone
			}
			target = next
			seen[next] = true
		case !usable(code):
			return w.failed(ent, res, fmt.Sprintf("server answered %d", code), resp)
		default:
			res.Status, res.Error = result.StatusFetchError, fmt.Sprintf("server answered %d", code)
			res.Attempts = w.attempts[ent.ID] + 1
			return res, outDone
		}
	}
}

// fetchMetrics records one request sent at sent: its count, its latency
// and its body's bytes. A request this process could not make
// (fetch.KindLocal) or that was cancelled before an answer is not one.
func (w *worker) fetchMetrics(sent time.Time, resp *fetch.Response, err error) {
	if k := fetch.KindOf(err); err != nil && (k == fetch.KindLocal || k == fetch.KindCanceled) {
		return
	}
	m := w.engine.Metrics
	m.Add(metrics.Requests, 1)
	m.AddDuration(metrics.FetchLatency, w.st.LastFetch.Sub(sent))
	if resp != nil {
		m.Add(metrics.BytesFetched, float64(resp.Size()))
	}
}

// localError records a request this process could not make for want of
// its own resources (fetch.KindLocal: descriptors, the connection cap). The
// host is not to blame: no failure is counted against it or the URL, which
// stays queued; the worker stops (the caller returns outStop) so the
// process sheds load, and the run reports the error as its own.
func (w *worker) localError(ctx context.Context, err error) {
	w.local.Add(1)
	w.errs.Add(1)
	w.engine.Log.ErrorContext(ctx, "out of local resources: request not made, url stays queued", "host", w.key, "error", err)
}

// failed handles a request to a page that got no usable answer: the host's
// failure run goes on (see fail), and the entry is retried until
// MaxAttempts.
func (w *worker) failed(ent hostqueue.Entry, res result.Result, msg string, resp *fetch.Response) (result.Result, outcome) {
	w.fail(msg, resp)
	w.attempts[ent.ID]++
	n := w.attempts[ent.ID]
	if n >= w.p.MaxAttempts {
		delete(w.attempts, ent.ID)
		res.Status, res.Error, res.Attempts = result.StatusFetchError, msg, n
		return res, outDone
	}
	return res, outRetry
}

// redirect decides a 3xx: a same-host hop is followed (paced like any
// request); a hop to another host ends this URL as "redirect" and queues the
// target on its own host, where that host's delay and robots apply, with
// the hops taken so far. The hop that would be the sixth in all, counted
// from the URL's own Hops, ends it as fetch_error.
func (w *worker) redirect(ctx context.Context, ent hostqueue.Entry, res result.Result, resp *fetch.Response, seen map[string]bool, hop int) (string, bool, result.Result) {
	if resp.Location == "" {
		res.Status, res.Error = result.StatusFetchError, fmt.Sprintf("server answered %d without a usable Location", resp.HTTPStatus)
		return "", false, res
	}
	u, err := urlmsg.Normalize(resp.Location)
	if err != nil {
		res.Status, res.Location = result.StatusFetchError, resp.Location
		res.Error = fmt.Sprintf("redirect to an unacceptable url: %v", err)
		return "", false, res
	}
	loc := u.String()
	res.Location = loc
	if seen[loc] {
		res.Status, res.Error = result.StatusFetchError, fmt.Sprintf("redirect loop at %s", loc)
		return "", false, res
	}
	hops := ent.Hops + hop + 1
	if hops > maxRedirects {
		res.Status, res.Error = result.StatusFetchError, fmt.Sprintf("more than %d redirects", maxRedirects)
		return "", false, res
	}
	if u.Host == hostOf(ent.URL) {
		return loc, true, res
	}
	res.Status = result.StatusRedirect
	if w.p.FollowCrossHostRedirects {
		key := hostqueue.QueueKey(u.Host, w.p.QueueMode == params.QueueByDomain)
		_, err := w.engine.Store.Append(ctx, hostqueue.AppendRequest{
			Key:     key,
			Entries: []hostqueue.Entry{carryValidators(ent, hostqueue.Entry{ID: urlmsg.MakeID(ent.ID, 0, loc), URL: loc, Hops: hops})},
			Limit:   w.p.PersistLimit,
			Due:     w.engine.Clock.Now(),
			OnEvict: func(ctx context.Context, ev []hostqueue.Entry) error {
				return w.engine.Publisher.Publish(ctx, hostqueue.Dropped(key, ev, w.engine.Clock.Now(), w.p.PersistLimit))
			},
		})
		if err != nil {
			res.Error = fmt.Sprintf("redirect target not queued: %v", err)
		}
	}
	return "", false, res
}

// unresolved ends an entry whose target's host name was found, in this
// session, not to resolve: one lookup answers for every URL of the name
// (DNS caches the answer anyway), and none of them is requested.
func (w *worker) unresolved(ent hostqueue.Entry, target string, hop int) (result.Result, bool) {
	name := hostname(target)
	why, ok := w.unresolvable[name]
	if !ok {
		return result.Result{}, false
	}
	return result.Result{
		ID: ent.ID, Host: hostOf(ent.URL), URL: ent.URL, Status: result.StatusFetchError,
		Error:     fmt.Sprintf("not requested: host name %s does not resolve: %s", name, why),
		FetchedAt: w.engine.Clock.Now().UTC(), Attempts: w.attempts[ent.ID], Location: locationIf(hop > 0, target),
	}, true
}

// notFound tells a name that does not exist (final) from a DNS failure
// that may pass (transient, a failure of the host).
func notFound(err error) bool {
	return fetch.KindOf(err) == fetch.KindDNS && !fetch.IsTransient(err)
}

func hostname(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Hostname()
	}
	return ""
}

func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return ""
}

func locationIf(ok bool, loc string) string {
	if ok {
		return loc
	}
	return ""
}
