package standalone

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/result"
	"github.com/urldownloader/urldownloader/shared/urlmsg"
)

// tally follows which accepted URLs still owe a result. The run ends when
// none does: the store cannot say it sooner, because a drained host keeps
// its last round queued while its worker lingers for late URLs.
//
// Its bookkeeping is per URL (which ids owe a result, which have one), so
// it lives in a table of a scratch database (scratchDB), on disk, not in
// memory: a job's memory must not grow with its length. It is this
// process's own (another process on the same state has its own), and
// gone at Close. Only counts stay in memory.
type tally struct {
	follow bool // FollowCrossHostRedirects: a redirect's target owes a result too
	db     *sql.DB

	mu         sync.Mutex
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

const tallySchema = `
CREATE TABLE owed (
	id    TEXT    PRIMARY KEY,
	url   TEXT    NOT NULL,
	state INTEGER NOT NULL,
	-- held: waiting in the input's overflow (ledger), not in a queue
	held  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX owed_owing ON owed (state) WHERE state = 0;
CREATE TABLE queued_now (id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE accepted (host TEXT PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID;
`

// scratchDB opens a private database of this process: SQLite's temporary
// on-disk database (an empty file name: a file in the temporary folder,
// deleted when the connection closes; its page cache bounds the memory it
// takes). It has one connection for its whole life, since a second would
// be another database.
func scratchDB(schema string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:?_pragma=journal_mode(MEMORY)&_pragma=synchronous(OFF)&_pragma=temp_store(FILE)")
	if err != nil {
		return nil, fmt.Errorf("open scratch database: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create scratch tables: %w", err)
	}
	return db, nil
}

func newTally(followRedirects bool) (*tally, error) {
	db, err := scratchDB(tallySchema)
	if err != nil {
		return nil, fmt.Errorf("tally: %w", err)
	}
	return &tally{follow: followRedirects, db: db, byStatus: map[result.Status]int{},
		empty: make(chan struct{}, 1), broken: make(chan struct{})}, nil
}

func (t *tally) close() error { return t.db.Close() }

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

// tx runs f in a transaction of the scratch database; t.mu is held.
func (t *tally) tx(f func(tx *sql.Tx) error) {
	if t.err != nil {
		return
	}
	tx, err := t.db.Begin()
	if err == nil {
		if err = f(tx); err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
	}
	if err != nil {
		t.fail(err)
	}
}

func changed(r sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := r.RowsAffected()
	return int(n), err
}

// expect adds URLs that owe a result (id -> URL), unless they are known
// already (owed, or with a result). It returns how many it added.
func (t *tally) expect(want map[string]string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	t.tx(func(tx *sql.Tx) error {
		st, err := tx.Prepare("INSERT OR IGNORE INTO owed (id, url, state) VALUES (?, ?, 0)")
		if err != nil {
			return err
		}
		defer st.Close()
		for id, u := range want {
			c, err := changed(st.Exec(id, u))
			if err != nil {
				return err
			}
			n += c
		}
		return nil
	})
	t.expected += n
	t.owed += n
	return n
}

// forget drops URLs that were not accepted after all (a failed ingest).
func (t *tally) forget(ids []string) {
	if len(ids) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	t.tx(func(tx *sql.Tx) error {
		st, err := tx.Prepare("DELETE FROM owed WHERE id = ? AND state = 0")
		if err != nil {
			return err
		}
		defer st.Close()
		for _, id := range ids {
			c, err := changed(st.Exec(id))
			if err != nil {
				return err
			}
			n += c
		}
		return nil
	})
	t.expected -= n
	t.owed -= n
	t.signal()
}

// hold marks owed URLs as waiting in the input's overflow, and unhold as
// queued again: settle leaves held ones alone, since they are in no queue.
func (t *tally) hold(ids []string, held bool) {
	if len(ids) == 0 {
		return
	}
	v := 0
	if held {
		v = 1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx *sql.Tx) error {
		st, err := tx.Prepare("UPDATE owed SET held = ? WHERE id = ?")
		if err != nil {
			return err
		}
		defer st.Close()
		for _, id := range ids {
			if _, err := st.Exec(v, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// unholdAll clears every held mark: the overflow is empty (another process
// may have taken some of it).
func (t *tally) unholdAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx *sql.Tx) error {
		_, err := tx.Exec("UPDATE owed SET held = 0 WHERE held = 1")
		return err
	})
}

// seen takes results that are written.
func (t *tally) seen(rs []result.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx *sql.Tx) error {
		done, err := tx.Prepare("UPDATE owed SET state = 1 WHERE id = ? AND state <> 1")
		if err != nil {
			return err
		}
		defer done.Close()
		add, err := tx.Prepare("INSERT OR IGNORE INTO owed (id, url, state) VALUES (?, ?, ?)")
		if err != nil {
			return err
		}
		defer add.Close()
		var state int
		get, err := tx.Prepare("SELECT state FROM owed WHERE id = ?")
		if err != nil {
			return err
		}
		defer get.Close()
		for _, r := range rs {
			t.results++
			if err := get.QueryRow(r.ID).Scan(&state); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			} else if err != nil {
				// A result for a URL this process did not expect: it
				// has one now.
				if _, err := add.Exec(r.ID, r.URL, resulted); err != nil {
					return err
				}
			} else if state == resulted {
				t.duplicates++
				continue
			} else if _, err := done.Exec(r.ID); err != nil {
				return err
			} else if state == owing {
				t.owed--
			}
			t.byStatus[r.Status]++
			// The engine queues a cross-host redirect's target under this
			// id (worker.redirect) before the redirect's result goes out.
			if t.follow && r.Status == result.StatusRedirect && r.Error == "" && r.Location != "" {
				c, err := changed(add.Exec(urlmsg.MakeID(r.ID, 0, r.Location), r.Location, owing))
				if err != nil {
					return err
				}
				t.expected += c
				t.owed += c
			}
		}
		return nil
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
	out := map[string]string{}
	if t.err != nil || t.owed == 0 {
		return out
	}
	rows, err := t.db.Query("SELECT id, url FROM owed WHERE state = 0 LIMIT ?", limit)
	if err != nil {
		t.fail(err)
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var id, u string
		if err := rows.Scan(&id, &u); err != nil {
			t.fail(err)
			return out
		}
		out[id] = u
	}
	if err := rows.Err(); err != nil {
		t.fail(err)
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
	if _, err := t.db.ExecContext(ctx, "DELETE FROM queued_now"); err != nil {
		t.fail(err)
		return 0, t.err
	}
	err := each(func(ids []string) error {
		var err error
		t.tx(func(tx *sql.Tx) error {
			st, err := tx.Prepare("INSERT OR IGNORE INTO queued_now (id) VALUES (?)")
			if err != nil {
				return err
			}
			defer st.Close()
			for _, id := range ids {
				if _, err := st.Exec(id); err != nil {
					return err
				}
			}
			return nil
		})
		if t.err != nil {
			err = t.err
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	n, err := changed(t.db.ExecContext(ctx, "UPDATE owed SET state = 2 WHERE state = 0 AND held = 0 AND id NOT IN (SELECT id FROM queued_now)"))
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
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx *sql.Tx) error {
		st, err := tx.Prepare("INSERT OR IGNORE INTO accepted (host, at) VALUES (?, ?)")
		if err != nil {
			return err
		}
		defer st.Close()
		for h := range hosts {
			if _, err := st.Exec(h, now.UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
}

// acceptedAt is when ingest first accepted a URL of host.
func (t *tally) acceptedAt(host string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var at int64
	if t.err != nil || t.db.QueryRow("SELECT at FROM accepted WHERE host = ?", host).Scan(&at) != nil {
		return time.Time{}, false
	}
	return time.Unix(0, at), true
}
