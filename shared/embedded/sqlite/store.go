// Package sqlite keeps host queues in one SQLite file, or in memory, through
// the pure-Go modernc.org/sqlite driver (no cgo): the store of local mode
// and of the engine's fast tests. It keeps the hostqueue.Store contract of
// package dynamo (shared/domain/hostqueue/storetest runs one suite against both);
// schema.go gives the tables and why.
//
// Where DynamoDB needs versions and conditional writes retried on
// conflict, each operation here is one transaction, begun IMMEDIATE so that
// it holds SQLite's write lock from its first read and cannot lose a race.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

var _ hostqueue.Store = (*Store)(nil)

// Store is the SQLite host-queue store. It is safe for concurrent use.
type Store struct {
	db  *sql.DB
	now func() time.Time

	// The connection belongs to serve (conn.go), which runs the queued
	// operations; mu is held while it runs a batch. SQLite runs one
	// writer at a time anyway; a single connection is what keeps an
	// in-memory database alive, and in a file it gives up only reads
	// running beside a write, which statements of a few microseconds do
	// not need. Another process, or another Store, on the same file is
	// kept in step by SQLite's own locks (BEGIN IMMEDIATE, busy_timeout).
	mu    sync.Mutex
	conn  *sql.Conn
	stmts map[string]*sql.Stmt // by query, prepared on conn
	// writeTxs counts the write transactions run (under mu).
	writeTxs int

	// qmu guards the queue of operations waiting for serve, closed, and
	// the sends on kick (which tells serve of a new operation; closed by
	// Close); stopped is closed when serve has returned.
	qmu     sync.Mutex
	queue   []*op
	waiting int // operations queued or running, not yet returned
	closed  bool
	kick    chan struct{}
	stopped chan struct{}

	// hosts caches hosts rows for write transactions (hostcache.go).
	hosts hostCache

	sweepMu   sync.Mutex
	nextSweep time.Time
}

// maxAttempts bounds the report-then-retry rounds of one Append.
const maxAttempts = 50

// sweepEvery is how often (on the store's clock) a commit also deletes a
// batch of expired idle state; sweepBatch bounds that batch, so the
// commit that pays for it stays cheap.
const (
	sweepEvery = time.Minute
	sweepBatch = 500
)

// New opens (creating it if needed) the store in the SQLite file at path,
// in WAL mode; now is the clock used for idle TTLs. The caller must Close it.
func New(path string, now func() time.Time) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, ":memory:") {
		return nil, fmt.Errorf("open sqlite store: invalid file name %q", path)
	}
	// synchronous=NORMAL in WAL mode: a commit survives a crash of the
	// process (the case a local run must resume from), though the last
	// ones may be lost to a power cut, which at-least-once delivery
	// already tolerates by refetching.
	//
	// cache_size: SQLite's default page cache is 2 MB a connection, so a
	// state of a few MB was read back from the file page by page (43,788
	// preads for a 60,000-URL job over 10,000 hosts on a 5.9 MB file); 64
	// MiB holds such a job's whole state, and a page is only kept once
	// read.
	dsn := path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-65536)"
	s, err := open(dsn, now)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	return s, nil
}

// ErrNotAStore: the file is an SQLite database of another program.
var ErrNotAStore = errors.New("not a database of this store")

// Damaged reports whether err says the file is not a store's database:
// not SQLite at all, cut short, corrupted, or another program's database.
// Such a file cannot be repaired by running again; the caller should say
// so rather than show SQLite's words.
func Damaged(err error) bool {
	if errors.Is(err, ErrNotAStore) {
		return true
	}
	var e interface{ Code() int }
	if !errors.As(err, &e) {
		return false
	}
	// The primary result codes (https://www.sqlite.org/rescode.html):
	// SQLITE_CORRUPT 11, SQLITE_NOTADB 26. Extended codes keep the
	// primary one in their low byte.
	switch e.Code() & 0xff {
	case 11, 26:
		return true
	}
	return false
}

// NewMemory returns a store held in memory, lost when it is closed: the
// store of fast tests. now is the clock used for idle TTLs; give it the
// engine's (fake) clock, so that idle state expires on the test's time.
func NewMemory(now func() time.Time) (*Store, error) {
	s, err := open(":memory:", now)
	if err != nil {
		return nil, fmt.Errorf("open in-memory sqlite store: %w", err)
	}
	return s, nil
}

func open(dsn string, now func() time.Time) (*Store, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, conn: conn, now: now, stmts: map[string]*sql.Stmt{},
		kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	go s.serve()
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	return s.write(ctx, func(tx *txn) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if v < 0 || v > schemaVersion {
			return fmt.Errorf("schema version %d, this build reads %d", v, schemaVersion)
		}
		if v == 0 {
			// A database with tables but no schema version is another
			// program's: adding this store's tables to it would hide
			// that the wrong file was given.
			var tables int
			if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&tables); err != nil {
				return fmt.Errorf("read schema: %w", err)
			}
			if tables > 0 {
				return fmt.Errorf("%d tables and no schema version: %w", tables, ErrNotAStore)
			}
			if _, err := s.conn.ExecContext(ctx, schema); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
			v = schemaVersion
		}
		for i := v; i < schemaVersion; i++ {
			if _, err := s.conn.ExecContext(ctx, migrations[i-1]); err != nil {
				return fmt.Errorf("migrate schema %d to %d: %w", i, i+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
		return nil
	})
}

// Close releases the database; an in-memory store's state is gone.
func (s *Store) Close() error {
	s.qmu.Lock()
	if !s.closed {
		s.closed = true
		close(s.kick) // serve runs what is queued, then returns
	}
	s.qmu.Unlock()
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for _, st := range s.stmts {
		err = errors.Join(err, st.Close())
	}
	clear(s.stmts)
	if s.conn != nil {
		err = errors.Join(err, s.conn.Close())
		s.conn = nil
	}
	return errors.Join(err, s.db.Close())
}

// errReportFirst ends an append's transaction without writing: it found
// entries to evict that must be reported before the eviction is written.
var errReportFirst = errors.New("evicted entries to report first")

// Append implements hostqueue.Appender. Entries to evict are reported outside
// the transaction (OnEvict may be slow, or use the store), then the append
// runs again: if the queue changed meanwhile, only entries not reported yet
// are reported before it is written.
func (s *Store) Append(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
	reported := hostqueue.Reported{}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var res hostqueue.AppendResult
		var toReport []hostqueue.Entry
		err := s.write(ctx, func(tx *txn) error {
			var err error
			res, toReport, err = s.append(ctx, tx, req, reported)
			return err
		})
		if errors.Is(err, errReportFirst) {
			if err := reported.Report(ctx, req, toReport); err != nil {
				return hostqueue.AppendResult{}, err
			}
			continue
		}
		if err != nil {
			return hostqueue.AppendResult{}, fmt.Errorf("append %d urls to %s: %w", len(req.Entries), req.Key, err)
		}
		return res, nil
	}
	return hostqueue.AppendResult{}, fmt.Errorf("append to %s: %w after %d attempts", req.Key, hostqueue.ErrConflict, maxAttempts)
}

// AppendBatch appends to many hosts at once (hostqueue.BatchAppender):
// their first attempts are queued AppendChunk at a time; one that must
// report evicted entries first goes on as Append does.
func (s *Store) AppendBatch(ctx context.Context, reqs []hostqueue.AppendRequest) []hostqueue.AppendOutcome {
	out := make([]hostqueue.AppendOutcome, len(reqs))
	for lo := 0; lo < len(reqs); lo += AppendChunk {
		chunk := reqs[lo:min(lo+AppendChunk, len(reqs))]
		fns := make([]func(tx *txn) error, len(chunk))
		for i, req := range chunk {
			fns[i] = func(tx *txn) error {
				var err error
				out[lo+i].Result, _, err = s.append(ctx, tx, req, nil)
				return err
			}
		}
		for i, err := range s.doAll(ctx, fns) {
			switch {
			case errors.Is(err, errReportFirst):
				out[lo+i].Result, out[lo+i].Err = s.Append(ctx, chunk[i])
			case err != nil:
				out[lo+i] = hostqueue.AppendOutcome{Err: fmt.Errorf("append %d urls to %s: %w", len(chunk[i].Entries), chunk[i].Key, err)}
			}
		}
	}
	return out
}

// AppendChunk is how many appends AppendBatch queues at once: sixteen
// group transactions per turn of serve. Smaller chunks wait a turn of
// serve behind the workers' operations each, so a large batch queues
// slowly; a whole batch at once holds the workers back while it runs.
// BenchmarkIngestUnderLoad measures both sides.
const AppendChunk = 16 * GroupSize

func (s *Store) append(ctx context.Context, tx *txn, req hostqueue.AppendRequest, reported hostqueue.Reported) (hostqueue.AppendResult, []hostqueue.Entry, error) {
	h, err := s.hostForAppend(ctx, tx, req)
	if err != nil {
		return hostqueue.AppendResult{}, nil, err
	}
	plan := hostqueue.PlanAppend(h.pending, req)
	var evicted []hostqueue.Entry
	lastEvicted := int64(-1)
	if plan.FromHead > 0 {
		if evicted, lastEvicted, err = headEntries(ctx, tx, h.id, plan.FromHead); err != nil {
			return hostqueue.AppendResult{}, nil, err
		}
	}
	evicted = append(evicted, plan.Dropped...)
	if req.OnEvict != nil {
		if fresh := reported.Fresh(evicted); len(fresh) > 0 {
			return hostqueue.AppendResult{}, fresh, errReportFirst
		}
	}
	if lastEvicted >= 0 {
		if _, err := tx.ExecContext(ctx, qDeleteHead, h.id, lastEvicted); err != nil {
			return hostqueue.AppendResult{}, nil, fmt.Errorf("evict %d urls: %w", plan.FromHead, err)
		}
	}
	if err := insertEntries(ctx, tx, h.id, h.tail, plan.Queue); err != nil {
		return hostqueue.AppendResult{}, nil, err
	}
	h.tail += int64(len(plan.Queue))
	waiting := h.pending == 0 && h.due.Valid
	h.pending += len(plan.Queue) - plan.FromHead
	activated := false
	if h.pending > 0 {
		h.expires = sql.NullInt64{}
		switch {
		case !h.due.Valid:
			h.due = sql.NullInt64{Int64: req.Due.UnixMilli(), Valid: true}
			activated = true
		case waiting && req.Due.UnixMilli() < h.due.Int64:
			// Due only by a later refresh: the first plain URLs make it
			// due now, not when that refresh is.
			h.due = sql.NullInt64{Int64: req.Due.UnixMilli(), Valid: true}
			activated = true
		}
	}
	refused, stopped, err := s.appendRefreshes(ctx, tx, h, req)
	if err != nil {
		return hostqueue.AppendResult{}, nil, err
	}
	if len(req.Refreshes) > 0 {
		// The host is due by its earliest refresh, if that comes before
		// its queue's due time.
		first, ok, err := firstRefresh(ctx, tx, h.id)
		if err != nil {
			return hostqueue.AppendResult{}, nil, err
		}
		if ok && (!h.due.Valid || first < h.due.Int64) {
			activated = activated || !h.due.Valid
			h.due, h.expires = sql.NullInt64{Int64: first, Valid: true}, sql.NullInt64{}
		}
	}
	if err := updateHost(ctx, tx, h); err != nil {
		return hostqueue.AppendResult{}, nil, err
	}
	res := plan.Result(len(evicted), h.pending, activated)
	res.Shard = h.vs
	res.RefreshRefused, res.Stopped = refused, stopped
	return res, nil, nil
}

// hostForAppend returns the host's row, creating it when there is none and
// starting it afresh when its idle state has expired, in the virtual shard
// req places it in (hostqueue.AppendRequest.ShardFor).
func (s *Store) hostForAppend(ctx context.Context, tx *txn, req hostqueue.AppendRequest) (*hostRow, error) {
	key := req.Key
	h, err := getHost(ctx, tx, key)
	if err != nil {
		return nil, err
	}
	if h != nil && !h.expired(s.now()) {
		h.vs = req.ShardFor(h.vs, true, h.pending == 0 && !h.due.Valid)
		return h, nil
	}
	if h != nil {
		// Expired idle state reads as absent: keep only the row's
		// identity (an idle host has no entries left to renumber).
		return &hostRow{key: key, id: h.id, vs: req.ShardFor(h.vs, true, true), tail: h.tail}, nil
	}
	vs := req.ShardFor(0, false, false)
	r, err := tx.ExecContext(ctx, qInsertHost, key, vs)
	if err != nil {
		return nil, fmt.Errorf("create host: %w", err)
	}
	id, err := r.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("create host: %w", err)
	}
	return &hostRow{key: key, id: id, vs: vs}, nil
}

// Load implements hostqueue.Queues.
func (s *Store) Load(ctx context.Context, key string, want int) (*hostqueue.Host, error) {
	var out *hostqueue.Host
	err := s.read(ctx, func(tx *txn) error {
		h, err := s.liveHost(ctx, tx, key)
		if err != nil || h == nil {
			return err
		}
		out, err = toHost(ctx, tx, key, h, want)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", key, err)
	}
	if out == nil {
		return nil, fmt.Errorf("load %s: %w", key, hostqueue.ErrNotFound)
	}
	return out, nil
}

// QueuedRequests counts the distinct requests among a queue's entries:
// copies of one URL (with the same validators) cost one fetch, as the
// engine makes one (engine/dedupe.go). It reads the whole queue, so call
// it for a few queues, not for every one every second. A queue not
// stored counts 0.
func (s *Store) QueuedRequests(ctx context.Context, key string) (int, error) {
	n := 0
	err := s.read(ctx, func(tx *txn) error {
		h, err := s.liveHost(ctx, tx, key)
		if err != nil || h == nil {
			return err
		}
		return tx.QueryRowContext(ctx, qQueuedRequests, h.id).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("count requests queued for %s: %w", key, err)
	}
	return n, nil
}

const qQueuedRequests = `SELECT count(*) FROM (SELECT DISTINCT url, etag, last_modified, validators_url FROM entries WHERE host = ?)`

// Commit implements hostqueue.Queues.
func (s *Store) Commit(ctx context.Context, key string, c hostqueue.Commit) (*hostqueue.Host, error) {
	done := make(map[string]bool, len(c.Done))
	for _, id := range c.Done {
		done[id] = true
	}
	var out *hostqueue.Host
	err := s.write(ctx, func(tx *txn) error {
		h, err := s.liveHost(ctx, tx, key)
		if err != nil {
			return err
		}
		if h == nil {
			return hostqueue.ErrNotFound
		}
		if len(done) > 0 {
			removed, err := popDone(ctx, tx, h.id, done)
			if err != nil {
				return err
			}
			h.pending -= removed
		}
		if lf := c.LastFetch.UnixMilli(); !c.LastFetch.IsZero() && lf > h.lastFetch {
			h.lastFetch = lf
		}
		h.pauseUntil = msOf(c.PauseUntil)
		h.errors = c.Errors
		h.failingSince, h.lastError = msOf(c.FailingSince), c.LastError
		h.rateDelay, h.rateSince, h.lastTook = c.RateDelay.Milliseconds(), msOf(c.RateSince), c.LastTook.Milliseconds()
		h.origins = politeness.EncodeOrigins(c.State)
		h.attempts = nil
		for id, n := range c.Attempts {
			if !done[id] && n > 0 {
				if h.attempts == nil {
					h.attempts = map[string]int{}
				}
				h.attempts[id] = n
			}
		}
		if err := commitRefreshes(ctx, tx, h.id, c); err != nil {
			return err
		}
		if c.Release {
			first, refreshing, err := firstRefresh(ctx, tx, h.id)
			if err != nil {
				return err
			}
			switch {
			case h.pending > 0:
				// Continue leaves the due time alone: the host is
				// still due, as it was when the holder took it.
				if !c.Continue || !h.due.Valid {
					h.due = sql.NullInt64{Int64: c.NextDue.UnixMilli(), Valid: true}
				}
				h.expires = sql.NullInt64{}
			case refreshing:
				// Only refreshes wait: due at the earliest, not before
				// the host's politeness allows.
				// The attempts stay: they are the refreshing URLs'
				// failed ones, counted to MaxAttempts across sessions.
				h.due = sql.NullInt64{Int64: max(first, c.NextDue.UnixMilli()), Valid: true}
				h.expires = sql.NullInt64{}
			default:
				h.due = sql.NullInt64{}
				h.attempts = nil
				h.expires = s.idleExpiry(c.IdleTTL)
			}
		}
		if err := s.storeRobots(ctx, tx, key, h, c.Robots); err != nil {
			return err
		}
		if err := updateHost(ctx, tx, h); err != nil {
			return err
		}
		out, err = toHost(ctx, tx, key, h, c.Want)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", key, err)
	}
	s.maybeSweep(ctx)
	return out, nil
}

// idleExpiry is when an idle host's state, kept for ttl from now, expires;
// a ttl of zero or less keeps it without expiry.
func (s *Store) idleExpiry(ttl time.Duration) sql.NullInt64 {
	if ttl <= 0 {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: s.now().Add(ttl).UnixMilli(), Valid: true}
}

// popDone removes entries from the head of a host's queue as long as their
// IDs are in done, and returns how many it removed.
func popDone(ctx context.Context, tx *txn, host int64, done map[string]bool) (int, error) {
	page := len(done) + 1
	removed, last := 0, int64(-1)
	for more := true; more; {
		var rows *sql.Rows
		var err error
		if last < 0 {
			rows, err = tx.QueryContext(ctx, qFirstIDs, host, page)
		} else {
			rows, err = tx.QueryContext(ctx, qHeadIDs, host, last, page)
		}
		if err != nil {
			return 0, fmt.Errorf("read queue head: %w", err)
		}
		n := 0
		for rows.Next() {
			var seq int64
			var id string
			if err := rows.Scan(&seq, &id); err != nil {
				rows.Close()
				return 0, fmt.Errorf("read queue head: %w", err)
			}
			n++
			if !done[id] {
				more = false
				break
			}
			removed, last = removed+1, seq
		}
		err = errors.Join(rows.Err(), rows.Close())
		if err != nil {
			return 0, fmt.Errorf("read queue head: %w", err)
		}
		if n < page {
			more = false
		}
	}
	if removed == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, qDeleteHead, host, last); err != nil {
		return 0, fmt.Errorf("remove %d done urls: %w", removed, err)
	}
	return removed, nil
}

// DueHosts implements hostqueue.Queues.
func (s *Store) DueHosts(ctx context.Context, vshard int, now time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var keys []string
	err := s.read(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, qDueHosts, vshard, now.UnixMilli(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			keys = append(keys, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("query due hosts of shard %d: %w", vshard, err)
	}
	return keys, nil
}

// AcquireShard implements hostqueue.Leases: one upsert that takes the lease
// when it is free, expired (until before now) or already the owner's.
func (s *Store) AcquireShard(ctx context.Context, vshard int, owner string, until, now time.Time) (bool, error) {
	var took bool
	err := s.write(ctx, func(tx *txn) error {
		r, err := tx.ExecContext(ctx, qAcquire, vshard, owner, until.UnixMilli(), now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		took = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("lease shard %d: %w", vshard, err)
	}
	return took, nil
}

// ReleaseShard implements hostqueue.Leases; a lease another owner holds is
// left alone.
func (s *Store) ReleaseShard(ctx context.Context, vshard int, owner string) error {
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, qRelease, vshard, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("release shard %d: %w", vshard, err)
	}
	return nil
}

// Sweep deletes the idle host state and robots.txt answers that have
// expired, and returns how many rows it deleted. Expired state already
// reads as absent; sweeping only reclaims its space. Commits sweep a batch
// now and then on their own; a long-lived process may also call Sweep.
func (s *Store) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.sweep(ctx, sweepBatch)
		total += n
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
}

func (s *Store) sweep(ctx context.Context, batch int) (int, error) {
	now := s.now()
	var n int64
	err := s.write(ctx, func(tx *txn) error {
		s.hosts.drop()
		r, err := tx.ExecContext(ctx, qSweepHosts, now.UnixMilli(), batch)
		if err != nil {
			return err
		}
		if n, err = r.RowsAffected(); err != nil {
			return err
		}
		r, err = tx.ExecContext(ctx, qSweepRobots, now.Add(-robotsKeep).UnixMilli(), batch)
		if err != nil {
			return err
		}
		m, err := r.RowsAffected()
		n += m
		return err
	})
	if err != nil {
		return int(n), fmt.Errorf("sweep expired state: %w", err)
	}
	return int(n), nil
}

// maybeSweep deletes one batch of expired state when the last sweep is
// sweepEvery old. Best effort: expired state reads as absent either way.
func (s *Store) maybeSweep(ctx context.Context) {
	now := s.now()
	s.sweepMu.Lock()
	due := !now.Before(s.nextSweep)
	if due {
		s.nextSweep = now.Add(sweepEvery)
	}
	s.sweepMu.Unlock()
	if due {
		_, _ = s.sweep(ctx, sweepBatch)
	}
}

// hostRow is a hosts row (see schema.go).
type hostRow struct {
	key          string
	id           int64
	vs           int
	due          sql.NullInt64
	tail         int64
	pending      int
	lastFetch    int64
	pauseUntil   int64
	errors       int
	failingSince int64
	lastError    string
	rateDelay    int64 // ms
	rateSince    int64
	lastTook     int64 // ms
	// origins is politeness.EncodeOrigins of the host's state.
	origins  string
	attempts map[string]int
	robots   map[string]inlineRobots
	// robotsJSON is robots as stored, nil once storeRobots changed it:
	// a commit that leaves the answers alone writes them back without
	// encoding them again.
	robotsJSON []byte
	expires    sql.NullInt64
}

func (h *hostRow) expired(now time.Time) bool {
	return h.expires.Valid && h.expires.Int64 <= now.UnixMilli()
}

// getHost returns the host's row as stored, expired or not; nil when there
// is none.
func getHost(ctx context.Context, tx *txn, key string) (*hostRow, error) {
	cached := tx.write || tx.s.hosts.exclusive
	if cached {
		if h, ok := tx.s.hosts.get(key); ok {
			return h, nil
		}
	}
	h := hostRow{key: key}
	var attempts, robots []byte
	err := tx.QueryRowContext(ctx, qHost, key).Scan(
		&h.id, &h.vs, &h.due, &h.tail, &h.pending, &h.lastFetch, &h.pauseUntil, &h.errors,
		&h.failingSince, &h.lastError, &h.rateDelay, &h.rateSince, &h.lastTook, &h.origins, &attempts, &robots, &h.expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read host: %w", err)
	}
	if len(attempts) > 0 {
		if err := json.Unmarshal(attempts, &h.attempts); err != nil {
			return nil, fmt.Errorf("decode attempts: %w", err)
		}
	}
	if len(robots) > 0 {
		if err := json.Unmarshal(robots, &h.robots); err != nil {
			return nil, fmt.Errorf("decode robots: %w", err)
		}
		h.robotsJSON = robots
	}
	if cached {
		tx.s.hosts.put(&h)
	}
	return &h, nil
}

// liveHost returns the host's row, nil when there is none or its idle
// state has expired.
func (s *Store) liveHost(ctx context.Context, tx *txn, key string) (*hostRow, error) {
	h, err := getHost(ctx, tx, key)
	if err != nil || h == nil || h.expired(s.now()) {
		return nil, err
	}
	return h, nil
}

func updateHost(ctx context.Context, tx *txn, h *hostRow) error {
	attempts, err := jsonOrNil(h.attempts)
	if err != nil {
		return err
	}
	robots := h.robotsJSON
	if robots == nil {
		if robots, err = jsonOrNil(h.robots); err != nil {
			return err
		}
	}
	_, err = tx.ExecContext(ctx, qUpdateHost,
		h.vs, h.due, h.tail, h.pending, h.lastFetch, h.pauseUntil, h.errors, h.failingSince,
		h.lastError, h.rateDelay, h.rateSince, h.lastTook, h.origins, attempts, robots, h.expires, h.id)
	if err != nil {
		return fmt.Errorf("write host: %w", err)
	}
	h.robotsJSON = robots
	if tx.write {
		tx.s.hosts.put(h)
	}
	return nil
}

func jsonOrNil[M ~map[string]V, V any](m M) ([]byte, error) {
	if len(m) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode host state: %w", err)
	}
	return b, nil
}

// headEntries returns the first n entries of a host's queue and the
// sequence number of the last of them.
func headEntries(ctx context.Context, tx *txn, host int64, n int) ([]hostqueue.Entry, int64, error) {
	rows, err := tx.QueryContext(ctx, qHead, host, n)
	if err != nil {
		return nil, 0, fmt.Errorf("read queue head: %w", err)
	}
	defer rows.Close()
	// n may be far above the queue's length (the engine's give-up asks for
	// every entry with a huge n): no room is reserved up front for it.
	out := make([]hostqueue.Entry, 0, min(n, 64))
	last := int64(-1)
	for rows.Next() {
		var e hostqueue.Entry
		if err := rows.Scan(&last, &e.ID, &e.URL, &e.ETag, &e.LastModified, &e.ValidatorsURL, &e.Hops); err != nil {
			return nil, 0, fmt.Errorf("read queue head: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read queue head: %w", err)
	}
	return out, last, nil
}

// insertSizes are the row counts of the prepared INSERTs an append is cut
// into, largest first: a statement costs more than a row, and a few fixed
// shapes keep the statement cache small.
var insertSizes = []int{64, 16, 4, 1}

var insertQueries = func() map[int]string {
	m := map[int]string{}
	for _, n := range insertSizes {
		m[n] = "INSERT INTO entries (host, seq, id, url, etag, last_modified, validators_url, hops) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?), ", n), ", ")
	}
	return m
}()

func insertEntries(ctx context.Context, tx *txn, host, seq int64, es []hostqueue.Entry) error {
	// Room for the largest statement this append makes, not for the
	// largest there is: 7 KiB per host for a few URLs was a twelfth of
	// the process's allocations at 10,000 hosts.
	args := make([]any, 0, 8*min(len(es), insertSizes[0]))
	for len(es) > 0 {
		n := insertSizes[len(insertSizes)-1]
		for _, size := range insertSizes {
			if size <= len(es) {
				n = size
				break
			}
		}
		args = args[:0]
		for i, e := range es[:n] {
			args = append(args, host, seq+int64(i), e.ID, e.URL, e.ETag, e.LastModified, e.StoredValidatorsURL(), e.Hops)
		}
		if _, err := tx.ExecContext(ctx, insertQueries[n], args...); err != nil {
			return fmt.Errorf("insert %d urls: %w", n, err)
		}
		es, seq = es[n:], seq+int64(n)
	}
	return nil
}

func toHost(ctx context.Context, tx *txn, key string, h *hostRow, want int) (*hostqueue.Host, error) {
	out := &hostqueue.Host{
		Key:          key,
		VirtualShard: h.vs,
		Pending:      h.pending,
		Attempts:     h.attempts,
		State: politeness.State{
			LastFetch: timeOf(h.lastFetch), PauseUntil: timeOf(h.pauseUntil), Errors: h.errors,
			FailingSince: timeOf(h.failingSince), LastError: h.lastError,
			RateDelay: time.Duration(h.rateDelay) * time.Millisecond, RateSince: timeOf(h.rateSince),
			LastTook: time.Duration(h.lastTook) * time.Millisecond,
		},
	}
	if err := politeness.DecodeOrigins(h.origins, &out.State); err != nil {
		return nil, fmt.Errorf("host %s: %w", key, err)
	}
	if h.due.Valid {
		out.Due = time.UnixMilli(h.due.Int64)
	}
	for origin, ir := range h.robots {
		if ir.StoredApart {
			if out.RobotsItems == nil {
				out.RobotsItems = map[string]bool{}
			}
			out.RobotsItems[origin] = true
			continue
		}
		if out.Robots == nil {
			out.Robots = map[string]hostqueue.Robots{}
		}
		out.Robots[origin] = hostqueue.Robots{Status: ir.Status, Body: ir.Body, FetchedAt: time.UnixMilli(ir.FetchedAt)}
	}
	var err error
	if out.Refreshes, out.Refreshing, err = refreshHead(ctx, tx, h.id, want); err != nil {
		return nil, err
	}
	if want > 0 && h.pending > 0 {
		// No more than are queued: the head is held for the whole
		// session, and room for a full round beside a host's few URLs
		// would be held with it, for every host at once.
		head, _, err := headEntries(ctx, tx, h.id, min(want, h.pending))
		if err != nil {
			return nil, err
		}
		out.Head = head
	}
	return out, nil
}

// msOf is t in Unix milliseconds, 0 for the zero time.
func msOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// timeOf is the inverse of msOf.
func timeOf(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
