package dynamo_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue/storetest"
)

// Tests of the due lists (duelist.go): an ingest batch names its new hosts
// of a shard in one list item instead of a bucket entry each. They cover the
// windows the list opens: a crash between the list and the appends, an
// append racing a drain, a list's settling racing an append in flight,
// and lost answers on the list and on a listed host's append.

// listEnv is a table with an ingest store and a check store on one clock.
type listEnv struct {
	*env
	clock *storetest.Clock
	check *dynamo.Store
}

func newListEnv(t *testing.T) *listEnv {
	e := newEnv(t)
	// DueHosts reads each named host's item with an eventually
	// consistent GetItem; these tests read the list at once after writing.
	e.readYourWrites()
	c := storetest.NewClock(t0)
	return &listEnv{env: e, clock: c, check: dynamo.New(e.db, e.table, c.Now)}
}

// store is a store on client c (nil: the table's) on the test's clock.
func (e *listEnv) storeOn(c dynamo.Client) *dynamo.Store {
	if c == nil {
		c = e.db
	}
	return dynamo.New(c, e.table, e.clock.Now)
}

// batch appends n entries tagged tag to each key through s, due now.
func (e *listEnv) batch(s *dynamo.Store, tag string, n int, keys ...string) []hostqueue.AppendOutcome {
	var reqs []hostqueue.AppendRequest
	for _, k := range keys {
		reqs = append(reqs, hostqueue.AppendRequest{Key: k, Entries: entries(tag+"-"+k, 0, n, 100), Limit: 100, Due: e.clock.Now()})
	}
	return s.AppendBatch(e.t.Context(), reqs)
}

func (e *listEnv) batchOK(s *dynamo.Store, tag string, n int, keys ...string) {
	e.t.Helper()
	for i, o := range e.batch(s, tag, n, keys...) {
		if o.Err != nil || o.Result.Appended != n {
			e.t.Fatalf("batch append to %s = %+v, %v; want %d appended", keys[i], o.Result, o.Err, n)
		}
	}
}

// due is what the check store finds due in vs now.
func (e *listEnv) due(vs int) []string {
	e.t.Helper()
	keys, err := e.check.DueHosts(e.t.Context(), vs, e.clock.Now(), 1000)
	if err != nil {
		e.t.Fatalf("due hosts of shard %d: %v", vs, err)
	}
	return slices.Sorted(slices.Values(keys))
}

func (e *listEnv) wantDue(what string, vs int, want ...string) {
	e.t.Helper()
	if got := e.due(vs); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		e.t.Errorf("%s: due hosts of shard %d = %v, want %v", what, vs, got, want)
	}
}

// drain commits every queued entry of key and releases it, through the
// check store.
func (e *listEnv) drain(key string) {
	e.t.Helper()
	h, err := e.check.Load(e.t.Context(), key, 1000)
	if err != nil {
		e.t.Fatalf("load %s: %v", key, err)
	}
	if _, err := e.check.Commit(e.t.Context(), key, hostqueue.Commit{Done: ids(h.Head), Release: true, IdleTTL: time.Hour}); err != nil {
		e.t.Fatalf("drain %s: %v", key, err)
	}
}

// lists returns the sort keys of vs's due lists and the hosts each names.
func (e *listEnv) lists(vs int) map[string][]string {
	e.t.Helper()
	out := map[string][]string{}
	for sk, hosts := range e.index(vs) {
		if strings.Contains(sk, "#l#") {
			out[sk] = hosts
		}
	}
	return out
}

// inBucket tells whether key is joined to a due bucket.
func (e *listEnv) inBucket(key string) bool {
	e.t.Helper()
	return strings.Contains(e.rawHost(key).Listed, "#b#")
}

// wantIndexGone asserts that once every host has drained and the buckets'
// slots are over, the check leaves no due-index item of vs behind.
func (e *listEnv) wantIndexGone(vs int) {
	e.t.Helper()
	e.clock.Advance(11 * time.Second)
	e.due(vs) // closes the buckets
	e.due(vs) // deletes what is settled
	if got := e.index(vs); len(got) != 0 {
		e.t.Errorf("due-index items of shard %d once drained = %v, want none", vs, got)
	}
}

// index returns the sort keys of vs's due-index items and the hosts each
// names.
func (e *listEnv) index(vs int) map[string][]string {
	e.t.Helper()
	lists := map[string][]string{}
	for _, pk := range dynamo.DuePKs(vs) {
		out, err := e.db.Query(e.t.Context(), &dynamodb.QueryInput{
			TableName:              &e.table,
			KeyConditionExpression: aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": &types.AttributeValueMemberS{Value: pk},
			},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			e.t.Fatalf("query the due index %s: %v", pk, err)
		}
		for _, it := range out.Items {
			var hosts []string
			if l, ok := it["h"].(*types.AttributeValueMemberL); ok {
				for _, h := range l.Value {
					hosts = append(hosts, h.(*types.AttributeValueMemberS).Value)
				}
			}
			lists[it["sk"].(*types.AttributeValueMemberS).Value] = hosts
		}
	}
	return lists
}

// wantPending asserts how many entries key holds, through a fresh store.
func (e *listEnv) wantPending(key string, n int) {
	e.t.Helper()
	if h := e.load(key, 0); h.Pending != n {
		e.t.Errorf("%s: pending %d, want %d", key, h.Pending, n)
	}
}

// TestDueListLayout: a batch's new hosts of a shard share one list item
// and stay out of the buckets; a lone host of its shard goes into a bucket; the
// list goes once every host it names has drained or moved.
func TestDueListLayout(t *testing.T) {
	t.Parallel()
	e := newListEnv(t)
	const vs, lone = 5, 6
	keys := keysInShard("lay", vs, 4)
	other := keysInShard("lay", lone, 1)
	e.batchOK(e.storeOn(nil), "a", 2, append(slices.Clone(keys), other...)...)

	lists := e.lists(vs)
	if len(lists) != 1 {
		t.Fatalf("lists of shard %d = %v, want one", vs, lists)
	}
	for _, hosts := range lists {
		if !slices.Equal(slices.Sorted(slices.Values(hosts)), slices.Sorted(slices.Values(keys))) {
			t.Errorf("the list names %v, want %v", hosts, keys)
		}
	}
	for _, k := range keys {
		if raw := e.rawHost(k); !strings.Contains(raw.Listed, "#l#") || raw.Due != t0.UnixMilli() {
			t.Errorf("listed %s: entry %q due %d; want its list, due %d", k, raw.Listed, raw.Due, t0.UnixMilli())
		}
	}
	if raw := e.rawHost(other[0]); raw.Due != t0.UnixMilli() || !e.inBucket(other[0]) {
		t.Errorf("lone host %s: entry %q due %d, want a bucket at %d", other[0], raw.Listed, raw.Due, t0.UnixMilli())
	}
	if got := e.lists(lone); len(got) != 0 {
		t.Errorf("lists of shard %d = %v, want none for a lone host", lone, got)
	}
	e.wantDue("after the batch", vs, keys...)
	e.wantDue("the lone host", lone, other...)

	// One host drains, one moves into a bucket for later: the list stays
	// for the two others.
	e.drain(keys[0])
	h, _ := e.check.Load(t.Context(), keys[1], 10)
	later := t0.Add(time.Hour)
	if _, err := e.check.Commit(t.Context(), keys[1], hostqueue.Commit{Done: ids(h.Head[:1]), Release: true, NextDue: later}); err != nil {
		t.Fatal(err)
	}
	e.wantDue("a drain and a move", vs, keys[2:]...)
	if raw := e.rawHost(keys[1]); raw.Due != later.UnixMilli() || !e.inBucket(keys[1]) {
		t.Errorf("moved %s: entry %q due %d; want a bucket at %d", keys[1], raw.Listed, raw.Due, later.UnixMilli())
	}
	if len(e.lists(vs)) != 1 {
		t.Errorf("lists after a drain and a move = %v, want the list kept", e.lists(vs))
	}
	e.drain(keys[2])
	e.drain(keys[3])
	e.wantDue("all listed hosts settled", vs)
	if got := e.lists(vs); len(got) != 0 {
		t.Errorf("lists once every host settled = %v, want none", got)
	}
	e.clock.Advance(time.Hour)
	e.wantDue("the moved host at its time", vs, keys[1])
	e.wantPending(keys[1], 1)

	// A later batch with a host of the list already drained lists it again.
	e.batchOK(e.storeOn(nil), "b", 1, keys[0], keys[2], keys[3])
	e.wantDue("the next batch", vs, keys[0], keys[1], keys[2], keys[3])
	if len(e.lists(vs)) != 1 {
		t.Errorf("lists after the next batch = %v, want one", e.lists(vs))
	}
}

// failHosts fails the host-item writes of keys (no write applied), every
// time: an ingest that dies between its list and its appends.
type failHosts struct {
	dynamo.Client
	keys map[string]bool
}

func (c failHosts) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if pk, ok := in.Item["pk"].(*types.AttributeValueMemberS); ok && skOf(in.Item) == "h" && c.keys[strings.TrimPrefix(pk.Value, "h#")] {
		return nil, errLostResponse
	}
	return c.Client.PutItem(ctx, in, opt...)
}

// TestDueListCrashBeforeAppend: a list whose hosts' appends never landed
// names hosts without work. They are not due; the list stays until a
// redelivered batch settles them, or, left alone, until the check fences
// them once the list is older than any ingest lives.
func TestDueListCrashBeforeAppend(t *testing.T) {
	t.Parallel()
	const vs = 7
	t.Run("redelivered", func(t *testing.T) {
		t.Parallel()
		e := newListEnv(t)
		keys := keysInShard("crash", vs, 3)
		crashed := e.storeOn(failHosts{Client: e.db, keys: map[string]bool{keys[0]: true, keys[1]: true, keys[2]: true}})
		for i, o := range e.batch(crashed, "a", 1, keys...) {
			if o.Err == nil {
				t.Fatalf("append to %s through the failing client succeeded", keys[i])
			}
		}
		e.wantDue("after the crash", vs)
		if len(e.lists(vs)) != 1 {
			t.Fatalf("lists after the crash = %v, want the crashed batch's", e.lists(vs))
		}
		// The input queue hands the batch over again.
		e.batchOK(e.storeOn(nil), "a", 1, keys...)
		e.wantDue("redelivered", vs, keys...)
		if len(e.lists(vs)) != 1 {
			t.Errorf("lists once redelivered = %v, want only the new batch's (the crashed one settled)", e.lists(vs))
		}
		for _, k := range keys {
			e.wantPending(k, 1)
			e.drain(k)
		}
		e.wantDue("drained", vs)
		e.wantIndexGone(vs)
	})
	t.Run("fenced", func(t *testing.T) {
		t.Parallel()
		e := newListEnv(t)
		keys := keysInShard("fence", vs, 3)
		// keys[0] had an item already (drained), the others none.
		e.batchOK(e.storeOn(nil), "old", 1, keys[0])
		e.drain(keys[0])
		crashed := e.storeOn(failHosts{Client: e.db, keys: map[string]bool{keys[0]: true, keys[1]: true, keys[2]: true}})
		e.batch(crashed, "a", 1, keys...)
		e.wantDue("after the crash", vs)
		e.clock.Advance(11 * time.Minute)
		e.wantDue("fenced", vs)
		e.wantDue("settled", vs)
		if got := e.lists(vs); len(got) != 0 {
			t.Errorf("lists after fencing = %v, want none", got)
		}
		for _, k := range keys {
			if raw := e.rawHost(k); raw == nil || raw.attrs["ix"] != nil || len(raw.Q) != 0 {
				t.Errorf("fenced %s = %+v, want an idle item", k, raw)
			}
		}
		e.batchOK(e.storeOn(nil), "b", 1, keys...)
		e.wantDue("work again after the fence", vs, keys...)
	})
}

// TestDueListAppendRacesDrain: a batch reads a host with work (so no list
// names it) and the check drains it before the batch's append lands. The
// append's version condition fails; decided again on the drained host, it
// gives the host an entry of its own (a bucket).
func TestDueListAppendRacesDrain(t *testing.T) {
	t.Parallel()
	e := newListEnv(t)
	const vs = 9
	keys := keysInShard("race", vs, 4)
	busy := keys[0]
	e.batchOK(e.storeOn(nil), "a", 1, busy)
	var once sync.Once
	hooked := &hookHosts{Client: e.db, key: busy, before: func() { once.Do(func() { e.drain(busy) }) }}
	e.batchOK(e.storeOn(hooked), "b", 1, keys...)
	e.wantPending(busy, 1)
	e.wantDue("after the race", vs, keys...)
	if !e.inBucket(busy) {
		t.Errorf("%s re-decided after the drain: entry %q, want a bucket", busy, e.rawHost(busy).Listed)
	}
	for _, k := range keys {
		e.drain(k)
	}
	e.wantDue("drained", vs)
	e.wantIndexGone(vs)
}

// hookHosts runs before once before the first write of key's host item.
type hookHosts struct {
	dynamo.Client
	key    string
	before func()
	fired  atomic.Bool
}

func (c *hookHosts) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if pk, ok := in.Item["pk"].(*types.AttributeValueMemberS); ok && skOf(in.Item) == "h" && pk.Value == "h#"+c.key && !c.fired.Swap(true) {
		c.before()
	}
	return c.Client.PutItem(ctx, in, opt...)
}

// TestDueListSettleRacesAppend: the check reads a list while one of its
// hosts' appends is still in flight. Read before it lands, the host is
// neither due nor settled: the list stays, and the host is due once its
// append lands. Fenced before it lands (an old list), the append loses its
// version, and decided again goes into a bucket: due all the same.
func TestDueListSettleRacesAppend(t *testing.T) {
	t.Parallel()
	const vs = 11
	for _, fence := range []bool{false, true} {
		name := "in flight"
		if fence {
			name = "fenced"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newListEnv(t)
			keys := keysInShard("settle"+name[:1], vs, 3)
			slow := keys[0]
			var seenDue []string
			hooked := &hookHosts{Client: e.db, key: slow, before: func() {
				if fence {
					e.clock.Advance(11 * time.Minute)
				}
				seenDue = e.due(vs)
			}}
			e.batchOK(e.storeOn(hooked), "a", 2, keys...)
			if slices.Contains(seenDue, slow) {
				t.Errorf("due before its append landed: %v", seenDue)
			}
			e.wantDue("after the append landed", vs, keys...)
			e.wantPending(slow, 2)
			if fence != e.inBucket(slow) {
				t.Errorf("%s: entry %q; want a bucket only when fenced", slow, e.rawHost(slow).Listed)
			}
			for _, k := range keys {
				e.drain(k)
			}
			e.wantDue("drained", vs)
			e.wantIndexGone(vs)
		})
	}
}

// TestDueListAmbiguous: lost answers on a list's put and on a listed
// host's append neither lose a host nor queue an entry twice.
func TestDueListAmbiguous(t *testing.T) {
	t.Parallel()
	const vs = 13
	listPut := func(op, sk string) bool { return op == "put" && strings.Contains(sk, "#l#") }
	for _, tc := range []struct {
		name string
		how  ambiguity
		pick func(op, sk string) bool
		// listed: the hosts end up in the list (else in buckets).
		listed bool
	}{
		{"list put applied, answer lost", appliedThenError, listPut, false},
		{"list put applied, sent again", appliedThenRetried, listPut, true},
		{"list put not applied", notAppliedError, listPut, false},
		{"listed append applied, answer lost", appliedThenError, hostWrite, true},
		{"listed append applied, sent again", appliedThenRetried, hostWrite, true},
		{"listed append not applied", notAppliedError, hostWrite, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newListEnv(t)
			keys := keysInShard("amb"+tc.name[:6]+tc.how.String()[:3], vs, 3)
			l := newLossy(e.db, tc.how, 1, tc.pick)
			e.batchOK(e.storeOn(l), "a", 2, keys...)
			if l.hits.Load() != 1 {
				t.Fatalf("%d writes hit, want 1", l.hits.Load())
			}
			e.wantDue("after the batch", vs, keys...)
			inBuckets := 0
			for _, k := range keys {
				e.wantPending(k, 2)
				if e.inBucket(k) {
					inBuckets++
				}
			}
			if want := map[bool]int{true: 0, false: 3}[tc.listed]; inBuckets != want {
				t.Errorf("%d hosts in buckets, want %d", inBuckets, want)
			}
			for _, k := range keys {
				e.drain(k)
			}
			e.wantDue("drained", vs)
			e.wantIndexGone(vs)
		})
	}
}

// TestDueBucketAmbiguous: lost answers on a bucket add (a lone host's
// append, a commit's move) neither lose the host nor queue an entry twice:
// an add that landed under an error is a stale entry, one sent again a
// duplicate, one not applied is made again by the write's next attempt.
func TestDueBucketAmbiguous(t *testing.T) {
	t.Parallel()
	const vs = 14
	add := func(op, sk string) bool { return op == "update" && strings.Contains(sk, "#b#") }
	for _, how := range []ambiguity{appliedThenError, appliedThenRetried, notAppliedError} {
		t.Run(how.String(), func(t *testing.T) {
			t.Parallel()
			e := newListEnv(t)
			key := keysInShard("bamb"+how.String()[:5], vs, 1)[0]
			l := newLossy(e.db, how, 1, add)
			s := e.storeOn(l)
			if _, err := s.Append(t.Context(), hostqueue.AppendRequest{Key: key, Entries: entries("a", 0, 2, 100), Limit: 10, Due: t0}); err != nil {
				t.Fatalf("append: %v", err)
			}
			if l.hits.Load() != 1 {
				t.Fatalf("%d adds hit, want 1", l.hits.Load())
			}
			e.wantPending(key, 2)
			e.wantDue("after the append", vs, key)

			// The move: released with one entry left, due in a minute.
			l.left.Store(1)
			h, err := s.Load(t.Context(), key, 10)
			if err != nil {
				t.Fatal(err)
			}
			later := t0.Add(time.Minute)
			if _, err := s.Commit(t.Context(), key, hostqueue.Commit{Done: ids(h.Head[:1]), Release: true, NextDue: later}); err != nil {
				t.Fatalf("commit: %v", err)
			}
			e.wantPending(key, 1)
			e.wantDue("moved", vs)
			e.clock.Advance(time.Minute)
			e.wantDue("at its time", vs, key)
			e.drain(key)
			e.wantIndexGone(vs)
		})
	}
}

// deleteRacer runs add once around the check's first delete of a bucket:
// before it is sent (after the check read the bucket) or after it landed.
type deleteRacer struct {
	dynamo.Client
	after bool
	add   func()
	fired atomic.Bool
}

func (c *deleteRacer) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if !strings.Contains(skOf(in.Key), "#b#") || c.fired.Swap(true) {
		return c.Client.DeleteItem(ctx, in, opt...)
	}
	if !c.after {
		c.add()
	}
	out, err := c.Client.DeleteItem(ctx, in, opt...)
	if c.after {
		c.add()
	}
	return out, err
}

// TestDueBucketAddRacesDelete: an add lands in a bucket (a writer whose
// clock is behind, aiming at a slot the check thinks over) while the check
// deletes it. Landed after the check read the bucket, it fails the
// delete's condition on the count of adds: the bucket stays, and its new
// host is due. Landed after the delete, it makes the bucket again: due all
// the same. Either way nothing is left once the hosts drain.
func TestDueBucketAddRacesDelete(t *testing.T) {
	t.Parallel()
	const vs = 15
	for _, after := range []bool{false, true} {
		name := "before the delete"
		if after {
			name = "after the delete"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newListEnv(t)
			keys := keysInShard("race"+name[:1], vs, 2)
			// keys[0] opens the bucket of t0's slot and drains: the bucket
			// is all settled.
			e.batchOK(e.storeOn(nil), "a", 1, keys[0])
			e.drain(keys[0])
			behind := dynamo.New(e.db, e.table, func() time.Time { return t0 })
			racer := &deleteRacer{Client: e.db, after: after, add: func() {
				if _, err := behind.Append(t.Context(), hostqueue.AppendRequest{Key: keys[1], Entries: entries("b", 0, 1, 100), Limit: 10, Due: t0}); err != nil {
					t.Errorf("append behind: %v", err)
				}
			}}
			e.check = dynamo.New(racer, e.table, e.clock.Now)
			e.clock.Advance(11 * time.Second) // the slot is over
			first := e.due(vs)
			if !racer.fired.Load() {
				t.Fatalf("the check deleted no bucket (due %v)", first)
			}
			if raw := e.rawHost(keys[1]); !strings.HasPrefix(raw.Listed, fmtMs(t0)) {
				t.Errorf("%s: entry %q, want the bucket of t0's slot", keys[1], raw.Listed)
			}
			e.wantDue("after the race", vs, keys[1])
			e.wantPending(keys[1], 1)
			e.drain(keys[1])
			e.wantIndexGone(vs)
		})
	}
}

// fmtMs is a sort key's time prefix for the slot of t.
func fmtMs(t time.Time) string {
	ms := t.UnixMilli() - t.UnixMilli()%5000
	return strconv.FormatInt(ms, 10) + "#"
}

// readHook runs once before the first GetItem.
type readHook struct {
	dynamo.Client
	once sync.Once
	f    func()
}

func (c *readHook) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.once.Do(c.f)
	return c.Client.GetItem(ctx, in, opt...)
}

// TestAppendBatchUntil: a batch starts no wave of hosts after its
// deadline; the wave under way when it passes finishes. The hosts left
// out fail with ErrNoTime, unwritten.
func TestAppendBatchUntil(t *testing.T) {
	t.Parallel()
	e := newListEnv(t)
	until := t0.Add(time.Second)
	// The deadline passes while the first wave reads.
	s := e.storeOn(&readHook{Client: e.db, f: func() { e.clock.Advance(2 * time.Second) }})
	var reqs []hostqueue.AppendRequest
	for i := range 300 {
		reqs = append(reqs, hostqueue.AppendRequest{Key: "until" + strconv.Itoa(i) + ".example", Entries: entries("u"+strconv.Itoa(i), 0, 1, 100), Limit: 10, Due: t0})
	}
	out := s.AppendBatchUntil(t.Context(), reqs, until)
	written, late := 0, 0
	for i, o := range out {
		switch {
		case o.Err == nil && o.Result.Appended == 1:
			written++
		case errors.Is(o.Err, hostqueue.ErrNoTime):
			late++
			if e.rawHost(reqs[i].Key) != nil {
				t.Errorf("%s failed with ErrNoTime but was written", reqs[i].Key)
			}
		default:
			t.Errorf("%s: %+v, %v", reqs[i].Key, o.Result, o.Err)
		}
	}
	if written != 256 || late != 300-256 {
		t.Errorf("%d written, %d late; want the first wave (256) written, the rest late", written, late)
	}
	if out := e.storeOn(nil).AppendBatchUntil(t.Context(), reqs[:3], until); !errors.Is(out[0].Err, hostqueue.ErrNoTime) {
		t.Errorf("a batch begun after its deadline: %v, want ErrNoTime", out[0].Err)
	}
}

// TestDueHostsReadsWhatItNames: a check that takes a shard over knows none
// of the hosts its lists name. Asked for a few, it reads about as many as
// it names, not every listed host (at 5,000 hosts on moto, reading them all
// first took a whole invocation before its first request); asked again, it
// names the next ones, and once every host is known it reads none.
func TestDueHostsReadsWhatItNames(t *testing.T) {
	t.Parallel()
	e := newListEnv(t)
	const vs, hosts, limit = 9, 300, 10
	keys := keysInShard("many", vs, hosts)
	e.batchOK(e.storeOn(nil), "a", 1, keys...)
	if n := len(e.lists(vs)); n == 0 {
		t.Fatalf("no due list for a batch of %d hosts of shard %d", hosts, vs)
	}
	c := &readCounter{Client: e.db}
	taker := e.storeOn(c)
	// Under its lease, as a check holds it: a joined host's sight stands.
	if ok, err := taker.AcquireShard(t.Context(), vs, "taker", e.clock.Now().Add(time.Hour), e.clock.Now()); !ok || err != nil {
		t.Fatalf("take shard %d: %v, %v", vs, ok, err)
	}
	got, err := taker.DueHosts(t.Context(), vs, e.clock.Now(), limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != limit {
		t.Fatalf("DueHosts(limit %d) = %d hosts %v, want %d", limit, len(got), got, limit)
	}
	if n := c.hostReads.Load(); n < limit || n > 32+limit {
		t.Errorf("DueHosts(limit %d) over a list of %d unknown hosts read %d host items, want about as many as it names (at most a read chunk, 32, beyond)", limit, hosts, n)
	}
	all, err := taker.DueHosts(t.Context(), vs, e.clock.Now(), 2*hosts)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != hosts {
		t.Errorf("asked for all: %d due, want %d", len(all), hosts)
	}
	before := c.hostReads.Load()
	if _, err := taker.DueHosts(t.Context(), vs, e.clock.Now(), 2*hosts); err != nil {
		t.Fatal(err)
	}
	if n := c.hostReads.Load() - before; n != 0 {
		t.Errorf("asked again with every host known: %d reads, want none", n)
	}
}

// countHostPuts counts the host-item writes made through it.
type countHostPuts struct {
	dynamo.Client
	n atomic.Int64
}

func (c *countHostPuts) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if skOf(in.Item) == "h" {
		c.n.Add(1)
	}
	return c.Client.PutItem(ctx, in, opt...)
}

// TestDueListFenceAfterTTL: a list outlives the item of a host it names
// (TTL deleted the idle host after the list named it at version 2 or
// more). The fence writes the stub past the named version at once: one
// write a host, and the next look settles the list, instead of a stub
// raised one version a look.
func TestDueListFenceAfterTTL(t *testing.T) {
	t.Parallel()
	e := newListEnv(t)
	const vs = 11
	keys := keysInShard("ttl", vs, 3)
	// Every host had an item, drained: each is named at version 2 or more.
	e.batchOK(e.storeOn(nil), "old", 1, keys...)
	for _, k := range keys {
		e.drain(k)
	}
	e.wantDue("drained", vs) // settles the first batch's list
	named := map[string]int64{}
	for _, k := range keys {
		named[k] = e.rawHost(k).V
	}
	crashed := e.storeOn(failHosts{Client: e.db, keys: map[string]bool{keys[0]: true, keys[1]: true, keys[2]: true}})
	e.batch(crashed, "a", 1, keys...)
	if len(e.lists(vs)) != 1 {
		t.Fatalf("lists after the crash = %v, want the crashed batch's", e.lists(vs))
	}
	// TTL deletes the idle hosts' items, as DynamoDB does after their expiry.
	for _, k := range keys[:2] {
		_, err := e.db.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: &e.table, Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "h#" + k}, "sk": &types.AttributeValueMemberS{Value: "h"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	puts := &countHostPuts{Client: e.db}
	e.check = e.storeOn(puts)
	e.clock.Advance(11 * time.Minute)
	e.wantDue("fenced", vs)
	for _, k := range keys {
		if raw := e.rawHost(k); raw == nil || raw.V != named[k]+1 {
			t.Errorf("%s fenced to %+v, want version %d (named %d, plus one)", k, raw, named[k]+1, named[k])
		}
	}
	e.wantDue("settled", vs)
	if got := e.lists(vs); len(got) != 0 {
		t.Errorf("lists after the fence = %v, want none", got)
	}
	if n := puts.n.Load(); n != int64(len(keys)) {
		t.Errorf("%d host writes to fence %d hosts, want one each", n, len(keys))
	}
	e.batchOK(e.storeOn(nil), "b", 1, keys...)
	e.wantDue("work again after the fence", vs, keys...)
}
