package localmode

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// resultStore keeps what serve mode's GET /urls/{id} answers, in a table
// of the state file: one row per URL id, pending from the moment POST /urls
// accepted it, then the result's line as written to Out. It lives on disk,
// not in memory, so a long job costs no memory per URL, and a later run on
// the same state still answers for the URLs an earlier one accepted.
type resultStore struct {
	db *sql.DB
}

const resultsSchema = `
CREATE TABLE IF NOT EXISTS url_results (
	id      TEXT    PRIMARY KEY,
	line    BLOB,             -- NULL: accepted, no result written yet
	updated INTEGER NOT NULL  -- Unix milliseconds
)`

// errNoResults is returned by openResults when the state has no results
// table and none was to be created.
var errNoResults = errors.New("no results table in the state")

// openResults opens the results table of the state file at path (empty: a
// private in-memory database, as the state is then). Without create it
// fails with errNoResults when no serve run made the table: a batch run
// then does not write every result twice, while a run that finishes what a
// serve run accepted still records the results that run's clients await.
func openResults(path string, create bool) (*resultStore, error) {
	dsn := path + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)"
	if path == "" {
		if !create {
			return nil, errNoResults
		}
		// One connection, never closed while the runtime is open: the
		// in-memory database lives as long as it.
		dsn = ":memory:"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open results table in %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	if !create {
		var n int
		err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'url_results'").Scan(&n)
		if err == nil && n == 0 {
			err = errNoResults
		}
		if err != nil {
			db.Close()
			return nil, err
		}
		return &resultStore{db: db}, nil
	}
	if _, err := db.Exec(resultsSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create results table in %s: %w", path, err)
	}
	return &resultStore{db: db}, nil
}

// accept records ids as pending, unless their result is already there (a
// denied URL's result is written during the POST that accepted it).
func (s *resultStore) accept(ctx context.Context, ids []string) error {
	return s.each(ctx, "INSERT INTO url_results (id, line, updated) VALUES (?, NULL, ?) ON CONFLICT (id) DO NOTHING", len(ids),
		func(i int) []any { return []any{ids[i]} })
}

// done records the results' lines, the latest one winning for an id
// written twice (at least once, as on SQS).
func (s *resultStore) done(ctx context.Context, rs []result.Result) error {
	lines := make([][]byte, len(rs))
	for i, r := range rs {
		b, err := encodeLine(r)
		if err != nil {
			return fmt.Errorf("encode result %s: %w", r.ID, err)
		}
		lines[i] = b
	}
	return s.each(ctx, `INSERT INTO url_results (id, line, updated) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET line = excluded.line, updated = excluded.updated`, len(rs),
		func(i int) []any { return []any{rs[i].ID, lines[i]} })
}

// each runs stmt n times in one transaction, with args(i) and the time.
func (s *resultStore) each(ctx context.Context, stmt string, n int, args func(int) []any) error {
	if n == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keep %d results: %w", n, err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, stmt)
	if err != nil {
		return fmt.Errorf("keep %d results: %w", n, err)
	}
	defer st.Close()
	now := time.Now().UnixMilli()
	for i := range n {
		if _, err := st.ExecContext(ctx, append(args(i), now)...); err != nil {
			return fmt.Errorf("keep %d results: %w", n, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keep %d results: %w", n, err)
	}
	return nil
}

// lookup is what the state knows of id: its line once written, pending
// (nil line, known) while it waits, unknown when it was never accepted here.
func (s *resultStore) lookup(ctx context.Context, id string) (line []byte, known bool, err error) {
	err = s.db.QueryRowContext(ctx, "SELECT line FROM url_results WHERE id = ?", id).Scan(&line)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up result %s: %w", id, err)
	}
	return line, true, nil
}

func (s *resultStore) close() error { return s.db.Close() }

// attachResults opens the results table when the state has one and has
// the output keep each written line there from now on. Open calls it.
func (rt *Runtime) attachResults() error {
	rt.out.keep = rt.keepResults
	rs, err := openResults(rt.opts.State, false)
	if errors.Is(err, errNoResults) {
		return nil
	}
	if err != nil {
		return err
	}
	rt.results.Store(rs)
	return nil
}

// serveResults makes sure the results table exists, for a server.
func (rt *Runtime) serveResults() (*resultStore, error) {
	if rs := rt.results.Load(); rs != nil {
		return rs, nil
	}
	rs, err := openResults(rt.opts.State, true)
	if err != nil {
		return nil, err
	}
	if !rt.results.CompareAndSwap(nil, rs) {
		// Another server made it first.
		rs.close()
		return rt.results.Load(), nil
	}
	return rs, nil
}

// keepResults is the output's keep hook. A failure is logged, not
// returned: the lines are on Out already, and failing the publish would
// only have the engine fetch the URLs again; their ids stay pending.
func (rt *Runtime) keepResults(rs []result.Result) {
	store := rt.results.Load()
	if store == nil {
		return
	}
	if err := store.done(context.Background(), rs); err != nil {
		rt.log.Error("keep results for GET /urls/{id}", "results", len(rs), "error", err)
	}
}

// closeResults closes the results table, if open. Close calls it.
func (rt *Runtime) closeResults() error {
	if rs := rt.results.Swap(nil); rs != nil {
		return rs.close()
	}
	return nil
}
