package standalone

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	// stmts are the prepared multi-row statements, by text (parsing one
	// of 256 rows costs as much as running it).
	stmts map[string]*sql.Stmt

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
CREATE TABLE queued_now (id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE accepted (host TEXT PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID;
`

// scratchDB opens a private database of this process: SQLite's temporary
// on-disk database (an empty file name: a file in the temporary folder,
// deleted when the connection closes; its page cache bounds the memory it
// takes: 32 MiB). It has one connection for its whole life, since a second would
// be another database. journal is its journal_mode: MEMORY where a
// transaction may need undoing, OFF where a failure ends the database's
// use anyway (the tally's: fail).
func scratchDB(schema, journal string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:?_pragma=journal_mode("+journal+")&_pragma=synchronous(OFF)&_pragma=temp_store(FILE)&_pragma=cache_size(-32768)")
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
	db, err := scratchDB(tallySchema, "OFF")
	if err != nil {
		return nil, fmt.Errorf("tally: %w", err)
	}
	return &tally{follow: followRedirects, db: db, stmts: map[string]*sql.Stmt{}, byStatus: map[result.Status]int{},
		empty: make(chan struct{}, 1), broken: make(chan struct{})}, nil
}

func (t *tally) close() error {
	for _, st := range t.stmts {
		if st != nil {
			st.Close()
		}
	}
	return t.db.Close()
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

// tallyTx is a transaction of the scratch database, with the tally's
// prepared statements.
type tallyTx struct {
	*sql.Tx
	t *tally
}

// stmt returns q prepared, in the transaction. Every statement is of one
// of a few shapes (chunkSizes), each prepared once and kept: after the
// transaction that first needs it (the one connection is the
// transaction's until then), it is prepared on the database.
func (tx tallyTx) stmt(q string) (*sql.Stmt, error) {
	st, ok := tx.t.stmts[q]
	if st == nil {
		if !ok {
			tx.t.stmts[q] = nil
		}
		return tx.Prepare(q)
	}
	return tx.Stmt(st), nil
}

// tx runs f in a transaction of the scratch database; t.mu is held.
func (t *tally) tx(f func(tx tallyTx) error) {
	if t.err != nil {
		return
	}
	sqltx, err := t.db.Begin()
	tx := tallyTx{Tx: sqltx, t: t}
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
	for q, st := range t.stmts {
		if st == nil {
			if st, err = t.db.Prepare(q); err != nil {
				t.fail(err)
				return
			}
			t.stmts[q] = st
		}
	}
}

func changed(r sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := r.RowsAffected()
	return int(n), err
}

// chunkSizes are the row counts multi-row statements are cut into,
// largest first (SQLite takes up to 32,766 parameters): one statement per
// row costs more than the row, and a few fixed shapes let every statement
// be prepared once (preparing one costs as much as running it: with a
// shape per batch size, preparing was a sixth of the tally's time).
var chunkSizes = []int{256, 64, 16, 4, 1}

// chunked calls f with xs in pieces of chunkSizes.
func chunked[T any](xs []T, f func([]T) error) error {
	for len(xs) > 0 {
		n := 1
		for _, size := range chunkSizes {
			if size <= len(xs) {
				n = size
				break
			}
		}
		if err := f(xs[:n]); err != nil {
			return err
		}
		xs = xs[n:]
	}
	return nil
}

// placeholders is "(?, ?), (?, ?)..." for n rows of a columns (row is
// the row's text, e.g. "(?, ?, 0)"), or "?, ?..." for row "?".
func placeholders(n int, row string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// insertOwed adds rows (id, url) in state st, unless their id is known;
// it returns how many it added.
func insertOwed(tx tallyTx, rows [][2]string, state int) (int, error) {
	n := 0
	err := chunked(rows, func(rows [][2]string) error {
		args := make([]any, 0, 2*len(rows))
		for _, r := range rows {
			args = append(args, r[0], r[1])
		}
		st, err := tx.stmt("INSERT OR IGNORE INTO owed (id, url, state) VALUES " + placeholders(len(rows), "(?, ?, "+strconv.Itoa(state)+")"))
		if err != nil {
			return err
		}
		c, err := changed(st.Exec(args...))
		n += c
		return err
	})
	return n, err
}

// idsWhere returns those of ids that q (with "%s" for the ids'
// placeholders) returns.
func idsWhere(tx tallyTx, q string, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	err := chunked(ids, func(ids []string) error {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		st, err := tx.stmt(fmt.Sprintf(q, placeholders(len(ids), "?")))
		if err != nil {
			return err
		}
		rows, err := st.Query(args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			out[id] = true
		}
		return rows.Err()
	})
	return out, err
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
	t.tx(func(tx tallyTx) error {
		var err error
		n, err = insertOwed(tx, rows, owing)
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
	v := "0"
	if held {
		v = "1"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx tallyTx) error {
		_, err := idsWhere(tx, "UPDATE owed SET held = "+v+" WHERE id IN (%s) RETURNING id", ids)
		return err
	})
}

// unholdAll clears every held mark: the overflow is empty (another process
// may have taken some of it).
func (t *tally) unholdAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tx(func(tx tallyTx) error {
		_, err := tx.Exec("UPDATE owed SET held = 0 WHERE held = 1")
		return err
	})
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
	t.tx(func(tx tallyTx) error {
		// Those owed, then those another process was thought to have
		// done, then the unknown; what is left had a result already.
		first, err := idsWhere(tx, "UPDATE owed SET state = 1 WHERE state = 0 AND id IN (%s) RETURNING id", ids)
		if err != nil {
			return err
		}
		t.owed -= len(first)
		rest := slices.DeleteFunc(ids, func(id string) bool { return first[id] })
		if t.doneElsewhere > 0 && len(rest) > 0 {
			again, err := idsWhere(tx, "UPDATE owed SET state = 1 WHERE state = 2 AND id IN (%s) RETURNING id", rest)
			if err != nil {
				return err
			}
			maps.Copy(first, again)
			rest = slices.DeleteFunc(rest, func(id string) bool { return again[id] })
		}
		if len(rest) > 0 {
			known, err := idsWhere(tx, "SELECT id FROM owed WHERE id IN (%s)", rest)
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
			n, err := insertOwed(tx, unknown, resulted)
			if err != nil {
				return err
			}
			t.expected += n
		}
		var targets [][2]string
		for _, r := range rs {
			t.results++
			if !first[r.ID] {
				t.duplicates++
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
		n, err := insertOwed(tx, targets, owing)
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
		t.tx(func(tx tallyTx) error {
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
	t.tx(func(tx tallyTx) error {
		return chunked(slices.Collect(maps.Keys(hosts)), func(hs []string) error {
			args := make([]any, 0, 2*len(hs))
			for _, h := range hs {
				args = append(args, h, now.UnixNano())
			}
			st, err := tx.stmt("INSERT OR IGNORE INTO accepted (host, at) VALUES " + placeholders(len(hs), "(?, ?)"))
			if err != nil {
				return err
			}
			_, err = st.Exec(args...)
			return err
		})
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
