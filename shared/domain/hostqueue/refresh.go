package hostqueue

import (
	"fmt"

	"github.com/urldownloader/urldownloader/shared/domain/refresh"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// Refresh is a refreshing URL, kept beside its host's queue (not in it:
// it is not counted in Pending, not under PersistLimit, never evicted).
// A host keeps one per URL (docs/refresh.md, How it is stored).
type Refresh struct {
	// ID is the result id of the item that started the schedule.
	ID   string
	URL  string
	Hops int
	refresh.Schedule
	// Stop is set when the input asked to end the schedule (refresh
	// "0"): the engine ends it at once with a stopped, final result.
	Stop bool
}

// A refresh's switches, packed as both stores keep them in one integer.
// The values are stored: never renumber them.
const (
	RefreshAdapt         = 1
	RefreshEmitUnchanged = 2
	RefreshStop          = 4
	RefreshFailing       = 8
)

// Flags packs r's switches (RefreshAdapt, ...).
func (r Refresh) Flags() int {
	f := 0
	if r.Adapt {
		f |= RefreshAdapt
	}
	if r.EmitUnchanged {
		f |= RefreshEmitUnchanged
	}
	if r.Stop {
		f |= RefreshStop
	}
	if r.Failing {
		f |= RefreshFailing
	}
	return f
}

// RefreshSpec are the switches the input sets: a URL sent again with a
// refresh takes them (and its interval) and keeps the rest: a stop asked
// meanwhile, and whether its last result was a failure (so the next good
// fetch is still sent).
const RefreshSpec = RefreshAdapt | RefreshEmitUnchanged

// Respec is the packed flags of a kept schedule (old) after its URL is
// sent again with the switches of r.
func (r Refresh) Respec(old int) int {
	return old&^RefreshSpec | r.Flags()&RefreshSpec
}

// SetFlags sets r's switches from packed flags (Flags).
func (r *Refresh) SetFlags(f int) {
	r.Adapt, r.EmitUnchanged = f&RefreshAdapt != 0, f&RefreshEmitUnchanged != 0
	r.Stop, r.Failing = f&RefreshStop != 0, f&RefreshFailing != 0
}

// Entry is the refresh's fetch as a queue entry: its URL with the last
// answer's validators, so the request is conditional.
func (r Refresh) Entry() Entry {
	return Entry{ID: r.ID, URL: r.URL, Hops: r.Hops, ETag: r.ETag, LastModified: r.LastModified, ValidatorsURL: r.ValidatorsURL}
}

// ErrRefreshCap refuses a refreshing URL its host has no room for: its
// host already holds MaxRefreshPerHost of them. It is invalid input (a
// producer's to fix, never retried), as refreshing URLs are never
// evicted to make room.
var ErrRefreshCap = fmt.Errorf("%w: the host holds %s refreshing urls", urlmsg.ErrInvalid, refresh.NameMaxRefreshPerHost)

// ErrRefreshUnsupported refuses a refreshing URL where the store keeps
// none (Ingester.NoRefresh): invalid input for this deployment.
var ErrRefreshUnsupported = fmt.Errorf("%w: refresh is not supported here", urlmsg.ErrInvalid)

// refreshOf is the Refresh a message asks for, ok false for a plain URL.
func refreshOf(m urlmsg.Message) (Refresh, bool) {
	if m.Refresh <= 0 && !m.RefreshStop {
		return Refresh{}, false
	}
	return Refresh{ID: m.ID, URL: m.URL, Stop: m.RefreshStop, Schedule: refresh.Schedule{
		Every: m.Refresh, Adapt: m.RefreshAdapt, EmitUnchanged: m.EmitUnchanged,
		ETag: m.ETag, LastModified: m.LastModified, ValidatorsURL: m.ValidatorsURL,
	}}, true
}

// StoredValidatorsURL is ValidatorsURL as a store keeps it (see
// Entry.StoredValidatorsURL).
func (r Refresh) StoredValidatorsURL() string { return r.Entry().StoredValidatorsURL() }
