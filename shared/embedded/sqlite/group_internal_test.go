package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestGroupCommit: writes that queue while the connection is busy share a
// transaction, each in a savepoint of its own: a failing write is undone
// alone and returns its own error, the others are committed, and every
// caller returns only after the COMMIT.
func TestGroupCommit(t *testing.T) {
	s, err := New(filepath.Join(t.TempDir(), "state.db"), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, "CREATE TABLE g (n INTEGER PRIMARY KEY)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const writers = 40
	errBad := errors.New("refused on purpose")
	canceled, cancel := context.WithCancel(ctx)
	cancel()

	// Hold the connection so that every writer queues, as they do behind
	// a running transaction (serve may have taken the first of them
	// already, and waits with it).
	s.mu.Lock()
	before := s.writeTxs
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			wctx := ctx
			if i == 7 {
				wctx = canceled
			}
			errs[i] = s.write(wctx, func(tx *txn) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO g (n) VALUES (?)", i); err != nil {
					return err
				}
				if i%5 == 0 {
					return fmt.Errorf("writer %d: %w", i, errBad)
				}
				return nil
			})
		})
	}
	for {
		s.qmu.Lock()
		n := s.waiting
		s.qmu.Unlock()
		if n == writers-1 { // the canceled one returns at once
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.mu.Unlock()
	wg.Wait()

	var kept []int
	if err := s.read(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, "SELECT n FROM g ORDER BY n")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				return err
			}
			kept = append(kept, n)
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	want := map[int]bool{}
	for i := range writers {
		switch {
		case i == 7:
			if !errors.Is(errs[i], context.Canceled) {
				t.Errorf("writer 7 (canceled): %v, want context.Canceled", errs[i])
			}
		case i%5 == 0:
			if !errors.Is(errs[i], errBad) {
				t.Errorf("writer %d: %v, want its own error", i, errs[i])
			}
		default:
			if errs[i] != nil {
				t.Errorf("writer %d: %v", i, errs[i])
			}
			want[i] = true
		}
	}
	if len(kept) != len(want) {
		t.Errorf("rows %v, want exactly the %d writes that succeeded", kept, len(want))
	}
	for _, n := range kept {
		if !want[n] {
			t.Errorf("row %d kept, but its write failed", n)
		}
	}
	s.mu.Lock()
	txs := s.writeTxs - before
	s.mu.Unlock()
	if txs > 2 {
		t.Errorf("%d writers queued behind one transaction took %d transactions, want them grouped (1)", writers-1, txs)
	}
}
