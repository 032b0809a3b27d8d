package dynamo_test

// Tests of writes whose outcome the store does not learn from the response:
// DynamoDB applied the write but the answer was lost (the SDK may then send
// it again), or it did not apply it and the caller sees an error. The store
// must end in the state a clean run reaches, and above all never delete a
// chunk the host item references (that loses other appends' URLs).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// ambiguity is how a write ends without a clear answer.
type ambiguity int

const (
	// appliedThenError: DynamoDB applied the write, its response was lost
	// and the caller sees an error (the SDK's retries ran out, or the
	// connection broke after the request was taken).
	appliedThenError ambiguity = iota
	// appliedThenRetried: applied, response lost, and the SDK sent the
	// same request again; the caller sees the retry's answer, a failed
	// condition for a versioned write.
	appliedThenRetried
	// notAppliedError: not applied, and the caller sees an error.
	notAppliedError
)

func (a ambiguity) String() string {
	return [...]string{"applied then error", "applied then retried", "not applied, error"}[a]
}

var errLostResponse = errors.New("test: connection reset while reading the response")

// lossy wraps the moto client and makes the outcome of the writes a test
// picks ambiguous, the three ways above. Everything else goes through.
type lossy struct {
	dynamo.Client
	how ambiguity
	// pick chooses the writes to hit ("put" or "delete", the item's sk);
	// left is how many more to hit.
	pick func(op, sk string) bool
	left atomic.Int64
	hits atomic.Int64
	// failReads, when set, fails that many GetItem calls after a hit: the
	// store then cannot learn what happened.
	failReads atomic.Int64
	// between, when set, runs after a hit write was applied and before its
	// answer comes back: other writers getting in first.
	between func(ctx context.Context)
}

func newLossy(c dynamo.Client, how ambiguity, times int, pick func(op, sk string) bool) *lossy {
	l := &lossy{Client: c, how: how, pick: pick}
	l.left.Store(int64(times))
	return l
}

func (l *lossy) take(op, sk string) bool {
	if l.pick == nil || !l.pick(op, sk) {
		return false
	}
	if l.left.Add(-1) < 0 {
		return false
	}
	l.hits.Add(1)
	return true
}

func skOf(m map[string]types.AttributeValue) string {
	if s, ok := m["sk"].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func (l *lossy) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if !l.take("put", skOf(in.Item)) {
		return l.Client.PutItem(ctx, in, opt...)
	}
	if l.how == notAppliedError {
		return nil, errLostResponse
	}
	out, err := l.Client.PutItem(ctx, in, opt...)
	if err != nil {
		return out, err // refused: nothing was applied, the answer is clear
	}
	if l.between != nil {
		l.between(ctx)
	}
	if l.how == appliedThenRetried {
		return l.Client.PutItem(ctx, in, opt...)
	}
	return nil, errLostResponse
}

func (l *lossy) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if !l.take("delete", skOf(in.Key)) {
		return l.Client.DeleteItem(ctx, in, opt...)
	}
	if l.how == notAppliedError {
		return nil, errLostResponse
	}
	out, err := l.Client.DeleteItem(ctx, in, opt...)
	if err != nil {
		return out, err
	}
	if l.how == appliedThenRetried {
		return l.Client.DeleteItem(ctx, in, opt...)
	}
	return nil, errLostResponse
}

func (l *lossy) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if !l.take("update", skOf(in.Key)) {
		return l.Client.UpdateItem(ctx, in, opt...)
	}
	if l.how == notAppliedError {
		return nil, errLostResponse
	}
	out, err := l.Client.UpdateItem(ctx, in, opt...)
	if err != nil {
		return out, err
	}
	if l.how == appliedThenRetried {
		return l.Client.UpdateItem(ctx, in, opt...)
	}
	return nil, errLostResponse
}

func (l *lossy) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if l.hits.Load() > 0 && l.failReads.Load() > 0 && l.failReads.Add(-1) >= 0 {
		return nil, errors.New("test: read failed")
	}
	return l.Client.GetItem(ctx, in, opt...)
}

func hostWrite(op, sk string) bool   { return op == "put" && sk == "h" }
func chunkWrite(op, sk string) bool  { return op == "put" && strings.HasPrefix(sk, "c#") }
func chunkDelete(op, sk string) bool { return op == "delete" && strings.HasPrefix(sk, "c#") }

// outcomeScenario is one store operation run once cleanly and once with a
// write made ambiguous; both runs must end alike.
type outcomeScenario struct {
	name string
	// setup builds the host's state through a clean store; it returns the
	// IDs it queued.
	setup func(e *env, key string) []string
	// run does the operation.
	run  func(ctx context.Context, s *dynamo.Store, key string) opResult
	pick func(op, sk string) bool
}

// opResult is what an operation did: its result described, the IDs it
// queued, reported evicted, or took as done.
type opResult struct {
	res                   string
	queued, evicted, done []string
	err                   error
}

func appendOp(es []hostqueue.Entry, limit int) func(ctx context.Context, s *dynamo.Store, key string) opResult {
	return func(ctx context.Context, s *dynamo.Store, key string) opResult {
		var evicted []string
		r, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: es, Limit: limit, Due: t0,
			OnEvict: func(_ context.Context, ev []hostqueue.Entry) error { evicted = append(evicted, ids(ev)...); return nil }})
		if r.Shard == hostqueue.VirtualShard(key) {
			r.Shard = -1 // the key's own, which differs between the hosts compared
		}
		return opResult{res: fmt.Sprintf("%+v", r), queued: ids(es), evicted: evicted, err: err}
	}
}

func commitOp(c hostqueue.Commit) func(ctx context.Context, s *dynamo.Store, key string) opResult {
	return func(ctx context.Context, s *dynamo.Store, key string) opResult {
		h, err := s.Commit(ctx, key, c)
		if err != nil {
			return opResult{done: c.Done, err: err}
		}
		return opResult{res: describeHost(h), done: c.Done}
	}
}

func describeHost(h *hostqueue.Host) string {
	return fmt.Sprintf("pending %d head %v due %v lf %v pu %v er %d at %v fs %v le %q robots %d/%d",
		h.Pending, ids(h.Head), h.Due.UnixMilli(), h.LastFetch.UnixMilli(), h.PauseUntil.UnixMilli(), h.Errors,
		h.Attempts, h.FailingSince.UnixMilli(), h.LastError, len(h.Robots), len(h.RobotsItems))
}

// stateOf describes what is stored for a host, as a reader sees it, plus
// the raw attributes a reader does not see (ttl, the due-index entry).
func (e *env) stateOf(key string) string {
	e.t.Helper()
	h := e.load(key, 1<<20)
	raw := e.rawHost(key)
	_, inIndex := raw.attrs["ix"]
	return fmt.Sprintf("%s | ttl %d indexed %v", describeHost(h), raw.TTL, inIndex)
}

func outcomeScenarios() []outcomeScenario {
	small := func(e *env, key string) []string {
		es := entries("old", 0, 2, 60)
		e.append(key, es, 100)
		return ids(es)
	}
	// Three 200-byte entries fill the inline tail: the next append moves
	// them, with its own, into a chunk. They belong to other appends, so
	// deleting that chunk while the host item references it loses them.
	tail := func(e *env, key string) []string {
		var out []string
		for i := range 3 {
			es := entries("old", i, 1, 200)
			e.append(key, es, 100)
			out = append(out, ids(es)...)
		}
		return out
	}
	chunks := func(e *env, key string) []string {
		e.buildTwoChunks(key, "old")
		return idRange("old", 0, 10)
	}
	none := func(*env, string) []string { return nil }
	return []outcomeScenario{
		{name: "append inline", setup: small, run: appendOp(entries("new", 0, 1, 60), 100), pick: hostWrite},
		{name: "append spills others' tail", setup: tail, run: appendOp(entries("new", 0, 1, 200), 100), pick: hostWrite},
		{name: "append spills, chunk write", setup: tail, run: appendOp(entries("new", 0, 1, 200), 100), pick: chunkWrite},
		{name: "append creates host", setup: none, run: appendOp(entries("new", 0, 10, 200), 100), pick: hostWrite},
		{name: "append evicts a chunk", setup: chunks, run: appendOp(entries("new", 0, 3, 200), 8), pick: hostWrite},
		{name: "append evicts, chunk delete", setup: chunks, run: appendOp(entries("new", 0, 3, 200), 8), pick: chunkDelete},
		{name: "commit across chunks", setup: chunks, pick: hostWrite,
			run: commitOp(hostqueue.Commit{Done: idRange("old", 0, 5), Attempts: map[string]int{"old-00005": 2}, Want: 3, State: politeness.State{LastFetch: t0, Errors: 1}})},
		{name: "commit, chunk delete", setup: chunks, pick: chunkDelete,
			run: commitOp(hostqueue.Commit{Done: idRange("old", 0, 5), Want: 3, State: politeness.State{LastFetch: t0}})},
		{name: "commit release with work", setup: chunks, pick: hostWrite,
			run: commitOp(hostqueue.Commit{Done: idRange("old", 0, 9), Release: true, NextDue: t0.Add(time.Minute), Want: 3, IdleTTL: time.Hour, State: politeness.State{LastFetch: t0}})},
		{name: "commit release drained", setup: chunks, pick: hostWrite,
			run: commitOp(hostqueue.Commit{Done: idRange("old", 0, 10), Release: true, NextDue: t0.Add(time.Minute), Want: 3, IdleTTL: time.Hour,
				Robots: map[string]hostqueue.Robots{"http://x.example": {Status: 404, FetchedAt: t0}},
				State:  politeness.State{LastFetch: t0},
			})},
		{name: "move with its due entry", setup: small, run: moveOp(5), pick: hostWrite},
	}
}

// moveOp moves the host by shifts shards from its key's own (Mover); the
// result says where it is relative to its own, which differs between the
// hosts compared.
func moveOp(shift int) func(ctx context.Context, s *dynamo.Store, key string) opResult {
	return func(ctx context.Context, s *dynamo.Store, key string) opResult {
		own := hostqueue.VirtualShard(key)
		h, err := s.Move(ctx, key, own, (own+shift)%hostqueue.VirtualShards)
		if err != nil {
			return opResult{err: err}
		}
		return opResult{res: fmt.Sprintf("moved by %d: %s", (h.VirtualShard-own+hostqueue.VirtualShards)%hostqueue.VirtualShards, describeHost(h))}
	}
}

// TestAmbiguousOutcomes runs every scenario cleanly on one host and with
// each kind of ambiguous write on another, and requires the same result,
// the same stored state, no URL lost and exactly the chunk items the host
// references (none deleted while referenced, none left behind).
func TestAmbiguousOutcomes(t *testing.T) {
	t.Parallel()
	parent := newEnv(t)
	for i, sc := range outcomeScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel() // each on hosts of its own
			e := parent.on(t)
			ref := fmt.Sprintf("ref%d.example", i)
			sc.setup(e, ref)
			want := sc.run(t.Context(), e.fresh(), ref)
			if want.err != nil {
				t.Fatalf("clean run: %v", want.err)
			}
			wantState := e.stateOf(ref)
			for _, how := range []ambiguity{appliedThenError, appliedThenRetried, notAppliedError} {
				t.Run(how.String(), func(t *testing.T) {
					e := e.on(t)
					key := fmt.Sprintf("amb%d-%d.example", i, how)
					before := sc.setup(e, key)
					c := newLossy(e.db, how, 1, sc.pick)
					got := sc.run(t.Context(), e.wrapped(c), key)
					if c.hits.Load() != 1 {
						t.Fatalf("%d writes hit, want 1: the scenario did not make the write it names", c.hits.Load())
					}
					e.checkNoLoss(key, before, got)
					if got.err != nil {
						t.Fatalf("%s: %v", how, got.err)
					}
					if got.res != want.res {
						t.Errorf("result\n  %s\nwant, as in a clean run,\n  %s", got.res, want.res)
					}
					if !slices.Equal(got.evicted, want.evicted) {
						t.Errorf("reported evicted %v, want %v (once each, as in a clean run)", got.evicted, want.evicted)
					}
					if got := e.stateOf(key); got != wantState {
						t.Errorf("stored state\n  %s\nwant, as in a clean run,\n  %s", got, wantState)
					}
					if how == notAppliedError && sc.pick("delete", "c#") {
						// Deleting a consumed chunk is best effort: the
						// one whose delete failed is left, unreferenced.
						if n, refs := len(e.chunkSKs(key)), len(e.rawHost(key).C); n != refs+1 {
							t.Errorf("%d chunk items for %d references, want the one whose delete failed left over", n, refs)
						}
						return
					}
					e.checkChunks(key)
				})
			}
		})
	}
}

// checkNoLoss asserts that every ID queued before the operation, and every
// one it queued if it succeeded, is still queued, was reported evicted or
// was committed as done, and that every chunk the host item references
// exists.
func (e *env) checkNoLoss(key string, before []string, op opResult) {
	e.t.Helper()
	h := e.load(key, 1<<20)
	have := map[string]bool{}
	for _, id := range slices.Concat(ids(h.Head), op.evicted, op.done) {
		have[id] = true
	}
	want := slices.Clone(before)
	if op.err == nil {
		want = append(want, op.queued...)
	}
	var lost []string
	for _, id := range want {
		if !have[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		e.t.Errorf("URLs lost (neither queued nor reported evicted): %v", lost)
	}
	if len(h.Head) != h.Pending {
		e.t.Errorf("Pending %d but %d entries readable: a referenced chunk is missing", h.Pending, len(h.Head))
	}
	e.checkReferencedChunks(key)
}

// checkReferencedChunks asserts that every chunk the host item references
// is in the table.
func (e *env) checkReferencedChunks(key string) {
	e.t.Helper()
	raw := e.rawHost(key)
	if raw == nil {
		return
	}
	have := e.chunkSKs(key)
	for _, c := range raw.C {
		if !slices.Contains(have, "c#"+c.ID) {
			e.t.Errorf("the host item references chunk %s, which is gone: its URLs are lost", c.ID)
		}
	}
}

// TestAmbiguousOutcomeUnreadable: the write landed, its response was lost,
// and the store cannot read the item to learn so. It must say the outcome
// is unknown and delete nothing: an orphan chunk is collected later, a
// deleted referenced chunk is a loss.
func TestAmbiguousOutcomeUnreadable(t *testing.T) {
	t.Parallel()
	parent := newEnv(t)
	for _, tc := range []struct {
		name string
		run  func(ctx context.Context, s *dynamo.Store, key string) error
	}{
		{"append", func(ctx context.Context, s *dynamo.Store, key string) error {
			_, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: entries("new", 0, 1, 200), Limit: 100, Due: t0})
			return err
		}},
		{"commit", func(ctx context.Context, s *dynamo.Store, key string) error {
			_, err := s.Commit(ctx, key, hostqueue.Commit{Done: idRange("old", 0, 5), Want: 3})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := parent.on(t)
			key := "unreadable-" + tc.name + ".example"
			e.buildTwoChunks(key, "old")
			chunksBefore := e.chunkSKs(key)
			c := newLossy(e.db, appliedThenError, 1, hostWrite)
			c.failReads.Store(1000)
			err := tc.run(t.Context(), e.wrapped(c), key)
			if !errors.Is(err, dynamo.ErrOutcomeUnknown) {
				t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
			}
			e.checkReferencedChunks(key)
			for _, sk := range chunksBefore {
				if !slices.Contains(e.chunkSKs(key), sk) {
					t.Errorf("chunk %s was deleted although the outcome was unknown", sk)
				}
			}
			h := e.load(key, 100)
			if len(h.Head) != h.Pending {
				t.Errorf("Pending %d, readable %d", h.Pending, len(h.Head))
			}
		})
	}
}

// TestChunkIDCollision: a chunk write that finds an item under its key
// (another append's chunk) must not overwrite it; the append goes on
// under another id.
func TestChunkIDCollision(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const key = "collide.example"
	foreign := entries("foreign", 0, 3, 100)
	c := &collider{Client: e.db, table: e.table, foreign: foreign}
	es := entries("new", 0, 10, 200)
	if _, err := e.wrapped(c).Append(t.Context(), hostqueue.AppendRequest{Key: key, Entries: es, Limit: 100, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if c.collided.Load() != 1 {
		t.Fatalf("%d collisions staged, want 1", c.collided.Load())
	}
	e.wantHead(key, ids(es))
	out, err := e.db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: &e.table, Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "h#" + key}, "sk": &types.AttributeValueMemberS{Value: c.sk},
	}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Q []rawEntry `dynamodbav:"q"`
	}
	if err := attributevalue.UnmarshalMap(out.Item, &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rawIDs(got.Q), ids(foreign)) {
		t.Errorf("the other append's chunk %s now holds %v, want its own %v", c.sk, rawIDs(got.Q), ids(foreign))
	}
}

// collider writes another append's chunk under the key of the first chunk
// the store writes, just before the store's write reaches the table.
type collider struct {
	dynamo.Client
	table    string
	foreign  []hostqueue.Entry
	collided atomic.Int64
	staged   atomic.Bool
	sk       string
}

func (c *collider) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if sk := skOf(in.Item); strings.HasPrefix(sk, "c#") && c.staged.CompareAndSwap(false, true) {
		c.collided.Add(1)
		c.sk = sk
		item := maps.Clone(in.Item)
		q, err := attributevalue.Marshal(rawEntries(c.foreign))
		if err != nil {
			return nil, err
		}
		item["q"] = q
		item["n"] = &types.AttributeValueMemberS{Value: "someone-else"}
		if _, err := c.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: in.TableName, Item: item}); err != nil {
			return nil, err
		}
	}
	return c.Client.PutItem(ctx, in, opt...)
}

// TestAmbiguousLease: a lease write or release whose response is lost
// ends as if the answer had come: the lease that landed is held (and
// another run cannot take it), the release that landed frees the shard.
func TestAmbiguousLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	leaseWrite := func(op, sk string) bool { return op == "put" && sk == "l" }
	leaseDelete := func(op, sk string) bool { return op == "delete" && sk == "l" }
	for _, how := range []ambiguity{appliedThenError, appliedThenRetried, notAppliedError} {
		t.Run(how.String(), func(t *testing.T) {
			vs := 20 + int(how)*3
			// A free shard.
			ok, err := e.wrapped(newLossy(e.db, how, 1, leaseWrite)).AcquireShard(ctx, vs, "me", t0.Add(time.Minute), t0)
			if how == notAppliedError {
				// Not applied: an error or a refusal, and the shard is
				// not held by anyone, so another run can take it.
				if ok {
					t.Errorf("a lease that never landed was reported held")
				}
				if ok2, _ := e.store.AcquireShard(ctx, vs, "other", t0.Add(time.Minute), t0); !ok2 {
					t.Errorf("a lease that never landed blocks the shard")
				}
				// A release that was not applied says so, and the lease
				// stays with its holder.
				if err := e.wrapped(newLossy(e.db, how, 1, leaseDelete)).ReleaseShard(ctx, vs, "other"); err == nil {
					t.Errorf("a release that was not applied returned no error")
				}
				if ok3, _ := e.store.AcquireShard(ctx, vs, "third", t0.Add(time.Minute), t0.Add(time.Second)); ok3 {
					t.Errorf("a release that was not applied freed the shard")
				}
				return
			}
			if err != nil || !ok {
				t.Fatalf("AcquireShard of a free shard = %v, %v; want held (the lease landed)", ok, err)
			}
			if ok, _ := e.store.AcquireShard(ctx, vs, "other", t0.Add(time.Minute), t0.Add(time.Second)); ok {
				t.Errorf("another run took the lease that landed")
			}
			// Renewing it.
			ok, err = e.wrapped(newLossy(e.db, how, 1, leaseWrite)).AcquireShard(ctx, vs, "me", t0.Add(2*time.Minute), t0.Add(30*time.Second))
			if err != nil || !ok {
				t.Errorf("renewal = %v, %v; want held", ok, err)
			}
			if ok, _ := e.store.AcquireShard(ctx, vs, "other", t0.Add(3*time.Minute), t0.Add(90*time.Second)); ok {
				t.Errorf("another run took the renewed lease before it ran out")
			}
			// Giving it back.
			if err := e.wrapped(newLossy(e.db, how, 1, leaseDelete)).ReleaseShard(ctx, vs, "me"); err != nil {
				t.Errorf("ReleaseShard whose delete landed: %v", err)
			}
			if ok, _ := e.store.AcquireShard(ctx, vs, "other", t0.Add(3*time.Minute), t0.Add(40*time.Second)); !ok {
				t.Errorf("the released shard could not be taken")
			}
		})
	}
}

// TestAmbiguousOutcomeWithWritesBetween: other writers get in between a
// write that landed and the store's read back. Within the nonce history
// the store still knows its write landed; beyond it, an append that
// spilled knows by its chunk, one that did not may queue its entries
// twice (never lose one), and a commit says the outcome is unknown rather
// than apply itself again.
func TestAmbiguousOutcomeWithWritesBetween(t *testing.T) {
	t.Parallel()
	parent := newEnv(t)
	for _, tc := range []struct {
		name    string
		between int // writes by others before the read back
		es      []hostqueue.Entry
		commit  bool
		// want: the outcome the store must reach.
		wantDup     bool
		wantUnknown bool
	}{
		{name: "append, 1 write between", between: 1, es: entries("new", 0, 1, 60)},
		{name: "append, 3 writes between", between: 3, es: entries("new", 0, 1, 60)},
		{name: "append spilling, 6 writes between", between: 6, es: entries("new", 0, 10, 200)},
		{name: "append inline, 6 writes between", between: 6, es: entries("new", 0, 1, 60), wantDup: true},
		{name: "commit, 3 writes between", between: 3, commit: true},
		{name: "commit, 6 writes between", between: 6, commit: true, wantUnknown: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := parent.on(t)
			key := strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), ",", "") + ".example"
			before := ids(entries("old", 0, 2, 60))
			e.append(key, entries("old", 0, 2, 60), 1000)
			other := e.fresh()
			var theirs []string
			c := newLossy(e.db, appliedThenError, 1, hostWrite)
			c.between = func(ctx context.Context) {
				for i := range tc.between {
					es := entries("other", i, 1, 60)
					if _, err := other.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: es, Limit: 1000, Due: t0}); err != nil {
						t.Errorf("writer between: %v", err)
					}
					theirs = append(theirs, ids(es)...)
				}
			}
			s := e.wrapped(c)
			var op opResult
			if tc.commit {
				_, err := s.Commit(t.Context(), key, hostqueue.Commit{Done: before[:1], Want: 10, State: politeness.State{LastFetch: t0}})
				op = opResult{done: before[:1], err: err}
			} else {
				_, err := s.Append(t.Context(), hostqueue.AppendRequest{Key: key, Entries: tc.es, Limit: 1000, Due: t0})
				op = opResult{queued: ids(tc.es), err: err}
			}
			e.checkNoLoss(key, slices.Concat(before, theirs), op)
			if tc.wantUnknown {
				if !errors.Is(op.err, dynamo.ErrOutcomeUnknown) {
					t.Fatalf("err = %v, want ErrOutcomeUnknown", op.err)
				}
				e.checkReferencedChunks(key)
				return
			}
			if op.err != nil {
				t.Fatal(op.err)
			}
			head := ids(e.load(key, 1000).Head)
			count := map[string]int{}
			for _, id := range head {
				count[id]++
			}
			for _, id := range op.queued {
				if count[id] > 1 && !tc.wantDup {
					t.Errorf("%s queued %d times: the store did not learn that its write landed", id, count[id])
				}
			}
			if tc.wantDup && count[op.queued[0]] != 2 {
				t.Logf("queued %d times (twice allowed beyond the nonce history)", count[op.queued[0]])
			}
			if tc.commit && slices.Contains(head, before[0]) {
				t.Errorf("the committed entry %s is still queued", before[0])
			}
			e.checkChunks(key)
		})
	}
}

// readCounter counts the host-item reads a store makes.
type readCounter struct {
	dynamo.Client
	hostReads atomic.Int64
}

func (c *readCounter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if skOf(in.Key) == "h" {
		c.hostReads.Add(1)
	}
	return c.Client.GetItem(ctx, in, opt...)
}

// TestOutcomeReadsCostNothingExtra: learning a write's outcome costs no
// read on the happy path, and none beyond the one a retry makes anyway
// when the write lost a race.
func TestOutcomeReadsCostNothingExtra(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	const key = "cost.example"
	e.append(key, entries("base", 0, 2, 100), 1000)

	reads := &readCounter{Client: e.db}
	s := e.wrapped(reads)
	if _, err := s.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: entries("a", 0, 1, 100), Limit: 1000, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, key, hostqueue.Commit{Done: []string{"base-00000"}, Want: 10}); err != nil {
		t.Fatal(err)
	}
	if n := reads.hostReads.Load(); n != 2 {
		t.Errorf("an append and a commit that met no fault read the host item %d times, want 2 (one each)", n)
	}

	// A race lost: the retry's read is the one that judges the lost write.
	other := e.fresh()
	reads = &readCounter{}
	c := &countingClient{Client: e.db}
	c.beforeHostPut = func(ctx context.Context, n int64) {
		if n == 1 {
			if _, err := other.Append(ctx, hostqueue.AppendRequest{Key: key, Entries: entries("b", 0, 1, 100), Limit: 1000, Due: t0}); err != nil {
				t.Errorf("intruding append: %v", err)
			}
		}
	}
	reads.Client = c
	if _, err := e.wrapped(reads).Append(ctx, hostqueue.AppendRequest{Key: key, Entries: entries("a", 1, 1, 100), Limit: 1000, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if c.conflicts.Load() != 1 {
		t.Fatalf("%d conflicts, want 1: the race did not happen as staged", c.conflicts.Load())
	}
	if n := reads.hostReads.Load(); n != 2 {
		t.Errorf("an append that lost one race read the host item %d times, want 2 (one per attempt)", n)
	}
	e.wantHead(key, []string{"base-00001", "a-00000", "b-00000", "a-00001"})
}
