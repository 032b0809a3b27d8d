// Package idemtest is the contract of hostqueue.IdempotencyStore as one
// test suite, run against every implementation (DynamoDB on moto, SQLite
// in a file and in memory), so they keep the same rules.
package idemtest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// t0 is the suite's clock: whole milliseconds, as the stores keep them.
var t0 = time.UnixMilli(1_760_000_000_000)

const window = 24 * time.Hour

// New returns an empty store for one test.
type New func(t *testing.T) hostqueue.IdempotencyStore

// claim is a claim of key with body at now, locked for a minute.
func claim(key, body, token string, now time.Time) hostqueue.IdempotencyClaim {
	return hostqueue.IdempotencyClaim{Key: key, BodyHash: "h-" + body, Token: token, Now: now,
		LockUntil: now.Add(time.Minute), Expires: now.Add(window)}
}

// Run runs the contract; parallel runs the cases side by side.
func Run(t *testing.T, newStore New, parallel bool) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s hostqueue.IdempotencyStore)
	}{
		{"DoneIsReplayed", doneIsReplayed},
		{"DifferentBodyIsRefused", differentBodyIsRefused},
		{"LockedKeyIsInFlight", lockedKeyIsInFlight},
		{"ExpiredLockIsTakenOver", expiredLockIsTakenOver},
		{"PartialGoesOnFromItsProgress", partialGoesOnFromItsProgress},
		{"OwnClaimIsHeldAgain", ownClaimIsHeldAgain},
		{"WindowEnds", windowEnds},
		{"ConcurrentClaimsOneWins", concurrentClaimsOneWins},
		{"ThousandIDs", thousandIDs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			tc.fn(t, newStore(t))
		})
	}
}

func mustClaim(t *testing.T, s hostqueue.IdempotencyStore, c hostqueue.IdempotencyClaim) hostqueue.IdempotencyRecord {
	t.Helper()
	rec, err := s.Claim(t.Context(), c)
	if err != nil {
		t.Fatalf("Claim(%s, token %s): %v", c.Key, c.Token, err)
	}
	return rec
}

func mustSettle(t *testing.T, s hostqueue.IdempotencyStore, key, token string, out hostqueue.IdempotencyRecord) {
	t.Helper()
	if err := s.Settle(t.Context(), key, token, out); err != nil {
		t.Fatalf("Settle(%s, token %s): %v", key, token, err)
	}
}

// outcome is the claimed record rec with its outcome set, as a caller
// hands it to Settle.
func outcome(rec hostqueue.IdempotencyRecord, state hostqueue.IdempotencyState, status int, ids []string, denied int) hostqueue.IdempotencyRecord {
	rec.State, rec.Status, rec.Accepted, rec.Denied = state, status, ids, denied
	return rec
}

func held(t *testing.T, rec hostqueue.IdempotencyRecord, token string) {
	t.Helper()
	if rec.State != hostqueue.IdempotencyInFlight || rec.Token != token {
		t.Fatalf("record %+v: want in flight under %s", rec, token)
	}
}

func doneIsReplayed(t *testing.T, s hostqueue.IdempotencyStore) {
	rec := mustClaim(t, s, claim("k", "b", "a", t0))
	held(t, rec, "a")
	if len(rec.Accepted) != 0 || rec.Denied != 0 || !rec.Expires.Equal(t0.Add(window)) {
		t.Errorf("fresh claim = %+v, want no progress and the window from now", rec)
	}
	mustSettle(t, s, "k", "a", outcome(rec, hostqueue.IdempotencyDone, 202, []string{"id1", "id2"}, 1))
	for _, at := range []time.Time{t0.Add(time.Second), t0.Add(window - time.Millisecond)} {
		got := mustClaim(t, s, claim("k", "b", "b", at))
		if got.State != hostqueue.IdempotencyDone || got.Status != 202 || !slices.Equal(got.Accepted, []string{"id1", "id2"}) || got.Denied != 1 {
			t.Errorf("claim at +%v = %+v, want the Done record to replay", at.Sub(t0), got)
		}
	}
	// Another key is another request.
	held(t, mustClaim(t, s, claim("k2", "b", "c", t0)), "c")
}

func differentBodyIsRefused(t *testing.T, s hostqueue.IdempotencyStore) {
	rec := mustClaim(t, s, claim("k", "b", "a", t0))
	if _, err := s.Claim(t.Context(), claim("k", "other", "b", t0.Add(time.Second))); !errors.Is(err, hostqueue.ErrIdempotencyMismatch) {
		t.Errorf("in flight, other body: %v, want ErrIdempotencyMismatch", err)
	}
	mustSettle(t, s, "k", "a", outcome(rec, hostqueue.IdempotencyDone, 202, []string{"x"}, 0))
	if _, err := s.Claim(t.Context(), claim("k", "other", "c", t0.Add(time.Hour))); !errors.Is(err, hostqueue.ErrIdempotencyMismatch) {
		t.Errorf("done, other body: %v, want ErrIdempotencyMismatch", err)
	}
}

func lockedKeyIsInFlight(t *testing.T, s hostqueue.IdempotencyStore) {
	mustClaim(t, s, claim("k", "b", "a", t0))
	if _, err := s.Claim(t.Context(), claim("k", "b", "b", t0.Add(59*time.Second))); !errors.Is(err, hostqueue.ErrIdempotencyInFlight) {
		t.Errorf("second claim within the lock: %v, want ErrIdempotencyInFlight", err)
	}
}

func expiredLockIsTakenOver(t *testing.T, s hostqueue.IdempotencyStore) {
	first := mustClaim(t, s, claim("k", "b", "a", t0))
	later := t0.Add(time.Minute + time.Millisecond)
	rec := mustClaim(t, s, claim("k", "b", "b", later))
	held(t, rec, "b")
	if !rec.Expires.Equal(t0.Add(window)) {
		t.Errorf("takeover moved the window's end to %v, want %v", rec.Expires, t0.Add(window))
	}
	// The dead holder's late settle must not overwrite the new holder's.
	err := s.Settle(t.Context(), "k", "a", outcome(first, hostqueue.IdempotencyDone, 202, []string{"stale"}, 0))
	if !errors.Is(err, hostqueue.ErrIdempotencyLost) {
		t.Errorf("settle by the overtaken holder: %v, want ErrIdempotencyLost", err)
	}
	mustSettle(t, s, "k", "b", outcome(rec, hostqueue.IdempotencyDone, 202, []string{"fresh"}, 0))
	if got := mustClaim(t, s, claim("k", "b", "c", later)); !slices.Equal(got.Accepted, []string{"fresh"}) {
		t.Errorf("replay = %+v, want the new holder's answer", got)
	}
}

func partialGoesOnFromItsProgress(t *testing.T, s hostqueue.IdempotencyStore) {
	first := mustClaim(t, s, claim("k", "b", "a", t0))
	mustSettle(t, s, "k", "a", outcome(first, hostqueue.IdempotencyPartial, 503, []string{"id1"}, 1))
	// A retry need not wait for the lock: the first request is over.
	rec := mustClaim(t, s, claim("k", "b", "b", t0.Add(time.Second)))
	held(t, rec, "b")
	if !slices.Equal(rec.Accepted, []string{"id1"}) || rec.Denied != 1 || rec.Status != 503 {
		t.Errorf("takeover of a partial = %+v, want its progress (id1, 1 denied, 503)", rec)
	}
	mustSettle(t, s, "k", "b", outcome(rec, hostqueue.IdempotencyDone, 202, []string{"id1", "id2"}, 1))
	if got := mustClaim(t, s, claim("k", "b", "c", t0.Add(2*time.Second))); got.State != hostqueue.IdempotencyDone || len(got.Accepted) != 2 || got.Status != 202 {
		t.Errorf("after the retry = %+v, want Done with both ids", got)
	}
}

func ownClaimIsHeldAgain(t *testing.T, s hostqueue.IdempotencyStore) {
	mustClaim(t, s, claim("k", "b", "a", t0))
	// The same claim sent again (its answer was lost) finds itself.
	held(t, mustClaim(t, s, claim("k", "b", "a", t0.Add(time.Second))), "a")
}

func windowEnds(t *testing.T, s hostqueue.IdempotencyStore) {
	rec := mustClaim(t, s, claim("k", "b", "a", t0))
	mustSettle(t, s, "k", "a", outcome(rec, hostqueue.IdempotencyDone, 202, []string{"old"}, 0))
	after := t0.Add(window)
	rec = mustClaim(t, s, claim("k", "new body", "b", after))
	held(t, rec, "b")
	if len(rec.Accepted) != 0 || rec.Status != 0 || !rec.Expires.Equal(after.Add(window)) {
		t.Errorf("claim after the window = %+v, want a fresh record", rec)
	}
}

func concurrentClaimsOneWins(t *testing.T, s hostqueue.IdempotencyStore) {
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Claim(t.Context(), claim("race", "b", fmt.Sprint("t", i), t0))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, hostqueue.ErrIdempotencyInFlight):
			t.Errorf("claim %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Errorf("%d of %d concurrent claims won, want exactly 1", won, n)
	}
}

func thousandIDs(t *testing.T, s hostqueue.IdempotencyStore) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("%024x", i*7919)
	}
	rec := mustClaim(t, s, claim("k", "b", "a", t0))
	mustSettle(t, s, "k", "a", outcome(rec, hostqueue.IdempotencyDone, 202, ids, 3))
	if got := mustClaim(t, s, claim("k", "b", "b", t0)); !slices.Equal(got.Accepted, ids) || got.Denied != 3 {
		t.Errorf("replay carries %d ids (first %v), want the 1000 in order", len(got.Accepted), got.Accepted[:min(3, len(got.Accepted))])
	}
}
