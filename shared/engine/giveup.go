package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// A host's failure run and its end.
//
// A request that gets no usable answer (connection refused or reset, a
// timeout, a TLS failure, a temporary DNS failure, 5xx, 429 or 408 on a
// page; robots.txt 5xx, 429 or unreachable) is a failure: the first one of a
// run sets the host's FailingSince, each one its LastError and Errors, and
// the host backs off (FetchDelay x 2^Errors, capped by MaxBackoff and by the
// run's bound) or pauses as the server's Retry-After says. While it fails,
// the host is probed by one request per back-off step: the head URL (or
// robots.txt) is tried again, never every queued URL. A URL whose own
// MaxAttempts run out ends as fetch_error; robots.txt failures count against
// no URL.
//
// A usable answer (any HTTP answer to a page that is not 5xx, 429 or 408,
// 3xx and 4xx included; a robots.txt 2xx or 4xx) ends the run. So does a
// queue that drains, so URLs that arrive later get a bound of their own.
//
// When the run has lasted GiveUpAfter (FailingSince + GiveUpAfter has
// passed; no probe starts at or after it), or the server asked for a pause
// that ends beyond it, and a request made in the current run failed (a run:
// Engine.RunStart's process in local mode, one check invocation on AWS),
// the host gives up. A failure run that outlasted its bound while nothing
// ran (a stop, and the same command a while later) gets one probe first:
// the host may answer now; if it fails, the host gives up at once. So a
// deployment whose runs come further apart than GiveUpAfter makes one
// probe per run and never probes forever. Giving up, every URL queued at
// that moment ends at once, in rounds of GiveUpBatch results published
// and then committed as done, without a request. A URL ends as
// fetch_error, or as denied when the last failure was robots.txt (RFC 9309 §2.3.1.4: an
// unreachable robots.txt means complete disallow); its error says for how
// long and how many requests the host failed and what the last failure was,
// and its attempts are its own failed requests. The last round releases the
// host and clears its failure run, pause and error count, so URLs that
// arrive during or after the give-up start afresh. Other failures are
// neutral: an address-guard refusal ends its URL as denied, a protocol
// error its URL as fetch_error, and a name that does not resolve ends its
// URL as fetch_error and every other URL of that name in the session
// without a lookup of its own (see worker.unresolved).

// GiveUpBatch is how many queued URLs one give-up round ends: one publish
// (sent as SQS batches side by side) and one store write.
const GiveUpBatch = 100

// allEntries asks Store.Load for the whole queue (PersistLimit bounds it).
const allEntries = 1 << 30

// robotsFailure prefixes LastError when robots.txt could not be read, so a
// give-up, in this run or a later one, knows to answer denied.
const robotsFailure = "robots.txt: "

// bound is when the host's failure run reaches GiveUpAfter; false when the
// host is not failing.
func (w *worker) bound() (time.Time, bool) { return w.pol().Bound(w.st) }

// expired reports whether the host must give up now: its failure run has
// lasted GiveUpAfter, or the server asked for a pause beyond that, and a
// request of this run failed (politeness.Policy.GivesUp).
func (w *worker) expired(now time.Time) bool {
	return w.pol().GivesUp(w.st, now, w.runStart())
}

// askedThisRun reports whether the host is failing and its latest request,
// which failed, was made in this run: only then may its bound give it up.
func (w *worker) askedThisRun() bool { return w.pol().AskedSince(w.st, w.runStart()) }

// runStart is when the run began that a give-up needs a failed request of:
// Engine.RunStart (local mode: the process), else this check invocation.
func (w *worker) runStart() time.Time {
	if !w.engine.RunStart.IsZero() {
		return w.engine.RunStart
	}
	return w.start
}

// fail records a request that got no usable answer: msg says what
// happened, resp is the answer when there was one (its Retry-After, on a
// 429 or 503, sets the pause; a 429 or 503 without one also raises the
// host's own delay; otherwise the host backs off, no further than the
// failure run's bound so the give-up is not late). The rules are
// politeness.Policy's Refused and Failed.
func (w *worker) fail(msg string, resp *fetch.Response) {
	now := w.engine.Clock.Now()
	if resp != nil {
		w.pol().Refused(&w.st, now, msg, resp.HTTPStatus, resp.RetryAfter, resp.RetryAfterSet)
		return
	}
	w.pol().Failed(&w.st, now, msg)
}

// answered records a usable answer that took took: the failure run and
// back-off end, and the delays the host taught follow it.
func (w *worker) answered(took time.Duration) {
	w.pol().Answered(&w.st, w.engine.Clock.Now(), took)
}

// usable tells whether an HTTP status is a usable answer from the host.
func usable(code int) bool {
	return code < 500 && code != http.StatusTooManyRequests && code != http.StatusRequestTimeout
}

// verdict is the status and error of the URLs a host gives up.
func (w *worker) verdict(now time.Time) (result.Status, string) {
	b, _ := w.bound()
	var why string
	if w.st.PauseUntil.After(b) {
		why = fmt.Sprintf("host asked for a pause of %s (Retry-After), beyond GiveUpAfter %s from its first failure (%d attempts); last: %s",
			roundDuration(w.st.PauseUntil.Sub(w.st.LastFetch)), w.p.GiveUpAfter, w.st.Errors, w.st.LastError)
	} else {
		why = fmt.Sprintf("host gave no usable answer for %s (%d attempts); last: %s",
			roundDuration(now.Sub(w.st.FailingSince)), w.st.Errors, w.st.LastError)
	}
	if strings.HasPrefix(w.st.LastError, robotsFailure) {
		return result.StatusDenied, why + "; robots.txt could not be read, which means complete disallow (RFC 9309 2.3.1.4)"
	}
	return result.StatusFetchError, why
}

// roundDuration keeps a duration readable in an error message.
func roundDuration(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(10 * time.Millisecond)
}

// giveUp ends every URL queued for the host (see the comment at the top of
// this file). results and done are the round that was under way: they are
// published and committed with the first batch. The queue is read whole
// first, so URLs appended meanwhile are not given up: the last commit finds
// them queued and leaves them, due again, for a new failure run. A walk cut
// short (the run ends, publishing fails) releases the host with its run
// intact, so the next session goes on giving up.
func (w *worker) giveUp(ctx context.Context, results []result.Result, done []string) error {
	now := w.engine.Clock.Now()
	status, why := w.verdict(now)
	h, err := w.engine.Store.Load(ctx, w.key, allEntries)
	if err != nil && !errors.Is(err, hostqueue.ErrNotFound) {
		return fmt.Errorf("read the queue of %s to give it up: %w", w.key, err)
	}
	skip := doneSet(done)
	// Only the failing origin's URLs are given up: the host's other
	// origins have failure runs of their own (politeness.State.Switch).
	origin := w.st.Origin
	var queue []hostqueue.Entry
	if h != nil {
		for _, ent := range h.Head {
			if !skip[ent.ID] && (origin == "" || originOfURL(ent.URL) == origin) {
				queue = append(queue, ent)
			}
		}
	}
	// The host's refreshing URLs of the origin end too, each with its
	// final result, in the last batch (MaxRefreshPerHost bounds them).
	var ends []result.Result
	var ended []string
	if h != nil {
		for _, r := range h.Refreshes {
			if origin == "" || originOfURL(r.URL) == origin {
				res := w.ended(r, status, why)
				res.Attempts = w.attempts[r.ID]
				ends, ended = append(ends, res), append(ended, r.URL)
			}
		}
	}
	var given []string
	w.engine.Metrics.Add(metrics.GiveUps, 1)
	w.engine.Log.InfoContext(ctx, "giving up host", "host", w.key, "origin", origin, "urls", len(queue), "refreshing", len(ends), "status", status, "error", why)
	for {
		n := min(GiveUpBatch, len(queue))
		rs, ids := results, done
		results, done = nil, nil
		for _, ent := range queue[:n] {
			rs = append(rs, result.Result{
				ID: ent.ID, Host: hostOf(ent.URL), URL: ent.URL, Status: status, Error: why,
				FetchedAt: now.UTC(), Attempts: w.attempts[ent.ID],
			})
			ids = append(ids, ent.ID)
			given = append(given, ent.ID)
		}
		queue = queue[n:]
		if len(queue) == 0 {
			rs, ids = w.heldBehind(h, origin, rs, ids, skip, given)
			rs = append(rs, ends...)
		}
		if w.crash(CrashBeforePublish, w.key) {
			return ErrCrashed
		}
		if err := w.engine.Publisher.Publish(ctx, rs); err != nil {
			w.engine.Log.ErrorContext(ctx, "publish given-up results", "host", w.key, "count", len(rs), "error", err)
			w.errs.Add(1)
			_, err := w.commit(ctx, w.walkCommit(nil, true))
			return err
		}
		w.count(rs)
		if w.crash(CrashAfterPublish, w.key) {
			return ErrCrashed
		}
		var c hostqueue.Commit
		last := len(queue) == 0
		if last {
			w.st.GivenUp()
			// The other origins' URLs keep their attempts.
			for _, id := range given {
				delete(w.attempts, id)
			}
			for _, r := range ends {
				delete(w.attempts, r.ID)
			}
			c = w.walkCommit(ids, true)
			c.RefreshEnded = ended
		} else {
			c = w.walkCommit(ids, !w.mayWalkOn(ctx))
		}
		if _, err := w.commit(ctx, c); err != nil {
			w.unrecorded.Store(true)
			return fmt.Errorf("commit %d given-up urls: %w", len(ids), err)
		}
		if c.Release {
			return nil
		}
		now = w.engine.Clock.Now()
	}
}

// heldBehind adds to the give-up's last round the results of other
// origins' entries fetched behind the given-up ones (held: see fetchRound)
// that the round's commit can remove: those with nothing but given-up,
// done or such entries before them in the queue (a commit removes only a
// prefix).
func (w *worker) heldBehind(h *hostqueue.Host, origin string, rs []result.Result, ids []string, done map[string]bool, given []string) ([]result.Result, []string) {
	if h == nil || origin == "" || len(w.held) == 0 {
		return rs, ids
	}
	gone := doneSet(given)
	for _, ent := range h.Head {
		if done[ent.ID] || gone[ent.ID] {
			continue
		}
		res, ok := w.held[ent.ID]
		if !ok {
			break
		}
		delete(w.held, ent.ID)
		rs, ids = append(rs, res), append(ids, ent.ID)
	}
	return rs, ids
}

// walkCommit is a give-up round's commit; it needs no head entries back.
func (w *worker) walkCommit(done []string, release bool) hostqueue.Commit {
	c := w.progress(done, release)
	c.Want = 0
	return c
}

// mayWalkOn tells whether a give-up may start another round: as long as a
// request started by this run could still be running, and the lease holds.
func (w *worker) mayWalkOn(ctx context.Context) bool {
	now := w.engine.Clock.Now()
	if ctx.Err() != nil || !now.Before(w.req.Until.Add(w.p.FetchTimeout)) {
		return false
	}
	if !w.req.Deadline.IsZero() && !now.Add(CommitMargin).Before(w.req.Deadline) {
		return false
	}
	return !w.crashed.Load() && w.leaseLeft(w.vshard) > CommitMargin
}
