package hostqueue

import (
	"context"
	"errors"
	"time"
)

// IdempotencyStore remembers, per idempotency key, what a request that
// carried it has done, so a client that retries (after a timeout, a lost
// answer, a 503) gets the first answer instead of having its URLs queued
// twice under new ids. The stores that keep host queues implement it in
// the same table or file (package dynamo, package sqlite).
//
// A key moves through three states. Claim takes it: a fresh key, a key
// whose window ended, a key whose earlier request ended Partial, or whose
// holder's lock expired (its invocation died) becomes InFlight under the
// caller's token. Settle, by the token's holder, records the outcome:
// Done (every URL accepted: later claims replay it) or Partial (some URLs
// could not be queued: the next claim goes on from the accepted ones).
// A key is bound to its first request's body for its whole window.
type IdempotencyStore interface {
	// Claim takes c.Key for the caller, or says why not. It returns the
	// record as it stands: held under c.Token (State InFlight; Accepted
	// and Denied are an earlier attempt's progress, to be skipped), or
	// Done (to be replayed). It returns ErrIdempotencyMismatch when the
	// key's body differs and ErrIdempotencyInFlight while another holder's
	// lock lasts.
	Claim(ctx context.Context, c IdempotencyClaim) (IdempotencyRecord, error)
	// Settle records the outcome of the claim held under token. outcome
	// is the record Claim returned with State (Done or Partial), Status,
	// Accepted (every id accepted so far, the earlier progress included)
	// and Denied set; its Token and LockUntil are ignored. The lock is
	// released. ErrIdempotencyLost means the claim was taken over
	// meanwhile, its lock having expired.
	Settle(ctx context.Context, key, token string, outcome IdempotencyRecord) error
}

// IdempotencyClaim asks for a key.
type IdempotencyClaim struct {
	// Key identifies the request: the client's key, scoped to the client
	// and hashed by the caller (at most 128 bytes).
	Key string
	// BodyHash identifies the request's body.
	BodyHash string
	// Token names this claim; random, unique per request.
	Token string
	// Now is the caller's clock.
	Now time.Time
	// LockUntil is when the claim may be taken over if never settled: past
	// the holder's deadline, so that a live request is never overtaken.
	LockUntil time.Time
	// Expires ends the key's window; set by the claim that creates the
	// record, kept by those that take it over.
	Expires time.Time
}

// IdempotencyState is where a key's request stands.
type IdempotencyState string

// The states of a key.
const (
	IdempotencyInFlight IdempotencyState = "inflight"
	IdempotencyPartial  IdempotencyState = "partial"
	IdempotencyDone     IdempotencyState = "done"
)

// IdempotencyRecord is a key's stored state.
type IdempotencyRecord struct {
	BodyHash  string
	State     IdempotencyState
	Token     string
	LockUntil time.Time
	Expires   time.Time
	// Status is the HTTP status of the last answer (Done or Partial).
	Status int
	// Accepted are the ids of the URLs accepted so far, in the body's
	// order; Denied counts those among them answered at once as denied.
	Accepted []string
	Denied   int
}

// Errors of an IdempotencyStore.
var (
	// ErrIdempotencyMismatch: the key was first used with another body
	// (HTTP 422).
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request body")
	// ErrIdempotencyInFlight: another request with the key is being
	// processed (HTTP 409).
	ErrIdempotencyInFlight = errors.New("a request with this idempotency key is in progress")
	// ErrIdempotencyLost: the claim was taken over before it was settled.
	ErrIdempotencyLost = errors.New("idempotency claim taken over before it was settled")
)

// Decide is the rule every IdempotencyStore applies to the record it finds
// (nil: none) for claim c: it returns the record to write for the claim,
// or the record to replay (write false), or an error. Stores call it
// inside their own atomic step (a conditional write, a transaction).
func (c IdempotencyClaim) Decide(cur *IdempotencyRecord) (next IdempotencyRecord, write bool, err error) {
	if cur == nil || !cur.Expires.After(c.Now) {
		return IdempotencyRecord{BodyHash: c.BodyHash, State: IdempotencyInFlight, Token: c.Token, LockUntil: c.LockUntil, Expires: c.Expires}, true, nil
	}
	switch {
	case cur.BodyHash != c.BodyHash:
		return IdempotencyRecord{}, false, ErrIdempotencyMismatch
	case cur.State == IdempotencyInFlight && cur.Token == c.Token:
		return *cur, false, nil // our own claim, its answer lost
	case cur.State == IdempotencyDone:
		return *cur, false, nil
	case cur.State == IdempotencyInFlight && cur.LockUntil.After(c.Now):
		return IdempotencyRecord{}, false, ErrIdempotencyInFlight
	}
	next = *cur
	next.State, next.Token, next.LockUntil = IdempotencyInFlight, c.Token, c.LockUntil
	return next, true, nil
}
