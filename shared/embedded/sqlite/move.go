package sqlite

import (
	"context"
	"fmt"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

var _ hostqueue.Mover = (*Store)(nil)

// Move implements hostqueue.Mover: the row's shard changes in one write
// transaction, and with it the host's place in the due index (hosts_due
// is on the shard and due time).
func (s *Store) Move(ctx context.Context, key string, from, to int) (*hostqueue.Host, error) {
	var out *hostqueue.Host
	err := s.write(ctx, func(tx *txn) error {
		h, err := s.liveHost(ctx, tx, key)
		if err != nil {
			return err
		}
		if h == nil {
			return hostqueue.ErrNotFound
		}
		if h.vs == from && from != to {
			h.vs = to
			if err := updateHost(ctx, tx, h); err != nil {
				return err
			}
		}
		out, err = toHost(ctx, tx, key, h, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("move %s from shard %d to %d: %w", key, from, to, err)
	}
	return out, nil
}
