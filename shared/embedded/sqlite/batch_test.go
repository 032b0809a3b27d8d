package sqlite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

// TestAppendBatch: AppendBatch gives every request the outcome Append
// would have: across more hosts than one chunk, on a host already queued,
// a queue that holds URLs back, and a queue that evicts (its entries
// reported before they leave); a closed store refuses each request.
func TestAppendBatch(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: t0}
	s, err := sqlite.NewMemory(c.now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entries := func(key string, from, n int) []hostqueue.Entry {
		var es []hostqueue.Entry
		for i := from; i < from+n; i++ {
			es = append(es, hostqueue.Entry{ID: fmt.Sprintf("%s-%d", key, i), URL: fmt.Sprintf("http://%s/%d", key, i)})
		}
		return es
	}
	for _, key := range []string{"old.example", "full.example", "evict.example"} {
		if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: entries(key, 0, 2), Limit: 3, Due: t0}); err != nil {
			t.Fatal(err)
		}
	}
	var reported []string
	reqs := []hostqueue.AppendRequest{
		{Key: "old.example", Entries: entries("old.example", 2, 1), Limit: 10, Due: t0},
		{Key: "full.example", Entries: entries("full.example", 2, 3), Limit: 3, HoldBack: true, Due: t0},
		{Key: "evict.example", Entries: entries("evict.example", 2, 3), Limit: 3, Due: t0,
			OnEvict: func(_ context.Context, ev []hostqueue.Entry) error {
				for _, e := range ev {
					reported = append(reported, e.ID)
				}
				return nil
			}},
	}
	const fresh = 4200 // more than one chunk of appends (4,096)
	for i := range fresh {
		key := fmt.Sprintf("h%04d.example", i)
		reqs = append(reqs, hostqueue.AppendRequest{Key: key, Entries: entries(key, 0, 2), Limit: 10, Due: t0})
	}
	out := s.AppendBatch(ctx, reqs)

	if len(out) != len(reqs) {
		t.Fatalf("%d outcomes for %d requests", len(out), len(reqs))
	}
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("request %d (%s): %v", i, reqs[i].Key, o.Err)
		}
	}
	if r := out[0].Result; r.Appended != 1 || r.Pending != 3 || r.Activated {
		t.Errorf("old.example: %+v, want 1 appended to its 2, not activated again", r)
	}
	if r := out[1].Result; r.Appended != 1 || r.HeldBack != 2 || r.Pending != 3 {
		t.Errorf("full.example: %+v, want 1 appended and 2 held back at the limit of 3", r)
	}
	if r := out[2].Result; r.Appended != 3 || r.Evicted != 2 || r.Pending != 3 {
		t.Errorf("evict.example: %+v, want 3 appended and the 2 oldest evicted", r)
	}
	if want := []string{"evict.example-0", "evict.example-1"}; !slices.Equal(reported, want) {
		t.Errorf("evictions reported %v, want %v once each", reported, want)
	}
	for i, o := range out[3:] {
		if r := o.Result; r.Appended != 2 || !r.Activated {
			t.Fatalf("fresh host %d: %+v, want 2 appended and the host activated", i, r)
		}
	}
	for _, key := range []string{"h0000.example", fmt.Sprintf("h%04d.example", fresh-1)} {
		h, err := s.Load(ctx, key, 10)
		if err != nil || h.Pending != 2 || len(h.Head) != 2 {
			t.Fatalf("load %s: %+v, %v; want its 2 entries", key, h, err)
		}
	}

	s.Close()
	for i, o := range s.AppendBatch(ctx, reqs[:2]) {
		if o.Err == nil {
			t.Errorf("closed store: request %d appended (%+v), want an error", i, o.Result)
		}
	}
}
