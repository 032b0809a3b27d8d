package standalone

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, as shared/sqlite uses it
)

// progress is how far an input has been read into the state: the input's
// first Offset bytes (Lines lines, whose SHA-256 is Sum) are accepted or
// rejected, and never read as new URLs again.
type progress struct {
	Offset   int64
	Lines    int64
	Sum      []byte
	URLs     int64 // URLs accepted from those lines
	Rejected int64 // lines refused as invalid
}

// errMoved is returned by advance when the stored progress is not the one
// the caller started from: another process is reading the same input into
// the same state.
var errMoved = errors.New("another process advanced this input in the same state")

// ledger keeps the progress of each input, by name.
type ledger interface {
	get(ctx context.Context, name string) (progress, error)
	// advance moves name's progress from from to to, or fails with
	// errMoved when from is not what is stored.
	advance(ctx context.Context, name string, from, to progress) error
	close() error
}

// sqlLedger keeps progress in a table of the state file, beside the store's
// tables, through a connection of its own (SQLite's locks keep the two
// apart, as they keep two processes apart).
type sqlLedger struct {
	db *sql.DB
}

const ledgerSchema = `
CREATE TABLE IF NOT EXISTS input_progress (
	name     TEXT    PRIMARY KEY,
	offset   INTEGER NOT NULL,
	lines    INTEGER NOT NULL,
	sum      BLOB    NOT NULL,
	urls     INTEGER NOT NULL,
	rejected INTEGER NOT NULL,
	updated  INTEGER NOT NULL
) WITHOUT ROWID`

func openSQLLedger(path string) (*sqlLedger, error) {
	// The store opened the file already (WAL, its schema); this connection
	// only needs to wait for the store's writes rather than fail on them.
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("open input ledger %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(ledgerSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create input ledger in %s: %w", path, err)
	}
	return &sqlLedger{db: db}, nil
}

func (l *sqlLedger) get(ctx context.Context, name string) (progress, error) {
	var p progress
	err := l.db.QueryRowContext(ctx, "SELECT offset, lines, sum, urls, rejected FROM input_progress WHERE name = ?", name).
		Scan(&p.Offset, &p.Lines, &p.Sum, &p.URLs, &p.Rejected)
	if errors.Is(err, sql.ErrNoRows) {
		return progress{}, nil
	}
	if err != nil {
		return progress{}, fmt.Errorf("read progress of %s: %w", name, err)
	}
	return p, nil
}

func (l *sqlLedger) advance(ctx context.Context, name string, from, to progress) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("advance %s: %w", name, err)
	}
	defer tx.Rollback()
	var cur progress
	err = tx.QueryRowContext(ctx, "SELECT offset, sum FROM input_progress WHERE name = ?", name).Scan(&cur.Offset, &cur.Sum)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("advance %s: %w", name, err)
	}
	if cur.Offset != from.Offset || !bytes.Equal(cur.Sum, from.Sum) && from.Offset > 0 {
		return errMoved
	}
	if to.Sum == nil {
		to.Sum = []byte{}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO input_progress (name, offset, lines, sum, urls, rejected, updated) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET offset = excluded.offset, lines = excluded.lines, sum = excluded.sum,
		urls = excluded.urls, rejected = excluded.rejected, updated = excluded.updated`,
		name, to.Offset, to.Lines, to.Sum, to.URLs, to.Rejected, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("advance %s: %w", name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("advance %s: %w", name, err)
	}
	return nil
}

func (l *sqlLedger) close() error { return l.db.Close() }

// memLedger is the ledger of an in-memory state.
type memLedger struct {
	mu sync.Mutex
	m  map[string]progress
}

func newMemLedger() *memLedger { return &memLedger{m: map[string]progress{}} }

func (l *memLedger) get(_ context.Context, name string) (progress, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[name], nil
}

func (l *memLedger) advance(_ context.Context, name string, from, to progress) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.m[name]; cur.Offset != from.Offset {
		return errMoved
	}
	l.m[name] = to
	return nil
}

func (l *memLedger) close() error { return nil }
