package hostqueue

import "net/url"

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

// hostOf returns the host of a normalised URL, or fallback.
func hostOf(raw, fallback string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return fallback
}
