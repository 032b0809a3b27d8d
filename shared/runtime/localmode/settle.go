package localmode

import (
	"context"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// unsettled are the results written to the results file whose URLs the
// state has not committed yet: the engine publishes first and commits
// after. The record's offset (stateFiles.measure) stays before the first
// of them, so a run that stops between the two (kill -9, or a state the
// disk has no room for while the record still fits) finds them past the
// offset next time and does not write them twice (lineWriter.written).
//
// Only the engine's results are followed (settling): a URL refused at
// entry has nothing to commit. Those no commit names (a redirect target's
// URL evicted, a schedule's last result) settle after settleWithin: far
// longer than a commit takes, while bounding how far behind the record
// can stay.
type unsettled struct {
	now func() time.Time
	mu  sync.Mutex
	at  map[string]pendingLine
}

type pendingLine struct {
	offset int64 // where its write began: the record may not pass it
	since  time.Time
}

const settleWithin = time.Minute

func newUnsettled(now func() time.Time) *unsettled {
	return &unsettled{now: now, at: map[string]pendingLine{}}
}

// wrote notes results written at offset or after.
func (u *unsettled) wrote(rs []result.Result, offset int64) {
	now := u.now()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, r := range rs {
		if p, ok := u.at[r.ID]; !ok || p.offset > offset {
			u.at[r.ID] = pendingLine{offset: offset, since: now}
		}
	}
}

// committed settles the results of the URLs a commit finished or
// rescheduled.
func (u *unsettled) committed(cm hostqueue.Commit) {
	if len(cm.Done) == 0 && len(cm.Refreshed) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, id := range cm.Done {
		delete(u.at, id)
	}
	for _, r := range cm.Refreshed {
		delete(u.at, r.ID)
	}
}

// limit is the offset the record may keep: synced, or the start of the
// earliest write with a result not settled.
func (u *unsettled) limit(synced int64) int64 {
	now := u.now()
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, p := range u.at {
		if now.Sub(p.since) >= settleWithin {
			delete(u.at, id)
			continue
		}
		synced = min(synced, p.offset)
	}
	return synced
}

// settling is the engine's Publisher: its results are unsettled from
// before they are written (at the synced end or after) until the commit
// that follows, so a record written meanwhile stays before them.
type settling struct {
	hostqueue.Publisher
	u      *unsettled
	synced func() int64
}

func (s settling) Publish(ctx context.Context, rs []result.Result) error {
	s.u.wrote(rs, s.synced())
	return s.Publisher.Publish(ctx, rs)
}
