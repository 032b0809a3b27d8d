package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

var _ hostqueue.IdempotencyStore = (*Store)(nil)

// The idempotency table: one row per POST /urls idempotency key, as the
// DynamoDB store keeps an i#<key> item. It is created on first use, not
// with the schema: it adds a table and changes none, so files written
// before it existed stay readable at the same schema version. Rows are
// swept a batch at a time by later claims once their window has ended.
const (
	idemTable = `CREATE TABLE IF NOT EXISTS idempotency (
	key        TEXT    PRIMARY KEY,
	body_hash  TEXT    NOT NULL,
	state      TEXT    NOT NULL,
	token      TEXT    NOT NULL,
	lock_until INTEGER NOT NULL DEFAULT 0,
	expires    INTEGER NOT NULL,
	status     INTEGER NOT NULL DEFAULT 0,
	ids        TEXT    NOT NULL DEFAULT '',
	denied     INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID`
	idemIndex = "CREATE INDEX IF NOT EXISTS idempotency_expires ON idempotency (expires)"

	qIdem = `SELECT body_hash, state, token, lock_until, expires, status, ids, denied
		FROM idempotency WHERE key = ?`
	qPutIdem = `INSERT OR REPLACE INTO idempotency
		(key, body_hash, state, token, lock_until, expires, status, ids, denied)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qSettleIdem = `UPDATE idempotency SET state = ?, status = ?, ids = ?, denied = ?, lock_until = 0
		WHERE key = ? AND token = ?`
	qSweepIdem = `DELETE FROM idempotency WHERE key IN
		(SELECT key FROM idempotency WHERE expires <= ? LIMIT ?)`
)

// idemSweepBatch bounds the expired rows one claim deletes.
const idemSweepBatch = 100

// Claim implements hostqueue.IdempotencyStore in one write transaction:
// the row is read, judged by the claim's Decide and written under
// SQLite's write lock, so no other claim can come between.
func (s *Store) Claim(ctx context.Context, c hostqueue.IdempotencyClaim) (hostqueue.IdempotencyRecord, error) {
	var out hostqueue.IdempotencyRecord
	err := s.write(ctx, func(tx *txn) error {
		if err := idemSchema(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, qSweepIdem, c.Now.UnixMilli(), idemSweepBatch); err != nil {
			return fmt.Errorf("sweep expired keys: %w", err)
		}
		cur, err := getIdem(ctx, tx, c.Key)
		if err != nil {
			return err
		}
		next, write, err := c.Decide(cur)
		if err != nil {
			return err
		}
		out = next
		if !write {
			return nil
		}
		_, err = tx.ExecContext(ctx, qPutIdem, c.Key, next.BodyHash, string(next.State), next.Token,
			millis(next.LockUntil), next.Expires.UnixMilli(), next.Status, strings.Join(next.Accepted, ","), next.Denied)
		return err
	})
	if err != nil {
		return hostqueue.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	return out, nil
}

// Settle implements hostqueue.IdempotencyStore.
func (s *Store) Settle(ctx context.Context, key, token string, outcome hostqueue.IdempotencyRecord) error {
	err := s.write(ctx, func(tx *txn) error {
		if err := idemSchema(ctx, tx); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, qSettleIdem, string(outcome.State), outcome.Status,
			strings.Join(outcome.Accepted, ","), outcome.Denied, key, token)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return errors.Join(hostqueue.ErrIdempotencyLost, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle idempotency key: %w", err)
	}
	return nil
}

// idemSchema creates the table where it is missing; on a file that has
// it, the statements change nothing.
func idemSchema(ctx context.Context, tx *txn) error {
	for _, q := range []string{idemTable, idemIndex} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create idempotency table: %w", err)
		}
	}
	return nil
}

func getIdem(ctx context.Context, tx *txn, key string) (*hostqueue.IdempotencyRecord, error) {
	var (
		r             hostqueue.IdempotencyRecord
		state, ids    string
		lock, expires int64
	)
	err := tx.QueryRowContext(ctx, qIdem, key).Scan(&r.BodyHash, &state, &r.Token, &lock, &expires, &r.Status, &ids, &r.Denied)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read idempotency key: %w", err)
	}
	r.State, r.Expires = hostqueue.IdempotencyState(state), time.UnixMilli(expires)
	if lock != 0 {
		r.LockUntil = time.UnixMilli(lock)
	}
	if ids != "" {
		r.Accepted = strings.Split(ids, ",")
	}
	return &r, nil
}

// millis is t in Unix milliseconds, zero for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
