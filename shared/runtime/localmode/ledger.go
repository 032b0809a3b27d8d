package localmode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver, as shared/embedded/sqlite uses it

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
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

// ledger keeps the progress of each input, by name, and the input's
// overflow: URLs read and accepted whose host's queue had no room for them
// (held back, see holdback.go). They are kept in the same transaction as
// the progress that read them, so a run that stops neither skips nor
// repeats them. It lives in tables of the state file, beside the store's
// tables, through a connection of its own (SQLite's locks keep the two
// apart, as they keep two processes apart); without a state file, in a
// scratch database of the process.
type ledger struct {
	db *sql.DB
}

// heldURL is a URL of the overflow: seq orders it among those of its queue
// key.
type heldURL struct {
	seq int64
	key string
	msg urlmsg.Message
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
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS input_held (
	seq INTEGER PRIMARY KEY,
	key TEXT    NOT NULL,
	msg BLOB    NOT NULL
);
CREATE INDEX IF NOT EXISTS input_held_key ON input_held (key, seq);
CREATE TABLE IF NOT EXISTS input_head (
	name TEXT    PRIMARY KEY,
	len  INTEGER NOT NULL,
	sum  BLOB    NOT NULL
) WITHOUT ROWID;
`

// headLen bounds the start of an input by which it is recognised under
// another name (sameHead): what the reader's buffer holds at once.
const headLen = 64 << 10

// sameHead returns the name of an input read before whose recorded start
// is the start of this one (start: its first bytes, up to headLen), the
// longest such start first; "" when none is. The same list moved or
// renamed, or extended at its end, starts the same.
func (l *ledger) sameHead(ctx context.Context, start []byte) (string, error) {
	rows, err := l.db.QueryContext(ctx, "SELECT name, len, sum FROM input_head WHERE len <= ? ORDER BY len DESC, name", len(start))
	if err != nil {
		return "", fmt.Errorf("read input heads: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int
		var sum []byte
		if err := rows.Scan(&name, &n, &sum); err != nil {
			return "", fmt.Errorf("read input heads: %w", err)
		}
		if got := sha256.Sum256(start[:n]); n > 0 && bytes.Equal(got[:], sum) {
			return name, nil
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read input heads: %w", err)
	}
	return "", nil
}

// noteHead records an input's start (up to headLen bytes) under its name,
// once: the first reading's start is the one a copy must match.
func (l *ledger) noteHead(ctx context.Context, name string, start []byte) error {
	if len(start) == 0 {
		return nil
	}
	sum := sha256.Sum256(start)
	if _, err := l.db.ExecContext(ctx, "INSERT INTO input_head (name, len, sum) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING", name, len(start), sum[:]); err != nil {
		return fmt.Errorf("record the start of %s: %w", name, err)
	}
	return nil
}

func openLedger(path string) (*ledger, error) {
	if path == "" {
		db, err := scratchDB(ledgerSchema, "MEMORY")
		if err != nil {
			return nil, fmt.Errorf("input ledger: %w", err)
		}
		return &ledger{db: db}, nil
	}
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
	return &ledger{db: db}, nil
}

func (l *ledger) get(ctx context.Context, name string) (progress, error) {
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

// advance moves name's progress from from to to, and adds held to the
// overflow, or fails with errMoved when from is not what is stored.
func (l *ledger) advance(ctx context.Context, name string, from, to progress, held []heldURL) error {
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
	if len(held) > 0 {
		st, err := tx.PrepareContext(ctx, "INSERT INTO input_held (key, msg) VALUES (?, ?)")
		if err != nil {
			return fmt.Errorf("hold urls of %s back: %w", name, err)
		}
		defer st.Close()
		for _, h := range held {
			b, _ := json.Marshal(h.msg)
			if _, err := st.ExecContext(ctx, h.key, b); err != nil {
				return fmt.Errorf("hold urls of %s back: %w", name, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("advance %s: %w", name, err)
	}
	return nil
}

func (l *ledger) close() error { return l.db.Close() }

// heldKeys returns the queue keys with URLs in the overflow.
func (l *ledger) heldKeys(ctx context.Context) ([]string, error) {
	rows, err := l.db.QueryContext(ctx, "SELECT DISTINCT key FROM input_held")
	if err != nil {
		return nil, fmt.Errorf("read held urls: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("read held urls: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read held urls: %w", err)
	}
	return out, nil
}

// heldCount is how many URLs of key are held back.
func (l *ledger) heldCount(ctx context.Context, key string) (int, error) {
	var n int
	if err := l.db.QueryRowContext(ctx, "SELECT count(*) FROM input_held WHERE key = ?", key).Scan(&n); err != nil {
		return 0, fmt.Errorf("count held urls of %s: %w", key, err)
	}
	return n, nil
}

// heldHead returns the oldest n URLs held back for key.
func (l *ledger) heldHead(ctx context.Context, key string, n int) ([]heldURL, error) {
	return l.scanHeld(ctx, "SELECT seq, key, msg FROM input_held WHERE key = ? ORDER BY seq LIMIT ?", key, n)
}

// heldAfter returns up to n held URLs of any key after seq, in order (to
// walk the whole overflow).
func (l *ledger) heldAfter(ctx context.Context, seq int64, n int) ([]heldURL, error) {
	return l.scanHeld(ctx, "SELECT seq, key, msg FROM input_held WHERE seq > ? ORDER BY seq LIMIT ?", seq, n)
}

func (l *ledger) scanHeld(ctx context.Context, q string, args ...any) ([]heldURL, error) {
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read held urls: %w", err)
	}
	defer rows.Close()
	var out []heldURL
	for rows.Next() {
		var h heldURL
		var b []byte
		if err := rows.Scan(&h.seq, &h.key, &b); err != nil {
			return nil, fmt.Errorf("read held urls: %w", err)
		}
		if err := json.Unmarshal(b, &h.msg); err != nil {
			return nil, fmt.Errorf("held url %d of %s: %w", h.seq, h.key, err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read held urls: %w", err)
	}
	return out, nil
}

// release removes held URLs that are queued now.
func (l *ledger) release(ctx context.Context, seqs []int64) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("release held urls: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, "DELETE FROM input_held WHERE seq = ?")
	if err != nil {
		return fmt.Errorf("release held urls: %w", err)
	}
	defer st.Close()
	for _, s := range seqs {
		if _, err := st.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("release held urls: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("release held urls: %w", err)
	}
	return nil
}
