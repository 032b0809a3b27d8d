package params

import (
	"fmt"
	"strconv"
)

// SpoolMargin is the share of a function's /tmp the WARC spools leave to
// everything else there (the runtime's and the SDK's files, a record
// being sealed).
const SpoolMargin = 64 << 20

// spoolLimit bounds MaxBodyBytes by the /tmp a process writing WARC spools
// into (Cache.LimitSpool).
type spoolLimit struct {
	budget  int64            // bytes of /tmp
	workers func(Params) int // host workers at once with p; 0: unbounded
}

// LimitSpool makes the cache refuse a MaxBodyBytes whose WARC spools may
// not fit in budget bytes of /tmp, as it refuses any value out of its
// bounds: the last good value stays in force and the refusal is logged
// with the other invalid values at every load. With WarcOutput each host
// worker spools up to two copies of a body to /tmp (the payload and its
// compressed record; shared/web/warc), so workers(p) x 2 x MaxBodyBytes plus
// SpoolMargin must fit; a body that cannot be spooled fails its publish
// and its URL is fetched again, forever. Lambda's /tmp is 512 MB unless
// the function's EphemeralStorage says more ("Lambda quotas"), a bound
// params cannot know by itself: the check function sets it from
// EPHEMERAL_STORAGE_MB (shared/aws/config). A value in force that does not
// fit is replaced at once, by the default or the largest that fits. A
// budget of zero or less removes the limit.
func (c *Cache) LimitSpool(budget int64, workers func(Params) int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spool = spoolLimit{budget: budget, workers: workers}
	if fe, ok := c.spool.enforce(&c.cur, c.cur); ok {
		c.log.Error("invalid parameters ignored; their values in force kept", "invalid", []FieldError{fe})
	}
}

// fits reports whether p's spools fit, and the bytes they may take.
func (l spoolLimit) fits(p Params) (bool, int64, int) {
	if l.budget <= 0 || l.workers == nil {
		return true, 0, 0
	}
	w := l.workers(p)
	if w <= 0 {
		return true, 0, 0
	}
	need := int64(w)*2*p.MaxBodyBytes + SpoolMargin
	return need <= l.budget, need, w
}

// enforce keeps p's MaxBodyBytes within the limit, falling back to base's
// value, the default, or the largest that fits, the first that fits; it
// reports the refusal.
func (l spoolLimit) enforce(p *Params, base Params) (FieldError, bool) {
	ok, need, w := l.fits(*p)
	if ok {
		return FieldError{}, false
	}
	refused := p.MaxBodyBytes
	largest := l.largest(*p)
	mib := int64(1 << 20)
	fe := FieldError{Name: NameMaxBodyBytes, Value: strconv.FormatInt(refused, 10), Reason: fmt.Sprintf(
		"with WarcOutput, %d host workers spool up to 2 x MaxBodyBytes each to /tmp: %d MiB with the %d MiB margin, above the function's %d MiB "+
			"(EPHEMERAL_STORAGE_MB, the template's EphemeralStorage); set MaxBodyBytes to at most %d, or EphemeralStorage to at least %d",
		w, (need+mib-1)/mib, SpoolMargin/mib, l.budget/mib, largest, (need+mib-1)/mib)}
	for _, v := range []int64{base.MaxBodyBytes, Defaults().MaxBodyBytes} {
		q := *p
		q.MaxBodyBytes = v
		if ok, _, _ := l.fits(q); ok {
			p.MaxBodyBytes = v
			return fe, true
		}
	}
	p.MaxBodyBytes = largest
	return fe, true
}

// largest is the largest MaxBodyBytes that fits with p's other values (at
// least 1). The workers a process runs grow as bodies shrink (less memory
// each), so the bound is found again until it holds.
func (l spoolLimit) largest(p Params) int64 {
	q := p
	for range 8 {
		_, _, w := l.fits(q)
		m := max((l.budget-SpoolMargin)/(2*int64(max(w, 1))), 1)
		q.MaxBodyBytes = min(m, q.MaxBodyBytes)
		if ok, _, _ := l.fits(q); ok || m == 1 {
			break
		}
	}
	return q.MaxBodyBytes
}
