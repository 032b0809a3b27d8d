package engine

import (
	"context"
	"fmt"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// Refreshing URLs (docs/refresh.md). A session fetches its host's
// refreshing URLs that are due (at its start, and between rounds of its
// queue whenever one has fallen due since), each conditionally on its last answer's
// validators and paced like any request, applies package refresh's rules
// (what to emit, the next due time) and commits their new schedules once
// the results sent are out; then it works the queue on. A stop, a
// robots.txt (or other) denial and GiveUpAfter end a schedule with a
// final result.

// refreshChange is one refreshing URL's new state, committed once its
// result (if it has one) is out.
type refreshChange struct {
	r       hostqueue.Refresh
	end     bool
	emitted bool
}

// refreshDue works h's refreshing URLs due by now and commits them. It
// returns the host's state after the commit, and stop when the session
// must end there (the run stops, the host is given up, or the output
// queue refused results); the commit then released the host.
func (w *worker) refreshDue(ctx context.Context, h *hostqueue.Host, ho *handOff) (*hostqueue.Host, bool, error) {
	now := w.engine.Clock.Now()
	var due []hostqueue.Refresh
	for _, r := range h.Refreshes {
		if r.Stop || !r.Due.After(now) {
			due = append(due, r)
		}
	}
	if len(due) == 0 {
		return h, false, nil
	}
	bounds := refresh.Bounds{Min: w.p.MinRefresh, Max: w.p.MaxRefresh}
	rd := &handed{}
	var changes []refreshChange
	emit := func(res result.Result) bool { return ho.add(ctx, rd, res) }
	stop, givenUp := false, false
	for _, r := range due {
		if r.Stop {
			changes = append(changes, refreshChange{r: r, end: true, emitted: true})
			if !emit(w.ended(r, result.StatusStopped, "")) {
				return nil, true, ErrCrashed
			}
			continue
		}
		res, out := w.process(ctx, r.Entry())
		if out == outGiveUp {
			// Every schedule of the host ends with it, as its queue
			// does, loaded or not: giveUp below.
			givenUp = true
			break
		}
		if out == outRetry {
			// Still due: the host's pause brings it back.
			continue
		}
		if out != outDone {
			stop = true
			break
		}
		// A usable answer, or the last attempt: its failures are spent.
		delete(w.attempts, r.ID)
		at := w.engine.Clock.Now()
		d := r.After(res, at, bounds)
		w.engine.Metrics.AddDuration(metrics.RefreshLag, d.Lag)
		if f := w.engine.OnRefetch; f != nil {
			f(d.Lag)
		}
		next := r
		next.Schedule = d.Next
		final := res.Status == result.StatusDenied
		changes = append(changes, refreshChange{r: next, end: final, emitted: d.Emit})
		if d.Emit {
			d.Decorate(&res)
			res.Final = final
			if !emit(res) {
				return nil, true, ErrCrashed
			}
		}
	}
	if !ho.flush(ctx, rd) {
		return nil, true, ErrCrashed
	}
	done, refused := rd.wait()
	sent := doneSet(done)
	w.remember(w.key, w.st.LastFetch)
	c := w.progress(nil, stop || refused)
	if givenUp && refused {
		c.Release = true
	}
	for _, ch := range changes {
		if ch.emitted && !sent[ch.r.ID] {
			// Its result is not out: fetched again next time.
			continue
		}
		if ch.end {
			c.RefreshEnded = append(c.RefreshEnded, ch.r.URL)
		} else {
			c.Refreshed = append(c.Refreshed, ch.r)
		}
	}
	w.rewatch()
	h, err := w.commit(ctx, c)
	if err != nil {
		w.unrecorded.Store(true)
		return nil, true, fmt.Errorf("commit %d refetched urls: %w", len(changes), err)
	}
	w.inlineRobots, w.robotsItems = h.Robots, h.RobotsItems
	if givenUp && !refused {
		return nil, true, w.giveUp(ctx, nil, nil)
	}
	return h, stop || refused, nil
}

// refreshDueNow reports whether h holds a refreshing URL due now (or a
// stop): h.Refreshes are its earliest, so the first one tells.
func (w *worker) refreshDueNow(h *hostqueue.Host) bool {
	return len(h.Refreshes) > 0 && (h.Refreshes[0].Stop || !h.Refreshes[0].Due.After(w.engine.Clock.Now()))
}

// ended is a schedule's final result: stopped, or given up.
func (w *worker) ended(r hostqueue.Refresh, st result.Status, why string) result.Result {
	return result.Result{ID: r.ID, Host: hostOf(r.URL), URL: r.URL, Status: st, Error: why,
		FetchedAt: w.engine.Clock.Now().UTC(), Seq: r.FinalSeq(), Final: true}
}
