package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

var _ hostqueue.Mover = (*Store)(nil)

// errStays ends a move that has nothing to write: the host is no longer
// in the shard it was to leave (moved already, by this call's earlier
// write or another's), or already in the one it was to join.
type errStays struct{ cur *hostItem }

func (e *errStays) Error() string { return "host stays in shard " + fmt.Sprint(e.cur.VirtualShard) }

// Move implements hostqueue.Mover. A host with an entry in the due index
// gets one in the new shard's (a bucket add, at its due time, before the
// host write, as a commit's move does); the old shard's entry is settled
// by the host's version (duelist.go). Only the holder of from's lease
// moves a host out of it, as only it releases one: a trusted sight of a
// joined host stays true.
func (s *Store) Move(ctx context.Context, key string, from, to int) (*hostqueue.Host, error) {
	w, others, err := s.writeHost(ctx, key, "move "+key, true, func(ctx context.Context, cur *hostItem) (*hostWrite, error) {
		if cur == nil {
			return nil, fmt.Errorf("move %s: %w", key, hostqueue.ErrNotFound)
		}
		if cur.VirtualShard != from || from == to {
			return nil, &errStays{cur}
		}
		next := cur.successor()
		next.VirtualShard = to
		if cur.hasEntry() {
			sk, err := s.addToBucket(ctx, key, to, cur.Version, cur.ListedDue)
			if err != nil {
				return nil, &retryableError{err}
			}
			next.Listed = sk
		}
		return &hostWrite{next: next, prev: cur.Version}, nil
	})
	var stays *errStays
	if errors.As(err, &stays) {
		return s.toHost(ctx, key, stays.cur, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("move %s from shard %d to %d: %w", key, from, to, err)
	}
	s.dropWrites(w.next.PK, others)
	return s.toHost(ctx, key, w.next, 0)
}
