package localmode

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// sqlRows keeps the tally's rows in a scratch database (scratchDB): the
// tier a long job's tally moves to (see memRows).
type sqlRows struct {
	db *sql.DB
	// stmts are the prepared multi-row statements, by text (parsing one
	// of 256 rows costs as much as running it).
	stmts map[string]*sql.Stmt
}

func newSQLRows() (*sqlRows, error) {
	db, err := scratchDB(tallySchema, "OFF")
	if err != nil {
		return nil, err
	}
	return &sqlRows{db: db, stmts: map[string]*sql.Stmt{}}, nil
}

func (s *sqlRows) close() error {
	for _, st := range s.stmts {
		if st != nil {
			st.Close()
		}
	}
	return s.db.Close()
}

// sqlTx is a transaction of the scratch database, with its prepared
// statements.
type sqlTx struct {
	*sql.Tx
	s *sqlRows
}

// stmt returns q prepared, in the transaction. Every statement is of one
// of a few shapes (chunkSizes), each prepared once and kept: after the
// transaction that first needs it (the one connection is the
// transaction's until then), it is prepared on the database.
func (tx sqlTx) stmt(q string) (*sql.Stmt, error) {
	st, ok := tx.s.stmts[q]
	if st == nil {
		if !ok {
			tx.s.stmts[q] = nil
		}
		return tx.Prepare(q)
	}
	return tx.Stmt(st), nil
}

func (s *sqlRows) tx(f func(rowOps) error) error {
	sqltx, err := s.db.Begin()
	if err != nil {
		return err
	}
	tx := sqlTx{Tx: sqltx, s: s}
	if err := f(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	for q, st := range s.stmts {
		if st == nil {
			if st, err = s.db.Prepare(q); err != nil {
				return err
			}
			s.stmts[q] = st
		}
	}
	return nil
}

func (tx sqlTx) insert(rows [][2]string, state int) (int, error) {
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

func (tx sqlTx) move(ids []string, from, to int) (map[string]bool, error) {
	return tx.idsWhere("UPDATE owed SET state = "+strconv.Itoa(to)+" WHERE state = "+strconv.Itoa(from)+" AND id IN (%s) RETURNING id", ids)
}

func (tx sqlTx) known(ids []string) (map[string]bool, error) {
	return tx.idsWhere("SELECT id FROM owed WHERE id IN (%s)", ids)
}

func (tx sqlTx) hold(ids []string, held bool) error {
	v := "0"
	if held {
		v = "1"
	}
	_, err := tx.idsWhere("UPDATE owed SET held = "+v+" WHERE id IN (%s) RETURNING id", ids)
	return err
}

func (tx sqlTx) unholdAll() error {
	_, err := tx.Exec("UPDATE owed SET held = 0 WHERE held = 1")
	return err
}

func (tx sqlTx) accept(hosts map[string]int64) error {
	hs := slices.Sorted(maps.Keys(hosts))
	return chunked(hs, func(hs []string) error {
		args := make([]any, 0, 2*len(hs))
		for _, h := range hs {
			args = append(args, h, hosts[h])
		}
		st, err := tx.stmt("INSERT OR IGNORE INTO accepted (host, at) VALUES " + placeholders(len(hs), "(?, ?)"))
		if err != nil {
			return err
		}
		_, err = st.Exec(args...)
		return err
	})
}

// idsWhere returns those of ids that q (with "%s" for the ids'
// placeholders) returns.
func (tx sqlTx) idsWhere(q string, ids []string) (map[string]bool, error) {
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

func (s *sqlRows) missing(limit int) (map[string]string, error) {
	out := map[string]string{}
	rows, err := s.db.Query("SELECT id, url FROM owed WHERE state = ? LIMIT ?", owing, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, u string
		if err := rows.Scan(&id, &u); err != nil {
			return nil, err
		}
		out[id] = u
	}
	return out, rows.Err()
}

func (s *sqlRows) settle(ctx context.Context, each func(func(ids []string) error) error) (int, error) {
	if _, err := s.db.ExecContext(ctx, "DELETE FROM queued_now"); err != nil {
		return 0, err
	}
	err := each(func(ids []string) error {
		sqltx, err := s.db.Begin()
		if err != nil {
			return err
		}
		st, err := sqltx.Prepare("INSERT OR IGNORE INTO queued_now (id) VALUES (?)")
		if err == nil {
			for _, id := range ids {
				if _, err = st.Exec(id); err != nil {
					break
				}
			}
			st.Close()
		}
		if err != nil {
			sqltx.Rollback()
			return err
		}
		return sqltx.Commit()
	})
	if err != nil {
		return 0, err
	}
	return changed(s.db.ExecContext(ctx, "UPDATE owed SET state = ? WHERE state = ? AND held = 0 AND id NOT IN (SELECT id FROM queued_now)", elsewhere, owing))
}

func (s *sqlRows) acceptedAt(host string) (int64, bool, error) {
	var at int64
	err := s.db.QueryRow("SELECT at FROM accepted WHERE host = ?", host).Scan(&at)
	if err == sql.ErrNoRows {
		return 0, false, nil
	}
	return at, err == nil, err
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
