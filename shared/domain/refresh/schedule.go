package refresh

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// Schedule is the state of one refreshing URL, as a store keeps it beside
// its host's queue (docs/refresh.md, How it is stored).
type Schedule struct {
	// Every is the interval: the input's, or as Adapt left it.
	Every time.Duration
	// Adapt and EmitUnchanged are the input's refreshAdapt and
	// emitUnchanged.
	Adapt         bool
	EmitUnchanged bool
	// Due is when the next fetch is due.
	Due time.Time
	// ETag, LastModified and ValidatorsURL are the last answer's
	// validators: the next request is conditional on them.
	ETag          string
	LastModified  string
	ValidatorsURL string
	// SHA256 is the last content's digest (hex); "" before the first.
	SHA256 string
	// Seq is the seq of the last result sent; 0 before the first. The
	// first fetch always sends one, so Seq 0 also means never fetched.
	Seq int
	// Failing is set when the last result sent was a failure: the next
	// fetch that is not one is sent too, whatever it found, so a
	// consumer keeping the highest seq does not keep the failure.
	Failing bool
}

// Kind is what a fetch found.
type Kind int

// The kinds of fetch.
const (
	// Changed: new content (or the first).
	Changed Kind = iota
	// Unchanged: a 304, or the same content digest as the last.
	Unchanged
	// Failed: no content (an error after the attempts, or a refusal).
	Failed
)

// Classify tells what a fetch's result says of the content, against the
// digest of the last content (prev, "" for none). A redirect's content is
// its target: one pointing elsewhere than before is a change.
func Classify(r result.Result, prev string) (Kind, string) {
	switch r.Status {
	case result.StatusNotModified:
		return Unchanged, prev
	case result.StatusFetched:
		if r.SHA256 != "" && r.SHA256 == prev {
			return Unchanged, prev
		}
		return Changed, r.SHA256
	case result.StatusRedirect:
		sum := sha256.Sum256([]byte("redirect " + r.Location))
		d := hex.EncodeToString(sum[:])
		if d == prev {
			return Unchanged, prev
		}
		return Changed, d
	}
	return Failed, prev
}

// Decision is what to do after a fetch: whether to send its result, with
// which changed and seq, and the schedule's new state.
type Decision struct {
	Emit    bool
	Changed bool
	// Seq is the result's seq when Emit.
	Seq  int
	Next Schedule
	// Lag is how late the fetch was (at minus the due time; 0 when
	// early or on time).
	Lag time.Duration
}

// After applies a fetch at `at` whose result is r. The first fetch always
// emits (changed, unless a failure or a 304 to the producer's own
// validators); later
// ones emit on a change or a failure, and when unchanged only with
// EmitUnchanged. The validators move to the answer's when it has any
// (a 304 keeps the last ones it did not repeat); the interval adapts
// when Adapt; the next due time coalesces missed cycles (Next).
func (s Schedule) After(r result.Result, at time.Time, b Bounds) Decision {
	kind, digest := Classify(r, s.SHA256)
	first := s.Seq == 0
	d := Decision{Next: s, Lag: max(at.Sub(s.Due), 0)}
	switch {
	case first:
		d.Emit, d.Changed = true, kind == Changed
	case kind == Unchanged:
		d.Emit = s.EmitUnchanged || s.Failing
	default:
		d.Emit, d.Changed = true, kind == Changed
	}
	if d.Emit {
		d.Next.Seq++
		d.Seq = d.Next.Seq
	}
	d.Next.SHA256 = digest
	d.Next.Failing = kind == Failed
	if kind != Failed && (r.ETag != "" || r.LastModified != "" || r.Status != result.StatusNotModified) {
		d.Next.ETag, d.Next.LastModified, d.Next.ValidatorsURL = r.ETag, r.LastModified, r.ValidatorsURL
	}
	if s.Adapt && !first {
		// The first fetch has nothing to compare with.
		d.Next.Every = Adapt(s.Every, kind, b)
	}
	d.Next.Due = Next(s.Due, at, d.Next.Every, s.Adapt)
	return d
}

// FinalSeq is the seq of a schedule's last result, the one whose final is
// true (a stop, a give-up, a robots.txt refusal).
func (s Schedule) FinalSeq() int { return s.Seq + 1 }

// Decorate sets the refresh fields of a result the decision sends.
func (d Decision) Decorate(r *result.Result) {
	changed := d.Changed
	r.Changed = &changed
	r.Seq = d.Seq
}
