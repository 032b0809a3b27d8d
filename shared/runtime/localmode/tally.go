package localmode

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// tally follows which accepted URLs still owe a result. The run ends when
// none does: the store cannot say it sooner, because a drained host keeps
// its last round queued while its worker lingers for late URLs.
//
// Its bookkeeping is per URL (which ids owe a result, which have one). It
// starts in memory (memRows) and moves, once it holds tallyMemRows rows,
// to a table of a scratch database (sqlRows), on disk: a job's memory must
// not grow with its length, and a short job should not pay a database's
// statements for every result. It is this process's own (another process
// on the same state has its own), and gone at Close. Only counts stay in
// memory past the move.
type tally struct {
	follow bool // FollowCrossHostRedirects: a redirect's target owes a result too
	// memLimit is the rows kept in memory before the move (tallyMemRows).
	memLimit int

	mu sync.Mutex
	// rows is where the rows are now; mem is the same store while it is
	// the memory tier, nil once the rows moved to the database.
	rows       rowStore
	mem        *memRows
	expected   int
	owed       int // rows with state owing
	byStatus   map[result.Status]int
	results    int
	duplicates int
	// doneElsewhere counts the URLs another process finished.
	doneElsewhere int
	// empty gets a value whenever nothing is owed any more.
	empty chan struct{}
	// err is the first failure of the scratch database; broken is closed
	// then (the run cannot tell any more when it is done).
	err    error
	broken chan struct{}
}

// States of a tally row.
const (
	owing     = 0 // accepted, no result written yet
	resulted  = 1 // a result is written (by this process)
	elsewhere = 2 // another process on the same state finished it
)

// rowStore keeps the tally's rows: memRows or sqlRows.
type rowStore interface {
	// tx runs f as one step of the store.
	tx(f func(rowOps) error) error
	// missing returns up to limit of the owed rows' URLs, by id.
	missing(limit int) (map[string]string, error)
	// settle moves to elsewhere every owed row not held back whose id is
	// not among those each passes (the store's queued ids, in batches).
	settle(ctx context.Context, each func(func(ids []string) error) error) (int, error)
	acceptedAt(host string) (int64, bool, error)
	close() error
}

// rowOps are the changes a rowStore.tx may make.
type rowOps interface {
	// insert adds rows (id, url) in state, unless their id is known; it
	// returns how many it added.
	insert(rows [][2]string, state int) (int, error)
	// move sets to those of ids in state from, and returns them.
	move(ids []string, from, to int) (map[string]bool, error)
	// known returns those of ids that have a row.
	known(ids []string) (map[string]bool, error)
	hold(ids []string, held bool) error
	unholdAll() error
	// accept notes when ingest first accepted a URL of each host.
	accept(hosts map[string]int64) error
}

func newTally(followRedirects bool) (*tally, error) {
	mem := newMemRows()
	return &tally{follow: followRedirects, memLimit: tallyMemRows, rows: mem, mem: mem, byStatus: map[result.Status]int{},
		empty: make(chan struct{}, 1), broken: make(chan struct{})}, nil
}

func (t *tally) close() error {
	return t.rows.close()
}

// fail records the first failure; t.mu is held.
func (t *tally) fail(err error) {
	if t.err == nil {
		t.err = fmt.Errorf("tally of urls owed a result: %w", err)
		close(t.broken)
	}
}

// Err returns the tally's failure, if any.
func (t *tally) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// tx runs f as one step of the rows' store, then moves the rows to the
// database if memory holds too many; t.mu is held.
func (t *tally) tx(f func(tx rowOps) error) {
	if t.err != nil {
		return
	}
	if err := t.rows.tx(f); err != nil {
		t.fail(err)
		return
	}
	if t.mem == nil || t.mem.size() < t.memLimit {
		return
	}
	db, err := newSQLRows()
	if err == nil {
		if err = t.mem.spill(db); err != nil {
			db.close()
		}
	}
	if err != nil {
		t.fail(fmt.Errorf("move %d rows to a scratch database: %w", t.mem.size(), err))
		return
	}
	t.rows, t.mem = db, nil
}

// expect adds URLs that owe a result (id -> URL), unless they are known
// already (owed, or with a result). It returns how many it added.
func (t *tally) expect(want map[string]string) int {
	if len(want) == 0 {
		return 0
	}
	rows := make([][2]string, 0, len(want))
	for id, u := range want {
		rows = append(rows, [2]string{id, u})
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	t.tx(func(tx rowOps) error {
		var err error
		n, err = tx.insert(rows, owing)
		return err
	})
	t.expected += n
	t.owed += n
	return n
}

// hold marks owed URLs as waiting in the input's overflow, and unhold as
// queued again: settle leaves held ones alone, since they are in no queue.
func (t *tally) hold(ids []string, held bool) {
	if len(ids) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx rowOps) error { return tx.hold(ids, held) })
}

// unholdAll clears every held mark: the overflow is empty (another process
// may have taken some of it).
func (t *tally) unholdAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx rowOps) error { return tx.unholdAll() })
}

// seen takes results that are written. A result for a URL the tally does
// not know (its ingest has not returned yet, or it came in a way the tally
// did not see) makes it expected and done at once.
func (t *tally) seen(rs []result.Result) {
	if len(rs) == 0 {
		return
	}
	ids := make([]string, 0, len(rs))
	urls := map[string]string{}
	for _, r := range rs {
		if _, ok := urls[r.ID]; !ok {
			urls[r.ID] = r.URL
			ids = append(ids, r.ID)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx rowOps) error {
		// Those owed, then those another process was thought to have
		// done, then the unknown; what is left had a result already.
		first, err := tx.move(ids, owing, resulted)
		if err != nil {
			return err
		}
		t.owed -= len(first)
		rest := slices.DeleteFunc(ids, func(id string) bool { return first[id] })
		if t.doneElsewhere > 0 && len(rest) > 0 {
			again, err := tx.move(rest, elsewhere, resulted)
			if err != nil {
				return err
			}
			maps.Copy(first, again)
			rest = slices.DeleteFunc(rest, func(id string) bool { return again[id] })
		}
		if len(rest) > 0 {
			known, err := tx.known(rest)
			if err != nil {
				return err
			}
			var unknown [][2]string
			for _, id := range rest {
				if !known[id] {
					unknown = append(unknown, [2]string{id, urls[id]})
					first[id] = true
				}
			}
			n, err := tx.insert(unknown, resulted)
			if err != nil {
				return err
			}
			t.expected += n
		}
		var targets [][2]string
		for _, r := range rs {
			t.results++
			if !first[r.ID] {
				// A refreshing URL's later results share its id
				// (docs/refresh.md): not duplicates.
				if r.Seq <= 1 {
					t.duplicates++
				}
				continue
			}
			delete(first, r.ID) // a second copy in this batch is a duplicate
			t.byStatus[r.Status]++
			// The engine queues a cross-host redirect's target under this
			// id (worker.redirect) before the redirect's result goes out.
			if t.follow && r.Status == result.StatusRedirect && r.Error == "" && r.Location != "" {
				targets = append(targets, [2]string{urlmsg.MakeID(r.ID, 0, r.Location), r.Location})
			}
		}
		n, err := tx.insert(targets, owing)
		t.expected += n
		t.owed += n
		return err
	})
	t.signal()
}

func (t *tally) signal() {
	if t.owed <= 0 {
		select {
		case t.empty <- struct{}{}:
		default:
		}
	}
}

func (t *tally) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owed
}

// missing returns up to limit of the URLs still owed a result, by id.
func (t *tally) missing(limit int) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil || t.owed == 0 {
		return map[string]string{}
	}
	out, err := t.rows.missing(limit)
	if err != nil {
		t.fail(err)
		return map[string]string{}
	}
	return out
}

// settle marks as done elsewhere the URLs owed a result that are neither
// queued (each calls queued with a batch of the store's queued ids until
// it returns false) nor held back: another process finished them.
func (t *tally) settle(ctx context.Context, each func(func(ids []string) error) error) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.rows.settle(ctx, each)
	if err != nil {
		t.fail(err)
		return 0, t.err
	}
	t.owed -= n
	t.doneElsewhere += n
	t.signal()
	return n, nil
}

func (t *tally) elsewhere() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doneElsewhere
}

// accept notes that ingest accepted URLs of these hosts now (the first
// time of each is kept).
func (t *tally) accept(hosts map[string]bool, now time.Time) {
	if len(hosts) == 0 {
		return
	}
	at := make(map[string]int64, len(hosts))
	for h := range hosts {
		at[h] = now.UnixNano()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx rowOps) error { return tx.accept(at) })
}

// acceptedAt is when ingest first accepted a URL of host.
func (t *tally) acceptedAt(host string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return time.Time{}, false
	}
	at, ok, err := t.rows.acceptedAt(host)
	if err != nil || !ok {
		return time.Time{}, false
	}
	return time.Unix(0, at), true
}
