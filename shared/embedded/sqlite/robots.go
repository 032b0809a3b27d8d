package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// maxInlineRobots is the largest robots.txt body kept in the host row
// itself: most answers are a bare 404 or a few lines, and keeping them there
// saves a lookup per host session, while a large one would make every
// commit of the host rewrite it.
const maxInlineRobots = 1024

// robotsKeep is how long a stored robots.txt outlives its fetch before the
// sweep deletes it (it is refetched long before, after RobotsTTL), as
// DynamoDB's TTL removes robots items. Reads do not hide an old one: the
// engine judges an answer's age by its FetchedAt on its own clock, which
// in tests need not be the store's.
const robotsKeep = 7 * 24 * time.Hour

// inlineRobots is a robots.txt answer in the host row's robots column
// (JSON, by origin).
type inlineRobots struct {
	Status int    `json:"s"`
	Body   []byte `json:"b,omitempty"`
	// FetchedAt is when it was fetched (Unix ms).
	FetchedAt int64 `json:"t"`
	// StoredApart marks an answer too large for the row, stored in the
	// robots table: without the mark a reader knows there is none to look
	// up.
	StoredApart bool `json:"x,omitempty"`
}

// storeRobots records the answers of a commit: small ones in the host row,
// large ones in the robots table (in the same transaction) with a mark in
// the row.
func (s *Store) storeRobots(ctx context.Context, tx *txn, key string, h *hostRow, answers map[string]hostqueue.Robots) error {
	if len(answers) > 0 {
		h.robotsJSON = nil // encoded again by updateHost
	}
	for origin, r := range answers {
		if h.robots == nil {
			h.robots = map[string]inlineRobots{}
		}
		if len(r.Body) <= maxInlineRobots {
			h.robots[origin] = inlineRobots{Status: r.Status, Body: r.Body, FetchedAt: r.FetchedAt.UnixMilli()}
			continue
		}
		if err := putRobots(ctx, tx, key, origin, r); err != nil {
			return err
		}
		h.robots[origin] = inlineRobots{StoredApart: true, FetchedAt: r.FetchedAt.UnixMilli()}
	}
	return nil
}

// Robots implements hostqueue.RobotsCache.
func (s *Store) Robots(ctx context.Context, key, origin string) (*hostqueue.Robots, error) {
	var out *hostqueue.Robots
	err := s.read(ctx, func(tx *txn) error {
		var r hostqueue.Robots
		var at int64
		err := tx.QueryRowContext(ctx, qRobots, key, origin).Scan(&r.Status, &r.Body, &at)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		r.FetchedAt = time.UnixMilli(at)
		out = &r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read robots.txt of %s: %w", origin, err)
	}
	return out, nil
}

// PutRobots implements hostqueue.RobotsCache.
func (s *Store) PutRobots(ctx context.Context, key, origin string, r hostqueue.Robots) error {
	return s.write(ctx, func(tx *txn) error {
		return putRobots(ctx, tx, key, origin, r)
	})
}

func putRobots(ctx context.Context, tx *txn, key, origin string, r hostqueue.Robots) error {
	_, err := tx.ExecContext(ctx, qPutRobots, key, origin, r.Status, r.Body, r.FetchedAt.UnixMilli())
	if err != nil {
		return fmt.Errorf("store robots.txt of %s: %w", origin, err)
	}
	return nil
}
