package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/backoff"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// This file learns the outcome of host-item writes whose answer was not a
// success (the protocol is described at the top of store.go).

// ErrOutcomeUnknown is returned when a write's answer was lost and the
// store could not learn whether DynamoDB applied it. Nothing the write may
// have made referenced was deleted. The caller may retry; an append may
// then queue its entries twice.
var ErrOutcomeUnknown = errors.New("outcome of the write unknown")

// nonceHistory is how many writes' nonces a host item keeps, newest first:
// a write's outcome is known exactly as long as fewer writes than this
// landed on top of it before it is read back.
const nonceHistory = 4

// maxErrorRetries bounds the store's own retries of a host write that
// ended in an error rather than a failed condition: the SDK has already
// retried it, so a persistent fault ends the call soon.
const maxErrorRetries = 2

// retryWait spaces the attempts of one host write, so that contending
// writers spread out instead of colliding again. Before attempt n+1 it
// waits between half and one and a half times 2^n ms (at most 96 ms):
// the store's waits from before it used package backoff, kept as they
// were rather than the helper's default full jitter, whose waits from
// zero would change how racing ingests and checks space out.
var retryWait = backoff.Policy{
	Base: 3 * time.Millisecond,
	Max:  96 * time.Millisecond,
	// From a third of the step's cap to all of it.
	Jitter: func(c time.Duration) time.Duration { return c/3 + rand.N(2*c/3) },
}

// settleTimeout bounds the read that learns a write's outcome (see
// settling), unless the Store's SettleTimeout says otherwise.
const settleTimeout = 5 * time.Second

// hostWrite is one conditional write of a host item, kept until its
// outcome is known.
type hostWrite struct {
	next *hostItem // the item as written; next.Nonces[0] is the write's nonce
	prev int64     // the version it is conditioned on; 0: no item yet
	// spilled are the chunks written for it, referenced only if it lands;
	// dead those it stops referencing, nobody's once it lands.
	spilled, dead []string
	// appended is what an append returns when this write lands; collect
	// marks a commit that drains the queue (orphans are collected then).
	appended hostqueue.AppendResult
	collect  bool
	// refresh is its change to the host's refresh items, written in one
	// transaction with it (refresh.go); nil: none.
	refresh *refreshChange
}

func (w *hostWrite) nonce() string { return w.next.Nonces[0] }

// verdict is what the store knows about a write after reading the item.
type verdict int

const (
	// landed: the write was applied.
	landed verdict = iota
	// lost: it was not, and never will be: another write took the version
	// it expected, or the item it expected is gone.
	lost
	// pending: not applied yet; the item is still at the version the write
	// expected, so a request of it still in flight could apply it later.
	pending
	// unknown: more writes followed the version it expected than the item
	// remembers, and the item references none of the chunks it wrote.
	// Those chunks are nobody's now, whether or not it landed.
	unknown
)

// judge tells what became of w, from cur, the item read after w's answer.
func judge(cur *hostItem, w *hostWrite) verdict {
	if cur == nil {
		if w.prev == 0 {
			return pending
		}
		return lost
	}
	if cur.Version <= w.prev {
		return pending
	}
	// Versions only grow while an item lives: the write that made
	// version prev+1 is the back-th before the latest.
	back := cur.Version - w.prev - 1
	if back < int64(len(cur.Nonces)) {
		if cur.Nonces[back] == w.nonce() {
			return landed
		}
		return lost
	}
	// Too far back to tell by nonce; a chunk only this write wrote is
	// referenced only if it landed (later writers carry references over).
	for _, c := range cur.Chunks {
		if slices.Contains(w.spilled, chunkPrefix+c.ID) {
			return landed
		}
	}
	return unknown
}

// settling returns the context of a read that learns a write's outcome:
// it goes on when ctx has ended (a cancelled request is one of the ways an
// answer gets lost), for at most settleTimeout.
func (s *Store) settling(ctx context.Context) (context.Context, context.CancelFunc) {
	d := settleTimeout
	if s.SettleTimeout > 0 {
		d = s.SettleTimeout
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// attempts runs the attempts of one Append or Commit on a host item. A
// write whose answer is not a success joins the call's writes in flight,
// judged against the item the next attempt reads anyway: contention costs
// no read more than it did before nonces, and the happy path none at all.
type attempts struct {
	s    *Store
	pk   string
	what string // "append to <key>", "commit <key>": for errors
	// strict ends the call with ErrOutcomeUnknown when a write's outcome
	// cannot be told (a commit must not be applied twice); otherwise such
	// a write is taken as lost (an append may queue its entries twice).
	strict bool

	n int // attempts started
	// pre, when set, is the item the first attempt starts from, read by
	// the caller.
	pre        *preread
	inflight   []*hostWrite
	errorsLeft int
	giveUp     error // the error that used up errorsLeft
	// garbage are chunks of writes known never to land, deleted by sweep
	// after the attempt's write rather than between its read and write,
	// where they would widen the window for a conflict.
	garbage []string
}

func (s *Store) attempts(pk, what string, strict bool) *attempts {
	return &attempts{s: s, pk: pk, what: what, strict: strict, errorsLeft: maxErrorRetries}
}

// next starts an attempt: after the first it waits, then reads the host
// item, strongly consistent, and judges the writes in flight against it.
// It returns the item to build the next write on, or the call's write that
// landed, or an error. Whatever ends the call, the writes in flight are
// judged first: one may have landed, and that is then the call's result.
func (a *attempts) next(ctx context.Context) (*hostItem, *hostWrite, error) {
	if a.n == 0 && a.pre != nil {
		a.n++
		return a.pre.item, nil, nil
	}
	var waitErr error
	if a.n > 0 {
		waitErr = retryWait.Wait(ctx, a.n)
	}
	a.n++
	if waitErr != nil && len(a.inflight) == 0 {
		return nil, nil, waitErr
	}
	readCtx := ctx
	if len(a.inflight) > 0 {
		var cancel context.CancelFunc
		readCtx, cancel = a.s.settling(ctx)
		defer cancel()
	}
	cur, err := a.s.getHost(readCtx, a.pk)
	if err != nil {
		if len(a.inflight) > 0 {
			return nil, nil, fmt.Errorf("%s: %w: %w", a.what, ErrOutcomeUnknown, err)
		}
		return nil, nil, err
	}
	var still []*hostWrite
	for i, w := range a.inflight {
		switch judge(cur, w) {
		case landed:
			// The call's writes all expect versions no later than the
			// one this read shows, so no other can land now.
			a.inflight = append(still, a.inflight[i+1:]...)
			return nil, w, nil
		case pending:
			still = append(still, w)
		case unknown:
			if a.strict {
				a.inflight = append(still, a.inflight[i+1:]...)
				return nil, nil, fmt.Errorf("%s: %w: more writes followed it than the item remembers", a.what, ErrOutcomeUnknown)
			}
			a.garbage = append(a.garbage, w.spilled...)
		default:
			// Lost: its chunks are nobody's, and never will be.
			a.garbage = append(a.garbage, w.spilled...)
		}
	}
	a.inflight = still
	switch {
	case waitErr != nil:
		return nil, nil, waitErr
	case a.giveUp != nil:
		return nil, nil, fmt.Errorf("%s: %w", a.what, a.giveUp)
	case a.n > maxAttempts:
		return nil, nil, fmt.Errorf("%s: %w after %d attempts", a.what, hostqueue.ErrConflict, a.n-1)
	}
	return cur, nil, nil
}

// answered takes the answer to write w, other than a success: w joins the
// writes in flight, unless it was never sent. An error that is not a
// failed condition (the SDK has already retried it) uses up one of the
// store's own retries; the next attempt ends the call when none is left.
func (a *attempts) answered(w *hostWrite, err error) {
	var enc *encodeError
	if errors.As(err, &enc) {
		a.garbage = append(a.garbage, w.spilled...)
	} else {
		a.inflight = append(a.inflight, w)
	}
	a.failed(err)
	a.sweep()
}

// sweep deletes the garbage. The call defers it too, for the garbage its
// last read found.
func (a *attempts) sweep() {
	a.s.deleteChunksQuietly(a.pk, a.garbage)
	a.garbage = nil
}

// failed counts an error of an attempt: not a failed condition, it uses
// up one of the store's own retries.
func (a *attempts) failed(err error) {
	if isConditionFailed(err) {
		return
	}
	if a.errorsLeft == 0 {
		a.giveUp = err
	}
	a.errorsLeft--
}

// dropWrites deletes the chunks of a call's writes that can no longer
// land, because another write of the call landed on the version they
// expected or a later one.
func (s *Store) dropWrites(pk string, ws []*hostWrite) {
	for _, w := range ws {
		s.deleteChunksQuietly(pk, w.spilled)
	}
}

// withNonce is a host item's nonce history after a write with nonce n.
func withNonce(history []string, n string) []string {
	return append([]string{n}, history[:min(len(history), nonceHistory-1)]...)
}

// newNonce returns 64 random bits: two writes of one item never share one.
func newNonce() string { return randomID(8) }

// encodeError is a write that failed before it was sent.
type encodeError struct{ err error }

func (e *encodeError) Error() string { return e.err.Error() }
func (e *encodeError) Unwrap() error { return e.err }
