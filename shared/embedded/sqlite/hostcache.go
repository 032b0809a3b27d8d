package sqlite

import (
	"context"
	"fmt"
	"maps"
)

// hostCache holds copies of the hosts rows that write transactions read or
// wrote, so that a host's next commit does not read its row back (a
// statement and the decoding of the row's robots.txt answers, on every
// commit of every host). Write transactions use
// it, and reads too in a store that is alone (ExclusiveHosts); only serve
// (conn.go) touches it.
//
// It is exact, not a guess: a write transaction holds SQLite's write lock
// from its BEGIN IMMEDIATE, and right after it PRAGMA data_version tells
// whether another connection (another process on the same file) committed
// since the last look; if one did, the cache is dropped. This store's own
// writes go through it: updateHost puts the row it wrote, and whatever else
// changes hosts rows (a sweep, a takeover) or may be undone (a savepoint
// rolled back, a transaction that did not commit) drops it.
//
// A store told that it is alone (ExclusiveHosts) skips the look: local
// mode's other connections to the state file (the input ledger, the
// results file's record) write other tables, and the record's write every
// second dropped the cache every second.
type hostCache struct {
	rows      map[string]hostRow
	version   int64
	known     bool // version was read
	exclusive bool
}

// maxCachedHosts bounds the cache: past it, it starts again empty.
const maxCachedHosts = 200_000

// check drops the cache when another connection changed the database; the
// transaction holds the write lock.
func (c *hostCache) check(ctx context.Context, tx *txn) error {
	if c.exclusive {
		return nil
	}
	var v int64
	if err := tx.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		return fmt.Errorf("read data_version: %w", err)
	}
	if !c.known || v != c.version {
		c.drop()
	}
	c.version, c.known = v, true
	return nil
}

func (c *hostCache) get(key string) (*hostRow, bool) {
	r, ok := c.rows[key]
	if !ok {
		return nil, false
	}
	r = r.clone()
	return &r, true
}

func (c *hostCache) put(h *hostRow) {
	if c.rows == nil || len(c.rows) >= maxCachedHosts {
		c.rows = map[string]hostRow{}
	}
	c.rows[h.key] = h.clone()
}

func (c *hostCache) drop() { c.rows = nil }

// clone copies the row with maps of its own: callers change a row's maps
// in place (storeRobots).
func (h hostRow) clone() hostRow {
	h.attempts = maps.Clone(h.attempts)
	h.robots = maps.Clone(h.robots)
	return h
}

// ExclusiveHosts tells the store that no other connection writes its hosts
// rows while it is open: a runner that holds the state's lock, and whose
// other connections to the file write other tables. Its hosts cache then
// trusts itself. Call it before the store is used.
func (s *Store) ExclusiveHosts() {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.hosts.exclusive = true
}
