package dynamo

// Tests of the due buckets' adds on moto, counting the writes they cost:
// an add must not walk through a slot's full buckets, and a shard's adds
// must not share one partition key.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// writeCounter passes every call to the real client and counts the
// UpdateItems (the bucket adds) and the write units each partition key
// took, a unit a write (a bucket of 30 keys stays within one).
type writeCounter struct {
	Client
	updates atomic.Int64
	mu      sync.Mutex
	units   map[string]int
}

func (c *writeCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates.Add(1)
	c.mu.Lock()
	c.units[in.Key["pk"].(*types.AttributeValueMemberS).Value]++
	c.mu.Unlock()
	return c.Client.UpdateItem(ctx, in, opt...)
}

// bucketEnv is a table on moto, a counting client on it and a store.
type bucketEnv struct {
	t     *testing.T
	c     *writeCounter
	table string
	now   time.Time
}

func newBucketEnv(t *testing.T) *bucketEnv {
	st, cfg := stack.DeployForTest(t, stack.Options{})
	c := &writeCounter{Client: dynamodb.NewFromConfig(cfg), units: map[string]int{}}
	return &bucketEnv{t: t, c: c, table: st.TableName, now: time.UnixMilli(1_760_000_000_000)}
}

// store is a fresh store on the table: another Lambda instance.
func (e *bucketEnv) store() *Store { return New(e.c, e.table, func() time.Time { return e.now }) }

// shardKeys returns n host keys of virtual shard vs, tagged.
func shardKeys(vs, n int, tag string) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if k := fmt.Sprintf("%s-%d.example", tag, i); hostqueue.VirtualShard(k) == vs {
			out = append(out, k)
		}
	}
	return out
}

// add adds keys to buckets through s, due at due, and returns the
// UpdateItems it cost.
func (e *bucketEnv) add(s *Store, keys []string, due time.Time) int64 {
	e.t.Helper()
	before := e.c.updates.Load()
	for _, k := range keys {
		if _, err := s.addToBucket(e.t.Context(), k, hostqueue.VirtualShard(k), 1, due.UnixMilli()); err != nil {
			e.t.Fatalf("add %s: %v", k, err)
		}
	}
	return e.c.updates.Load() - before
}

// TestBucketAddAfterAFullSlot: after 700 adds to one slot of a shard, a
// fresh store's first add (a new Lambda instance) finds an open bucket in
// a few writes, where walking from the slot's first bucket refused it
// after 20 failed writes.
func TestBucketAddAfterAFullSlot(t *testing.T) {
	t.Parallel()
	e := newBucketEnv(t)
	due := e.now.Add(time.Minute)
	keys := shardKeys(5, 701, "full")
	e.add(e.store(), keys[:700], due)
	if n := e.add(e.store(), keys[700:], due); n > 3 {
		t.Errorf("a fresh store's add after 700 to its slot cost %d UpdateItems, want at most 3", n)
	}
}

// TestBucketAddsAlternatingSlots: a store adding to two slots in turn
// remembers where each slot's adds go, where one position a shard sent
// every add that changed slot back to the slot's first bucket.
func TestBucketAddsAlternatingSlots(t *testing.T) {
	t.Parallel()
	e := newBucketEnv(t)
	a, b := e.now.Add(time.Minute), e.now.Add(2*time.Minute)
	keys := shardKeys(9, 260, "alt")
	s := e.store()
	e.add(s, keys[:100], a)
	e.add(s, keys[100:200], b)
	before := e.c.updates.Load()
	for i, k := range keys[200:] {
		e.add(s, []string{k}, []time.Time{a, b}[i%2])
	}
	if n := e.c.updates.Load() - before; n > 70 {
		t.Errorf("60 adds alternating between two slots cost %d UpdateItems, want at most 70", n)
	}
}

// plannedPeak is the due-index writes a second of one shard the layout
// must take: the simulation's (docs/benchmarks.md, `make sim`) busiest
// due-index key at the 100M/day day's peak hour and at the 500k dump stays
// far below it.
const plannedPeak = 2000

// TestBucketAddsSpreadOverKeys: a second of one shard's adds at the
// planned peak goes to several partition keys, none of them past
// DynamoDB's 1,000 write units a second.
func TestBucketAddsSpreadOverKeys(t *testing.T) {
	t.Parallel()
	e := newBucketEnv(t)
	const n = 400 // the adds sent; the planned peak scales their shares
	e.add(e.store(), shardKeys(2, n, "peak"), e.now)
	keys := slices.Sorted(maps.Keys(e.c.units))
	if len(keys) != dueSpread {
		t.Fatalf("a shard's adds went to partition keys %v, want them spread over %d", keys, dueSpread)
	}
	for _, k := range keys {
		if rate := float64(e.c.units[k]) * plannedPeak / n; rate >= 1000 {
			t.Errorf("partition key %s takes %.0f write units a second at the planned peak (%d of %d adds), want under 1,000", k, rate, e.c.units[k], n)
		}
	}
}
