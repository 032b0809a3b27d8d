package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// txn runs statements inside one of the store's transactions, on its one
// connection, each statement prepared once and kept: parsing SQL cost more
// than running it. (database/sql's own Tx would prepare a connection's
// statements again in every transaction.)
//
// A transaction's context is checked when it begins; its statements then
// run to the end of the transaction without watching it. They take
// microseconds, and watching costs the driver a goroutine per statement.
type txn struct {
	s *Store
}

// stmt returns the prepared form of query; the caller holds s.mu.
func (s *Store) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.stmts[query]; ok {
		return st, nil
	}
	st, err := s.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.stmts[query] = st
	return st, nil
}

func (t *txn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(context.WithoutCancel(ctx), args...)
}

func (t *txn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(context.WithoutCancel(ctx), args...)
}

// row is what QueryRowContext returns: a *sql.Row, or the error that kept
// the statement from being prepared.
type row struct {
	r   *sql.Row
	err error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.r.Scan(dest...)
}

func (t *txn) QueryRowContext(ctx context.Context, query string, args ...any) row {
	st, err := t.s.stmt(ctx, query)
	if err != nil {
		return row{err: err}
	}
	return row{r: st.QueryRowContext(context.WithoutCancel(ctx), args...)}
}

// write runs fn in a transaction that holds the write lock from its start
// (BEGIN IMMEDIATE), so that its reads cannot go stale before it writes.
func (s *Store) write(ctx context.Context, fn func(tx *txn) error) error {
	return s.inTx(ctx, "BEGIN IMMEDIATE", fn)
}

// read runs fn in a read transaction: one consistent snapshot, which in WAL
// mode never waits for a writer.
func (s *Store) read(ctx context.Context, fn func(tx *txn) error) error {
	return s.inTx(ctx, "BEGIN", fn)
}

func (s *Store) inTx(ctx context.Context, begin string, fn func(tx *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return errors.New("sqlite store is closed")
	}
	tx := &txn{s: s}
	if _, err := tx.ExecContext(ctx, begin); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// The transaction ends here whatever happens to ctx: a connection
	// left inside one would hold the write lock, and (in memory) be the
	// only one there is.
	end := context.WithoutCancel(ctx)
	if err := fn(tx); err != nil {
		if _, rerr := tx.ExecContext(end, "ROLLBACK"); rerr != nil {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if _, err := tx.ExecContext(end, "COMMIT"); err != nil {
		_, _ = tx.ExecContext(end, "ROLLBACK")
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
