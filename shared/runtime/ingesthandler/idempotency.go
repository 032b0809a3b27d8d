package ingesthandler

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// IdempotencyHeader names the request header that makes POST /urls safe to
// retry (the IETF httpapi draft's name, as Stripe and others use it).
const IdempotencyHeader = "Idempotency-Key"

// ReplayedHeader is set on an answer replayed from an earlier request.
const ReplayedHeader = "Idempotent-Replayed"

// DefaultIdempotencyWindow is how long a key is remembered when
// Idempotency.Window is zero: a client retries within minutes, a day
// covers any retry policy without keeping records for long.
const DefaultIdempotencyWindow = 24 * time.Hour

// maxKeyBytes bounds the header's value.
const maxKeyBytes = 255

// lockMargin is added to the invocation's deadline to make a claim's lock:
// a live request is never overtaken, a dead one only briefly blocks its
// retries (409).
const lockMargin = 10 * time.Second

// noDeadlineLock is the lock when the context has no deadline (tests,
// local runs): longer than any request runs.
const noDeadlineLock = 2 * time.Minute

// Idempotency makes POST /urls with an Idempotency-Key header idempotent: a
// retried request (same key, same body) gets the first answer, with the
// same ids, and nothing is queued twice. A request whose URLs could not
// all be queued (503) is remembered as far as it got, and its retry
// queues only the rest. The same key with another body is refused (422);
// a retry while the first request is still running is told to wait (409).
// A request without the header is served as before.
type Idempotency struct {
	Store hostqueue.IdempotencyStore
	// Window is how long a key is remembered (zero: 24 h), from its first
	// request.
	Window time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

func (i *Idempotency) now() time.Time {
	if i.Now == nil {
		return time.Now()
	}
	return i.Now()
}

func (i *Idempotency) window() time.Duration {
	if i.Window <= 0 {
		return DefaultIdempotencyWindow
	}
	return i.Window
}

// idempotencyKey returns the header's value, looked up as HTTP does
// (names are case-insensitive), and whether it was sent.
func idempotencyKey(ev events.APIGatewayProxyRequest) (string, bool) {
	for name, v := range ev.Headers {
		if strings.EqualFold(name, IdempotencyHeader) {
			return v, true
		}
	}
	for name, vs := range ev.MultiValueHeaders {
		if strings.EqualFold(name, IdempotencyHeader) && len(vs) > 0 {
			return vs[0], true
		}
	}
	return "", false
}

// validKey: 1 to 255 visible ASCII characters.
func validKey(k string) bool {
	if k == "" || len(k) > maxKeyBytes {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// scopedKey is what the store keeps: the key hashed with the caller's
// identity, so two clients that pick the same key never see each other's
// answers (IAM authorisation names the caller).
func scopedKey(ev events.APIGatewayProxyRequest, key string) string {
	id := ev.RequestContext.Identity
	caller := id.UserArn
	if caller == "" {
		caller = id.AccountID + "/" + id.Caller
	}
	sum := sha256.Sum256([]byte(caller + "\n" + key))
	return hex.EncodeToString(sum[:])
}

func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// lockUntil is when a claim made now may be taken over: past the
// invocation's deadline, by the idempotency clock.
func lockUntil(ctx context.Context, now time.Time) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return now.Add(time.Until(dl) + lockMargin)
	}
	return now.Add(noDeadlineLock)
}

// handleIdempotent serves POST /urls for a request with key. Ids derive
// from the key, not from the request id, so every attempt names a URL the
// same way and a retry can skip what an earlier one queued.
func (h *Handler) handleIdempotent(ctx context.Context, ev events.APIGatewayProxyRequest, key string) events.APIGatewayProxyResponse {
	if !validKey(key) {
		return reply(http.StatusBadRequest, APIResponse{Message: fmt.Sprintf("%s must be 1 to %d visible ASCII characters", IdempotencyHeader, maxKeyBytes)})
	}
	body, refused := requestBody(ev)
	if refused != nil {
		return *refused
	}
	scoped := scopedKey(ev, key)
	msgs, bad, err := urlmsg.ParseLimited("api/key/"+scoped, body, urlmsg.LimitsOf(h.Params(ctx)))
	if err != nil {
		return parseRefused(err)
	}
	if len(msgs) == 0 {
		// Nothing to queue: the same body always gets this answer, so
		// there is nothing to remember.
		return reply(http.StatusBadRequest, APIResponse{Errors: bad, Message: noneAccepted})
	}

	idem := h.Idempotency
	now := idem.now()
	bodySum := sha256.Sum256(body)
	claim := hostqueue.IdempotencyClaim{Key: scoped, BodyHash: hex.EncodeToString(bodySum[:]), Token: newToken(),
		Now: now, LockUntil: lockUntil(ctx, now), Expires: now.Add(idem.window())}
	rec, err := idem.Store.Claim(ctx, claim)
	switch {
	case errors.Is(err, hostqueue.ErrIdempotencyMismatch):
		return reply(http.StatusUnprocessableEntity, APIResponse{Message: IdempotencyHeader + " was already used with a different body; use a new key for a new request"})
	case errors.Is(err, hostqueue.ErrIdempotencyInFlight):
		resp := reply(http.StatusConflict, APIResponse{Message: "a request with this " + IdempotencyHeader + " is still being processed; retry later"})
		// The holder ends within its invocation; a second is a fair first wait.
		resp.Headers["Retry-After"] = "1"
		return resp
	case err != nil:
		h.Log.ErrorContext(ctx, "claim idempotency key", "error", err, "requestId", ev.RequestContext.RequestID)
		return reply(http.StatusServiceUnavailable, APIResponse{Message: "could not record the " + IdempotencyHeader + "; nothing was queued, retry"})
	}
	if rec.State == hostqueue.IdempotencyDone {
		resp := reply(rec.Status, APIResponse{Accepted: len(rec.Accepted), Denied: rec.Denied, IDs: rec.Accepted, Errors: bad})
		resp.Headers[ReplayedHeader] = "true"
		return resp
	}

	// Held: queue what no earlier attempt did.
	accepted := make(map[string]bool, len(msgs))
	for _, id := range rec.Accepted {
		accepted[id] = true
	}
	var todo []urlmsg.Message
	for _, m := range msgs {
		if !accepted[m.ID] {
			todo = append(todo, m)
		}
	}
	resp := APIResponse{Errors: bad, Denied: rec.Denied}
	code := http.StatusAccepted
	if len(todo) > 0 {
		res := h.ingest(ctx, todo)
		index := map[string]int{}
		for i, ix := range itemIndexes(msgs, bad) {
			index[msgs[i].ID] = ix
		}
		for i, m := range todo {
			if err, ok := res.Failed[i]; ok {
				code = http.StatusServiceUnavailable
				resp.Errors = append(resp.Errors, urlmsg.ItemError{Index: index[m.ID], URL: m.URL, Error: "not queued, retry with the same " + IdempotencyHeader + ": " + err.Error()})
				continue
			}
			accepted[m.ID] = true
		}
		resp.Denied += res.Denied
	}
	for _, m := range msgs {
		if accepted[m.ID] {
			resp.IDs = append(resp.IDs, m.ID)
		}
	}
	resp.Accepted = len(resp.IDs)

	out := rec
	out.State, out.Status, out.Accepted, out.Denied = hostqueue.IdempotencyDone, code, resp.IDs, resp.Denied
	if code != http.StatusAccepted {
		out.State = hostqueue.IdempotencyPartial
		h.Log.ErrorContext(ctx, "queue urls from api", "failed", len(todo)-(resp.Accepted-len(rec.Accepted)), "requestId", ev.RequestContext.RequestID)
	}
	if err := idem.Store.Settle(ctx, scoped, claim.Token, out); err != nil {
		// The URLs are queued; only a retry after the lock expires could
		// queue them again (with the same ids, which a consumer can
		// dedupe).
		h.Log.ErrorContext(ctx, "settle idempotency key", "error", err, "requestId", ev.RequestContext.RequestID)
	}
	return reply(code, resp)
}
