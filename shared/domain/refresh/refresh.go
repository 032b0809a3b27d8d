// Package refresh holds the rules of refresh schedules (docs/refresh.md):
// a URL fetched again at an interval, conditionally, whose results say
// whether its content changed. It decides; the stores keep a Schedule per
// refreshing URL and the engine fetches and applies Schedule.After.
//
// Every function is pure and takes the time it needs, so a schedule is
// tested in virtual time.
package refresh

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The parameter names this package's refusals cite (package params
// declares them; they are repeated here so the domain rules need no import
// of the parameter parser).
const (
	NameMinRefresh        = "MinRefresh"
	NameMaxRefresh        = "MaxRefresh"
	NameMaxRefreshPerHost = "MaxRefreshPerHost"
)

// Nutch's AdaptiveFetchSchedule rates as the issue states them: an
// unchanged fetch lengthens the interval by 40%, a changed one shortens
// it by 20%. Nutch's own defaults are 0.2 both ways; a wider step up
// reaches a quiet page's long interval in fewer fetches, and a step down
// half as wide keeps one change from undoing two quiet cycles.
const (
	adaptGrow   = 1.4
	adaptShrink = 0.8
)

// Bounds are MinRefresh and MaxRefresh: the intervals accepted, and the
// range an adaptive interval stays in.
type Bounds struct {
	Min, Max time.Duration
}

// ErrOutOfBounds is wrapped by Bounds.Check's refusals.
var ErrOutOfBounds = errors.New("refresh interval out of bounds")

// Check refuses an interval outside b, naming the parameter it breaks.
func (b Bounds) Check(d time.Duration) error {
	switch {
	case d < b.Min:
		return fmt.Errorf("%w: refresh %s is below %s (%s)", ErrOutOfBounds, d, NameMinRefresh, b.Min)
	case d > b.Max:
		return fmt.Errorf("%w: refresh %s is above %s (%s)", ErrOutOfBounds, d, NameMaxRefresh, b.Max)
	}
	return nil
}

// clamp returns d within b.
func (b Bounds) clamp(d time.Duration) time.Duration {
	return min(max(d, b.Min), b.Max)
}

// ParseInterval reads an input's refresh field: a Go duration ("90s",
// "15m", "6h"), or "0" to stop a schedule (stop is then true). It checks
// the syntax only; Bounds.Check the range, since the bounds are
// parameters.
func ParseInterval(s string) (d time.Duration, stop bool, err error) {
	if strings.TrimSpace(s) == "0" {
		return 0, true, nil
	}
	d, err = time.ParseDuration(s)
	if err != nil {
		return 0, false, fmt.Errorf(`refresh %q is not a duration such as "15m" or "6h" (or "0" to stop)`, clip(s, 40))
	}
	if d <= 0 {
		return 0, false, fmt.Errorf(`refresh %q is not positive (send "0" to stop a schedule)`, clip(s, 40))
	}
	return d, false, nil
}

// FirstDue is when a new schedule's first fetch is due: now plus an
// offset in [0, every) that a hash of key (host and URL) picks, so URLs
// sent together with one interval spread over it instead of falling due
// in the same second, and a resent URL keeps its offset.
func FirstDue(now time.Time, every time.Duration, key string) time.Time {
	if every <= 0 {
		return now
	}
	sum := sha256.Sum256([]byte(key))
	off := binary.BigEndian.Uint64(sum[:8]) % uint64(every)
	return now.Add(time.Duration(off))
}

// Next is the next due time after a fetch at `at` of a schedule due at
// due, with interval every (already adapted). Missed cycles coalesce:
// however late the fetch, the next is due after it, never at once.
// A fixed interval keeps its phase (the first due + k x every after at);
// an adaptive one counts from the fetch, as Nutch does, since its
// interval has just changed.
func Next(due, at time.Time, every time.Duration, adapt bool) time.Time {
	if every <= 0 {
		return at
	}
	if adapt || at.Before(due) {
		return at.Add(every)
	}
	k := at.Sub(due)/every + 1
	return due.Add(k * every)
}

// Adapt is the adaptive interval after a fetch of kind k: longer while
// unchanged, shorter when changed, the same after a failure (it says
// nothing about the content), always within b.
func Adapt(every time.Duration, k Kind, b Bounds) time.Duration {
	switch k {
	case Unchanged:
		every = time.Duration(float64(every) * adaptGrow)
	case Changed:
		every = time.Duration(float64(every) * adaptShrink)
	}
	return b.clamp(every)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
