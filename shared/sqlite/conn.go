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

// pendingWrite is a write waiting for its group's transaction.
type pendingWrite struct {
	ctx  context.Context
	fn   func(tx *txn) error
	done chan error
}

// write runs fn in a transaction that holds the write lock from its start
// (BEGIN IMMEDIATE), so that its reads cannot go stale before it writes.
//
// Writes that arrive while another holds the connection share the next
// transaction (group commit): each runs inside a savepoint of its own,
// rolled back alone when it fails, and none returns before the COMMIT that
// makes it durable, so to each caller it is its own transaction. A
// thousand hosts committing rounds then cost a few transactions a second
// instead of one each: in WAL mode a transaction's fixed cost (taking the
// lock, appending the changed pages to the log) is most of a small write.
func (s *Store) write(ctx context.Context, fn func(tx *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &pendingWrite{ctx: ctx, fn: fn, done: make(chan error, 1)}
	s.wmu.Lock()
	s.writes = append(s.writes, w)
	s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case err := <-w.done:
		// A group that held the connection before us took this write.
		return err
	default:
	}
	// Leaders finish their whole group before they let the connection go,
	// so this write is still queued: lead the next group.
	s.wmu.Lock()
	group := s.writes
	s.writes = nil
	s.wmu.Unlock()
	s.runGroup(group)
	return <-w.done
}

// maxGroup bounds the writes of one transaction, so a long queue does not
// become one long transaction that holds readers of other processes back.
const maxGroup = 256

// runGroup runs the writes in transactions of at most maxGroup; the caller
// holds s.mu.
func (s *Store) runGroup(group []*pendingWrite) {
	for len(group) > 0 {
		n := min(len(group), maxGroup)
		s.runTx(group[:n])
		group = group[n:]
	}
}

// runTx runs the writes in one transaction and tells each its outcome.
func (s *Store) runTx(group []*pendingWrite) {
	s.writeTxs++
	if len(group) == 1 {
		w := group[0]
		w.done <- s.inTxLocked(w.ctx, "BEGIN IMMEDIATE", w.fn)
		return
	}
	errs := make([]error, len(group))
	err := s.inTxLocked(context.Background(), "BEGIN IMMEDIATE", func(tx *txn) error {
		for i, w := range group {
			errs[i] = tx.savepoint(w.ctx, w.fn)
		}
		return nil
	})
	for i, w := range group {
		if err != nil && errs[i] == nil {
			errs[i] = err
		}
		w.done <- errs[i]
	}
}

// savepoint runs fn inside a savepoint of the open transaction, undoing
// exactly its changes when it fails.
func (t *txn) savepoint(ctx context.Context, fn func(tx *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	end := context.WithoutCancel(ctx)
	if _, err := t.ExecContext(end, "SAVEPOINT w"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	if err := fn(t); err != nil {
		if _, rerr := t.ExecContext(end, "ROLLBACK TO w"); rerr != nil {
			return errors.Join(err, fmt.Errorf("rollback to savepoint: %w", rerr))
		}
		if _, rerr := t.ExecContext(end, "RELEASE w"); rerr != nil {
			return errors.Join(err, fmt.Errorf("release savepoint: %w", rerr))
		}
		return err
	}
	if _, err := t.ExecContext(end, "RELEASE w"); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
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
	return s.inTxLocked(ctx, begin, fn)
}

// inTxLocked is inTx for a caller that holds s.mu.
func (s *Store) inTxLocked(ctx context.Context, begin string, fn func(tx *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
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
