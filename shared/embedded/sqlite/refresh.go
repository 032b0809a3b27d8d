package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
)

// Refreshing URLs (docs/refresh.md, How it is stored): a row each in
// refreshes, keyed by (host, url), beside the host's queue and not in
// it, so neither pending nor PersistLimit counts them. refreshes_due
// orders a host's rows by due time: a load reads the earliest, and the
// host's own due time is the earliest of its queue's and theirs, so a
// host whose only work is a refresh an hour away sits in hosts_due an
// hour ahead, read by no DueHosts before then.

// The flags column holds hostqueue.Refresh.Flags (the queries below
// name RefreshStop as 4 and RefreshFailing as 8).

const (
	qRefreshGet    = "SELECT flags FROM refreshes WHERE host = ? AND url = ?"
	qRefreshCount  = "SELECT count(*) FROM refreshes WHERE host = ?"
	qRefreshInsert = `INSERT INTO refreshes (host, url, id, hops, due, every, flags, etag, last_modified, validators_url)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// qRefreshRespec takes a resent URL's interval and flags; its id,
	// seq, validators and due time stay.
	qRefreshRespec = "UPDATE refreshes SET every = ?, flags = ? WHERE host = ? AND url = ?"
	qRefreshStop   = "UPDATE refreshes SET flags = flags | 4, due = ? WHERE host = ? AND url = ?"
	// qRefreshSave records a fetch; a stop that came meanwhile keeps
	// its due time (now), so it is not put off to the next cycle.
	qRefreshSave = `UPDATE refreshes SET due = CASE WHEN flags & 4 THEN due ELSE ? END, every = ?,
		etag = ?, last_modified = ?, validators_url = ?, sha256 = ?, seq = ?, flags = (flags & ~8) | ?
		WHERE host = ? AND url = ?`
	qRefreshDelete = "DELETE FROM refreshes WHERE host = ? AND url = ?"
	qRefreshHead   = `SELECT url, id, hops, due, every, flags, etag, last_modified, validators_url, sha256, seq
		FROM refreshes WHERE host = ? ORDER BY due LIMIT ?`
	qRefreshFirst = "SELECT due FROM refreshes WHERE host = ? ORDER BY due LIMIT 1"
)

// appendRefreshes keeps req's refreshing URLs (and stops) for host h, and
// returns how many were refused for req.RefreshCap (from the first new
// one beyond it, the rest) and the ids of the stops that marked a kept
// schedule (AppendResult.Stopped).
func (s *Store) appendRefreshes(ctx context.Context, tx *txn, h *hostRow, req hostqueue.AppendRequest) (refused int, stopped []string, err error) {
	if len(req.Refreshes) == 0 {
		return 0, nil, nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, qRefreshCount, h.id).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("count refreshing urls: %w", err)
	}
	for i, r := range req.Refreshes {
		var flags int
		err := tx.QueryRowContext(ctx, qRefreshGet, h.id, r.URL).Scan(&flags)
		exists := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, nil, fmt.Errorf("read refreshing url: %w", err)
		}
		switch {
		case exists && r.Stop:
			_, err = tx.ExecContext(ctx, qRefreshStop, req.Due.UnixMilli(), h.id, r.URL)
			stopped = append(stopped, r.ID)
		case exists:
			_, err = tx.ExecContext(ctx, qRefreshRespec, r.Every.Milliseconds(), r.Respec(flags), h.id, r.URL)
		case n >= req.RefreshCap && !r.Stop:
			return len(req.Refreshes) - i, stopped, nil
		default:
			// A stop for a URL with no schedule is kept too, due now: the
			// engine answers it (stopped, under its own id) like any stop.
			due := req.Due
			if !r.Stop {
				due = refresh.FirstDue(req.Due, r.Every, req.Key+" "+r.URL)
				n++
			}
			_, err = tx.ExecContext(ctx, qRefreshInsert, h.id, r.URL, r.ID, r.Hops, due.UnixMilli(), r.Every.Milliseconds(),
				r.Flags(), r.ETag, r.LastModified, r.StoredValidatorsURL())
		}
		if err != nil {
			return 0, nil, fmt.Errorf("keep refreshing url: %w", err)
		}
	}
	return 0, stopped, nil
}

// commitRefreshes records a commit's refetches and ended schedules.
func commitRefreshes(ctx context.Context, tx *txn, host int64, c hostqueue.Commit) error {
	for _, r := range c.Refreshed {
		if _, err := tx.ExecContext(ctx, qRefreshSave, r.Due.UnixMilli(), r.Every.Milliseconds(), r.ETag, r.LastModified,
			r.StoredValidatorsURL(), r.SHA256, r.Seq, r.Flags()&hostqueue.RefreshFailing, host, r.URL); err != nil {
			return fmt.Errorf("record refetch of %s: %w", r.URL, err)
		}
	}
	for _, u := range c.RefreshEnded {
		if _, err := tx.ExecContext(ctx, qRefreshDelete, host, u); err != nil {
			return fmt.Errorf("end refresh of %s: %w", u, err)
		}
	}
	return nil
}

// firstRefresh is the earliest due time of host's refreshing URLs; ok is
// false when it has none.
func firstRefresh(ctx context.Context, tx *txn, host int64) (int64, bool, error) {
	var due int64
	err := tx.QueryRowContext(ctx, qRefreshFirst, host).Scan(&due)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read first refresh: %w", err)
	}
	return due, true, nil
}

// refreshHead reads host's n earliest refreshing URLs and the count of
// them all.
func refreshHead(ctx context.Context, tx *txn, host int64, n int) ([]hostqueue.Refresh, int, error) {
	var count int
	if err := tx.QueryRowContext(ctx, qRefreshCount, host).Scan(&count); err != nil {
		return nil, 0, fmt.Errorf("count refreshing urls: %w", err)
	}
	if count == 0 || n <= 0 {
		return nil, count, nil
	}
	rows, err := tx.QueryContext(ctx, qRefreshHead, host, n)
	if err != nil {
		return nil, 0, fmt.Errorf("read refreshing urls: %w", err)
	}
	defer rows.Close()
	var out []hostqueue.Refresh
	for rows.Next() {
		var r hostqueue.Refresh
		var due, every int64
		var flags int
		if err := rows.Scan(&r.URL, &r.ID, &r.Hops, &due, &every, &flags, &r.ETag, &r.LastModified, &r.ValidatorsURL, &r.SHA256, &r.Seq); err != nil {
			return nil, 0, fmt.Errorf("read refreshing urls: %w", err)
		}
		r.Due, r.Every = time.UnixMilli(due), time.Duration(every)*time.Millisecond
		r.SetFlags(flags)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read refreshing urls: %w", err)
	}
	return out, count, nil
}

// Refreshing counts the refreshing URLs of every host and returns the
// earliest due time among them (zero when there is none). It reads the
// whole table: for a progress line every few seconds, not per operation.
func (s *Store) Refreshing(ctx context.Context) (n int, next time.Time, err error) {
	err = s.read(ctx, func(tx *txn) error {
		var first sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT count(*), min(due) FROM refreshes").Scan(&n, &first); err != nil {
			return err
		}
		if first.Valid {
			next = time.UnixMilli(first.Int64)
		}
		return nil
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count refreshing urls: %w", err)
	}
	return n, next, nil
}
