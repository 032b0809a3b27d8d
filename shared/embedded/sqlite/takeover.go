package sqlite

import (
	"context"
	"fmt"
	"time"
)

// Takeover tells what TakeOverLeases found.
type Takeover struct {
	// Leases counts the shard leases that were still valid: their holder
	// ended without releasing them.
	Leases int
	// Until is when the latest of them would have expired.
	Until time.Time
	// Hosts counts the hosts with queued URLs in those shards, whose last
	// fetch was moved up to now.
	Hosts int
}

// The takeover's statements. It runs once, when a process starts on a
// state, so none of them needs an index (plan_test.go checks only the
// statements run per operation).
const (
	qLiveLeases = "SELECT count(*), coalesce(max(until), 0) FROM leases WHERE until >= ?"
	// A host of a shard whose holder may have died mid-request is treated
	// as fetched now: that request ended at the latest when its process
	// did, which is before now, so the host's delay (Crawl-delay included)
	// still separates it from the next one.
	qTouchLeasedHosts = `UPDATE hosts SET last_fetch = max(last_fetch, ?1)
		WHERE due IS NOT NULL AND pending > 0 AND vs IN (SELECT vs FROM leases WHERE until >= ?1)`
	qDropLeases = "DELETE FROM leases"
)

// TakeOverLeases releases every shard lease in the store, at once, in one
// transaction, for a caller that knows every holder is gone: local mode
// holds an OS lock on the state file, so a lease it finds when it takes
// that lock belongs to a process that died (kill -9, a crash, a power cut)
// before releasing it. Without this, the successor waits out the leases'
// TTL (84 s with the default parameters) before its first request.
//
// The fencing that expiry gives (a holder starts a request only if its
// lease outlives it by the host's delay) is kept another way: the hosts
// with queued URLs in the shards that were held get a last fetch of now.
//
// Never call it while another process may be working the store: the
// engine's leases are the only thing keeping two processes off one host.
func (s *Store) TakeOverLeases(ctx context.Context) (Takeover, error) {
	var t Takeover
	now := s.now().UnixMilli()
	err := s.write(ctx, func(tx *txn) error {
		var until int64
		if err := tx.QueryRowContext(ctx, qLiveLeases, now).Scan(&t.Leases, &until); err != nil {
			return err
		}
		if t.Leases > 0 {
			t.Until = time.UnixMilli(until)
			s.hosts.drop()
			r, err := tx.ExecContext(ctx, qTouchLeasedHosts, now)
			if err != nil {
				return err
			}
			n, err := r.RowsAffected()
			if err != nil {
				return err
			}
			t.Hosts = int(n)
		}
		_, err := tx.ExecContext(ctx, qDropLeases)
		return err
	})
	if err != nil {
		return Takeover{}, fmt.Errorf("take over shard leases: %w", err)
	}
	return t, nil
}
