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
	// write: the transaction holds the write lock (BEGIN IMMEDIATE), so
	// it may use the hosts cache (hostcache.go).
	write bool
}

// stmt returns the prepared form of query; only serve calls it.
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

// op is a read or a write waiting for the store's connection.
type op struct {
	ctx   context.Context
	fn    func(tx *txn) error
	write bool
	done  chan error
}

// One goroutine (serve) owns the connection and runs every read and write,
// in batches of what queued while it ran the last one: the reads of a
// batch share one read transaction, its writes one write transaction
// (group commit, below). Callers only queue their operation and wait.
//
// Why not a mutex around the connection: with thousands of workers, a lock
// handed from goroutine to goroutine spends more time waiting for its next
// holder to be scheduled than running statements, so ingest and commits
// queue behind it; and each worker running SQLite's deep call chains on its
// own stack grows that stack.

// do queues fn and waits for its outcome. A queued operation always runs
// (or is refused for its context) before do returns, so no write can land
// after its caller has given up on it.
func (s *Store) do(ctx context.Context, write bool, fn func(tx *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := &op{ctx: ctx, fn: fn, write: write, done: make(chan error, 1)}
	if err := s.enqueue(o); err != nil {
		return err
	}
	err := <-o.done
	s.dequeued(1)
	return err
}

// doAll queues the writes fns together and waits for every outcome: they
// reach serve in one batch, so a thousand of them cost the few group
// transactions of one turn of serve, where a thousand callers queueing one
// by one behind other work would wait a turn each.
func (s *Store) doAll(ctx context.Context, fns []func(tx *txn) error) []error {
	errs := make([]error, len(fns))
	err := ctx.Err()
	ops := make([]*op, len(fns))
	for i, fn := range fns {
		ops[i] = &op{ctx: ctx, fn: fn, write: true, done: make(chan error, 1)}
	}
	if err == nil {
		err = s.enqueue(ops...)
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, o := range ops {
		errs[i] = <-o.done
	}
	s.dequeued(len(ops))
	return errs
}

// enqueue hands ops to serve, or refuses them all when the store is closed.
func (s *Store) enqueue(ops ...*op) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed {
		return errors.New("sqlite store is closed")
	}
	s.queue = append(s.queue, ops...)
	s.waiting += len(ops)
	select {
	case s.kick <- struct{}{}:
	default: // serve is told already
	}
	return nil
}

// dequeued records that n operations' callers have their outcomes.
func (s *Store) dequeued(n int) {
	s.qmu.Lock()
	s.waiting -= n
	s.qmu.Unlock()
}

// serve runs queued operations until Close; s.mu is held while a batch
// runs (a test holds it to make operations queue).
func (s *Store) serve() {
	defer close(s.stopped)
	for range s.kick {
		for {
			s.qmu.Lock()
			batch := s.queue
			s.queue = nil
			s.qmu.Unlock()
			if len(batch) == 0 {
				break
			}
			s.mu.Lock()
			s.runBatch(batch)
			s.mu.Unlock()
		}
	}
}

// runBatch runs the batch's reads, then its writes. Each operation was
// queued before the batch began, so each sees what was committed before
// it was asked for: that is all a caller can tell.
func (s *Store) runBatch(batch []*op) {
	var reads, writes []*op
	for _, o := range batch {
		if o.write {
			writes = append(writes, o)
		} else {
			reads = append(reads, o)
		}
	}
	for len(reads) > 0 {
		n := min(len(reads), GroupSize)
		s.runReads(reads[:n])
		reads = reads[n:]
	}
	s.runGroup(writes)
}

// runReads runs reads in one read transaction: one consistent snapshot,
// which in WAL mode never waits for a writer.
func (s *Store) runReads(reads []*op) {
	if len(reads) == 1 {
		r := reads[0]
		r.done <- s.inTxLocked(r.ctx, "BEGIN", r.fn)
		return
	}
	errs := make([]error, len(reads))
	err := s.inTxLocked(context.Background(), "BEGIN", func(tx *txn) error {
		for i, r := range reads {
			if errs[i] = r.ctx.Err(); errs[i] == nil {
				errs[i] = r.fn(tx)
			}
		}
		return nil
	})
	for i, r := range reads {
		if err != nil && errs[i] == nil {
			errs[i] = err
		}
		r.done <- errs[i]
	}
}

// write runs fn in a transaction that holds the write lock from its start
// (BEGIN IMMEDIATE), so that its reads cannot go stale before it writes.
//
// The writes of a batch share one transaction (group commit): each runs
// inside a savepoint of its own, rolled back alone when it fails, and none
// returns before the COMMIT that makes it durable, so to each caller it is
// its own transaction. A thousand hosts committing rounds then cost a few
// transactions a second instead of one each: in WAL mode a transaction's
// fixed cost (taking the lock, appending the changed pages to the log) is
// most of a small write.
func (s *Store) write(ctx context.Context, fn func(tx *txn) error) error {
	return s.do(ctx, true, fn)
}

// GroupSize bounds the writes of one transaction, so a long queue does not
// become one long transaction that holds readers of other processes back.
// It is also how many writes a caller should have in flight at once to
// fill a transaction: local ingest appends this many hosts side by side
// (32, the DynamoDB figure, made each transaction of a 10,000-host batch
// carry a handful of appends among the engine's commits, and the batch
// took seconds).
const GroupSize = 256

// runGroup runs the writes in transactions of at most GroupSize; s.mu is
// held.
func (s *Store) runGroup(group []*op) {
	for len(group) > 0 {
		n := min(len(group), GroupSize)
		s.runTx(group[:n])
		group = group[n:]
	}
}

// runTx runs the writes in one transaction and tells each its outcome.
func (s *Store) runTx(group []*op) {
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
		t.s.hosts.drop() // the row it wrote is undone
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

// read runs fn in a read transaction (see runReads).
func (s *Store) read(ctx context.Context, fn func(tx *txn) error) error {
	return s.do(ctx, false, fn)
}

// inTxLocked runs fn in a transaction opened by begin; only serve calls
// it, with s.mu held.
func (s *Store) inTxLocked(ctx context.Context, begin string, fn func(tx *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.conn == nil {
		return errors.New("sqlite store is closed")
	}
	tx := &txn{s: s, write: begin == "BEGIN IMMEDIATE"}
	if _, err := tx.ExecContext(ctx, begin); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// The transaction ends here whatever happens to ctx: a connection
	// left inside one would hold the write lock, and (in memory) be the
	// only one there is.
	end := context.WithoutCancel(ctx)
	var err error
	if tx.write {
		// Under the write lock: what another process committed before
		// is known now, and nothing more can come until COMMIT.
		err = s.hosts.check(end, tx)
	}
	if err == nil {
		err = fn(tx)
	}
	if err != nil {
		s.hosts.drop()
		if _, rerr := tx.ExecContext(end, "ROLLBACK"); rerr != nil {
			return errors.Join(err, fmt.Errorf("rollback: %w", rerr))
		}
		return err
	}
	if _, err := tx.ExecContext(end, "COMMIT"); err != nil {
		s.hosts.drop()
		_, _ = tx.ExecContext(end, "ROLLBACK")
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
