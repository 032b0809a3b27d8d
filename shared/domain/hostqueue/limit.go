package hostqueue

import (
	"context"
	"fmt"
	"net/url"
)

// Evict applies PersistLimit to a queue that holds pending entries and is
// about to receive incoming ones: it returns how many of the oldest pending
// entries go, and how many of the incoming (oldest first) go too when the
// incoming alone exceed the limit. Like the reference design's EnforceLimit,
// the oldest URLs make room for the newest.
func Evict(pending, incoming, limit int) (fromPending, fromIncoming int) {
	if limit < 1 {
		limit = 1
	}
	total := pending + incoming
	if total <= limit {
		return 0, 0
	}
	over := total - limit
	if over <= pending {
		return over, 0
	}
	return pending, over - pending
}

// Fit applies PersistLimit to an append as req asks: with req.HoldBack
// nothing is evicted and only the first incoming entries that fit are
// appended (held counts the rest), otherwise as Evict. Both stores call it,
// so the rule lives here.
func Fit(pending, incoming int, req AppendRequest) (fromPending, fromIncoming, held int) {
	if !req.HoldBack {
		fromPending, fromIncoming = Evict(pending, incoming, req.Limit)
		return fromPending, fromIncoming, 0
	}
	room := max(max(req.Limit, 1)-pending, 0)
	return 0, 0, max(incoming-room, 0)
}

// AppendPlan is how an append shares its entries out under PersistLimit
// (Fit), for a store to carry out: evict FromHead entries from the head
// of the queue, evict Dropped, queue Queue, leave HeldBack to the caller.
type AppendPlan struct {
	FromHead int
	// Dropped are the oldest incoming entries, evicted at once when the
	// incoming alone exceed the limit.
	Dropped []Entry
	// Queue are the incoming entries to append, in order.
	Queue []Entry
	// HeldBack counts the last entries of a HoldBack append left out.
	HeldBack int
}

// PlanAppend is req's plan on a queue holding pending entries. Both
// stores call it, so the rule lives here.
func PlanAppend(pending int, req AppendRequest) AppendPlan {
	fromPending, fromIncoming, held := Fit(pending, len(req.Entries), req)
	in := req.Entries[:len(req.Entries)-held]
	return AppendPlan{FromHead: fromPending, Dropped: in[:fromIncoming], Queue: in[fromIncoming:], HeldBack: held}
}

// Result is what the plan's append did once written: evicted entries in
// all (head and Dropped), pending the queue's length after it, activated
// whether it put the host into the due index.
func (p AppendPlan) Result(evicted, pending int, activated bool) AppendResult {
	return AppendResult{Appended: len(p.Queue), Evicted: evicted, HeldBack: p.HeldBack, Pending: pending, Activated: activated}
}

// Reported holds the IDs of the evicted entries an append has handed to
// AppendRequest.OnEvict: a retried write evicts the same entries again,
// and each is reported once.
type Reported map[string]bool

// Fresh returns the entries of es not reported yet (a nil Reported has
// reported none).
func (r Reported) Fresh(es []Entry) []Entry {
	var out []Entry
	for _, e := range es {
		if !r[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

// Report hands req.OnEvict the entries of evicted not reported yet and
// records them. The store calls it before the write that evicts them, so
// that a failure writes nothing.
func (r Reported) Report(ctx context.Context, req AppendRequest, evicted []Entry) error {
	fresh := r.Fresh(evicted)
	if len(fresh) == 0 || req.OnEvict == nil {
		return nil
	}
	if err := req.OnEvict(ctx, fresh); err != nil {
		return fmt.Errorf("report %d evicted urls of %s: %w", len(fresh), req.Key, err)
	}
	for _, e := range fresh {
		r[e.ID] = true
	}
	return nil
}

// hostOf returns the host of a normalised URL, or fallback.
func hostOf(raw, fallback string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return fallback
}
