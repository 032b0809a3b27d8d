package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/urldownloader/urldownloader/shared/hostqueue"
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

// settleTimeout bounds the read that learns a write's outcome (see
// settling).
const settleTimeout = 5 * time.Second

// hostWrite is one conditional write of a host item, kept until its
// outcome is known.
type hostWrite struct {
	next *hostItem // the item as written; next.N[0] is the write's nonce
	prev int64     // the version it is conditioned on; 0: no item yet
	// spilled are the chunks written for it, referenced only if it lands;
	// dead those it stops referencing, nobody's once it lands.
	spilled, dead []string
	// appended is what an append returns when this write lands; collect
	// marks a commit that drains the queue (orphans are collected then).
	appended hostqueue.AppendResult
	collect  bool
}

func (w *hostWrite) nonce() string { return w.next.N[0] }

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
	// unreadable: the item could not be read back; nothing may be deleted.
	unreadable
)

// judge tells what became of w, from cur, the item read after w's answer.
func judge(cur *hostItem, w *hostWrite) verdict {
	if cur == nil {
		if w.prev == 0 {
			return pending
		}
		return lost
	}
	if cur.V <= w.prev {
		return pending
	}
	// Versions only grow while an item lives: the write that made
	// version prev+1 is the back-th before the latest.
	back := cur.V - w.prev - 1
	if back < int64(len(cur.N)) {
		if cur.N[back] == w.nonce() {
			return landed
		}
		return lost
	}
	// Too far back to tell by nonce; a chunk only this write wrote is
	// referenced only if it landed (later writers carry references over).
	for _, c := range cur.C {
		if slices.Contains(w.spilled, chunkPrefix+c.ID) {
			return landed
		}
	}
	return unknown
}

// write makes the conditional write w. Unless it plainly succeeded, it
// reads the item back and judges w; the error is the write's own (a failed
// condition included), or for unreadable one that wraps ErrOutcomeUnknown.
func (s *Store) write(ctx context.Context, w *hostWrite) (verdict, error) {
	err := s.putHost(ctx, w.next, w.prev)
	if err == nil {
		return landed, nil
	}
	var enc *encodeError
	if errors.As(err, &enc) {
		return lost, err // never sent
	}
	cur, rerr := s.readBack(ctx, w.next.PK)
	if rerr != nil {
		return unreadable, fmt.Errorf("%w: %w; reading it back: %w", ErrOutcomeUnknown, err, rerr)
	}
	return judge(cur, w), err
}

// readBack reads a host item, strongly consistent, after a write whose
// answer was not a success.
func (s *Store) readBack(ctx context.Context, pk string) (*hostItem, error) {
	ctx, cancel := settling(ctx)
	defer cancel()
	return s.getHost(ctx, pk)
}

// settling returns the context of a read that learns a write's outcome:
// it goes on when ctx has ended (a cancelled request is one of the ways an
// answer gets lost), for at most settleTimeout.
func settling(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

// settle judges the call's writes still in flight against cur, the item as
// just read. It returns the one that landed, if any (a call's writes all
// expect versions no later than the one it read, so at most one lands),
// and the others still pending; the chunks of the rest are deleted, since
// nothing references them and nothing ever will.
func (s *Store) settle(pk string, cur *hostItem, inflight []*hostWrite) (*hostWrite, []*hostWrite) {
	var still []*hostWrite
	for i, w := range inflight {
		switch judge(cur, w) {
		case landed:
			return w, append(still, inflight[i+1:]...)
		case pending:
			still = append(still, w)
		default:
			s.deleteChunksQuietly(pk, w.spilled)
		}
	}
	return nil, still
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
