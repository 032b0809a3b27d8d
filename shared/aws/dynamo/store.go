// Package dynamo keeps host queues in DynamoDB (see layout.go for the item
// shapes and why). Writes are read-modify-write under a version condition,
// retried on conflict, so concurrent ingests and checks never lose an entry.
//
// # No write that lands is undone
//
// DynamoDB can apply a write while its caller sees an error: the answer is
// lost (a reset connection, a timeout, a 5xx after the write was taken),
// and the SDK may send the request again, whose version condition then
// fails against the write it already made. Taken at face value, either
// answer undoes a write that landed: deleting the chunks it spilled loses
// the URLs the host item now references (other appends' among them, moved
// there from the inline tail), and retrying a commit applies it twice.
// Hence:
//
//   - Every host-item write carries a random 64-bit nonce, and the item
//     keeps the nonces of its last nonceHistory writes, newest first
//     (Nonces): the write that made version v+1 is known while the item is
//     below v+1+nonceHistory.
//   - On the happy path nothing more happens. After any other answer to a
//     host write (an error, or a failed condition, which may be the SDK's
//     retry of our own applied write), the store reads the item, strongly
//     consistent (the read its next attempt makes anyway, so contention
//     costs no more than before), and judges its write (outcome.go)
//     before it deletes or retries anything: landed (the nonce at its version is its own, or the
//     item references a chunk only it wrote), lost (another write took its
//     version), pending (the item is still at the version it expected, so
//     a request still in flight could apply it yet) or unknown (more
//     writes followed than the item remembers, none of its chunks
//     referenced). A write that landed is a success, with the result its
//     answer would have carried: evictions are reported once, a commit is
//     not applied again on top of itself.
//   - A chunk is deleted only when nothing references it and nothing ever
//     will: the chunks a write stops referencing, once it landed; the
//     chunks a write spilled, once it is lost or unknown, or, pending, once
//     another write of the same call landed on the version it expected.
//     Chunks of a call that ends with a write still pending stay: an
//     orphan is collected at a drain (collectOrphans), a deleted
//     referenced chunk is lost URLs. When the item cannot be read back,
//     nothing is deleted and the error wraps ErrOutcomeUnknown.
//   - Chunks are written with attribute_not_exists under 96-bit random ids
//     and carry their write's nonce: a failed condition is either our own
//     write sent again (the nonce matches) or another append's chunk,
//     which is never overwritten (a new id is drawn).
//   - Lease writes carry a nonce too: a lease whose answer was lost but
//     which landed is held (see AcquireShard and ReleaseShard).
//
// Versions only grow while a host item lives, which makes "the item moved
// past the version I expected" final. An item expires (TTL) only after
// IdleTTL idle, far longer than any request lives, and starts again at 1.
package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// Client is the part of *dynamodb.Client the store uses.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ Client = (*dynamodb.Client)(nil)

var _ hostqueue.Store = (*Store)(nil)

// maxAttempts bounds the optimistic-concurrency retries of one write.
const maxAttempts = 50

// Store is the DynamoDB host-queue store.
type Store struct {
	client Client
	table  string
	now    func() time.Time

	mu          sync.Mutex
	chunks      map[string]cachedChunk // immutable chunks by pk+id
	cachedBytes int

	// OnRetry, when set, is called for every Append or Commit attempt
	// after the first (a conflicting concurrent write, or an answer lost
	// and judged): the StoreRetries metric. Set it before first use.
	OnRetry func()

	// SettleTimeout, when set, replaces the 5 s bound on the read that
	// learns a write's outcome. Tests on an emulator sharing a loaded
	// machine set more: there one read can wait seconds behind others.
	SettleTimeout time.Duration

	// OnTakeover, when set, is called when AcquireShard takes a shard
	// whose lease another owner let expire (the LeaseTakeovers metric).
	OnTakeover func()

	// contended holds the virtual shards whose last acquisition found
	// another holder; see AcquireShard.
	contended sync.Map // int -> struct{}

	// seen is what the store last saw of host items, holds the shards
	// whose lease it holds, for the due lists (duelist.go): guarded by mu.
	seen  map[string]hostSeen
	holds map[int]shardHold
	// positions is where each slot's bucket adds go next (bucket.go).
	positions map[slotKey]int
	// views is what the store knows of hosts' refresh items, by pk
	// (refresh.go): guarded by mu.
	views     map[string]*refreshView
	viewItems int
}

// New returns a store on table; now is the clock used for TTLs.
func New(client Client, table string, now func() time.Time) *Store {
	return &Store{client: client, table: table, now: now, chunks: map[string]cachedChunk{}, seen: map[string]hostSeen{}, holds: map[int]shardHold{}, positions: map[slotKey]int{}, views: map[string]*refreshView{}}
}

// Append implements hostqueue.Appender. A host it gives work goes into a
// due bucket; AppendBatch lists a batch's new hosts instead.
func (s *Store) Append(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
	return s.appendHost(ctx, req, nil, listing{})
}

// appendHost is one host's append: pre, when set, is the host item as the
// batch read it (the first attempt's read), list the due list that names
// the host, if one does.
func (s *Store) appendHost(ctx context.Context, req hostqueue.AppendRequest, pre *preread, list listing) (hostqueue.AppendResult, error) {
	// A host write's transaction holds at most refreshGroup refreshes:
	// more go in further writes, after the first (the queued entries').
	rest := req.Refreshes
	req.Refreshes = rest[:min(len(rest), refreshGroup)]
	rest = rest[len(req.Refreshes):]
	var res hostqueue.AppendResult
	for first := true; ; first = false {
		op := &appendOp{s: s, req: req, reported: hostqueue.Reported{}, list: list}
		w, others, err := s.writeHostFrom(ctx, req.Key, "append to "+req.Key, false, pre, op.write)
		if err != nil {
			return hostqueue.AppendResult{}, err
		}
		r := s.finishAppend(w, others)
		if first {
			res = r
		} else {
			res.Activated = res.Activated || r.Activated
			res.Shard, res.RefreshRefused = r.Shard, r.RefreshRefused
			res.Stopped = append(res.Stopped, r.Stopped...)
		}
		if r.RefreshRefused > 0 || len(rest) == 0 {
			res.RefreshRefused += len(rest)
			return res, nil
		}
		pre, list = nil, listing{}
		req.Entries, req.OnEvict = nil, nil
		req.Refreshes = rest[:min(len(rest), refreshGroup)]
		rest = rest[len(req.Refreshes):]
	}
}

// appendOp is one Append: what its attempts share.
type appendOp struct {
	s   *Store
	req hostqueue.AppendRequest
	// reported are the evicted entries OnEvict has taken, by this or an
	// earlier attempt.
	reported hostqueue.Reported
	// list is the due list that names the host (none: its zero value).
	list listing
}

// write builds an attempt's write on cur, the host item as read (nil:
// none yet): evict to make room, report the evicted entries, queue the
// incoming ones, spill the tail into chunks when it outgrows the item.
func (op *appendOp) write(ctx context.Context, cur *hostItem) (*hostWrite, error) {
	req := op.req
	if cur == nil {
		cur = &hostItem{PK: hostPK(req.Key), SK: hostSK, VirtualShard: req.ShardFor(0, false, false)}
	}
	next := cur.successor()
	next.VirtualShard = req.ShardFor(cur.VirtualShard, true, cur.idle())
	plan := hostqueue.PlanAppend(cur.pending(), req)
	var evicted []hostqueue.Entry
	var dead []string // chunk sort keys emptied by eviction
	if plan.FromHead > 0 {
		var err error
		if evicted, dead, err = op.s.popHead(ctx, next, plan.FromHead, nil); err != nil {
			return nil, err
		}
	}
	evicted = append(evicted, plan.Dropped...)
	// Reported before the write that evicts them: a failure writes nothing.
	if err := op.reported.Report(ctx, req, evicted); err != nil {
		return nil, err
	}
	next.Tail = append(append([]entryItem(nil), next.Tail...), toEntryItems(plan.Queue)...)
	var rc *refreshChange
	refused, stopped := 0, []string(nil)
	if len(req.Refreshes) > 0 {
		before, err := op.s.view(ctx, cur, nil, true)
		if err != nil {
			return nil, &retryableError{err}
		}
		rc = &refreshChange{before: before, after: before.clone()}
		refused, stopped = appendRefreshes(next.PK, req, rc.after)
		next.applyRefreshes(rc)
	}
	due := next.workDue(req.Due.UnixMilli())
	switch {
	case rc != nil && next.hasEntry() && next.RefreshCount > 0 && next.ListedDue > next.RefreshDue:
		// A refresh due before the host's entry (a stop, a first
		// refresh before its back-off ends): a move, as a release makes.
		next.Listed, next.ListedDue = "", 0
		due = next.RefreshDue
	case cur.pending() == 0 && next.pending() > 0 && next.hasEntry() && next.ListedDue > req.Due.UnixMilli():
		// Due only by a later refresh: the first plain URLs make it due
		// now, not when that refresh is.
		next.Listed, next.ListedDue = "", 0
		due = req.Due.UnixMilli()
	}
	// The entry comes before the chunks: a failed bucket add then leaves
	// no chunk behind, and a stale bucket entry costs nothing.
	sk, err := op.entry(ctx, cur, next, due)
	if err != nil {
		return nil, err
	}
	var spilled []string
	if entriesSize(next.Tail) > inlineBudget {
		var err error
		if spilled, err = op.s.spill(ctx, next); err != nil {
			return nil, &retryableError{err}
		}
	}
	activated := next.activate(time.UnixMilli(due), sk)
	appended := plan.Result(len(evicted), next.pending(), activated)
	appended.Shard = next.VirtualShard
	appended.RefreshRefused, appended.Stopped = refused, stopped
	return &hostWrite{next: next, prev: cur.Version, spilled: spilled, dead: dead, appended: appended, refresh: rc}, nil
}

// entry returns the due-index item to name the host in when next needs an
// entry: its batch's list, which is its entry only on the version it was
// listed at (the check settles a list by the host's version, duelist.go,
// so once that version has passed no write may join the list any more),
// or else a bucket, added to now (before the host write). due is when the
// host's work is due (ms): a list names its hosts due at the batch's time,
// so a host due later (only refreshes) goes into the bucket of its time.
func (op *appendOp) entry(ctx context.Context, cur, next *hostItem, due int64) (string, error) {
	if !next.needsEntry() {
		return "", nil
	}
	if op.list.sk != "" && cur.Version == op.list.version && due <= op.req.Due.UnixMilli() {
		return op.list.sk, nil
	}
	sk, err := op.s.addToBucket(ctx, op.req.Key, next.VirtualShard, cur.Version, due)
	if err != nil {
		return "", &retryableError{err}
	}
	return sk, nil
}

// finishAppend completes an append whose write w landed: the chunks its
// eviction emptied and those of the call's other writes are nobody's now.
func (s *Store) finishAppend(w *hostWrite, others []*hostWrite) hostqueue.AppendResult {
	s.deleteChunksQuietly(w.next.PK, w.dead)
	s.dropWrites(w.next.PK, others)
	return w.appended
}

// Load implements hostqueue.Queues.
func (s *Store) Load(ctx context.Context, key string, want int) (*hostqueue.Host, error) {
	it, err := s.getHost(ctx, hostPK(key))
	if err != nil {
		return nil, err
	}
	if it == nil {
		return nil, fmt.Errorf("load %s: %w", key, hostqueue.ErrNotFound)
	}
	return s.toHost(ctx, key, it, want)
}

// Commit implements hostqueue.Queues. Its attempts are strict (see
// attempts): a commit of ours that landed after all is not applied again
// on top of itself, where a second Release would move a due time an
// ingest has set meanwhile.
func (s *Store) Commit(ctx context.Context, key string, c hostqueue.Commit) (*hostqueue.Host, error) {
	robots, err := s.commitRobots(ctx, key, c.Robots)
	if err != nil {
		return nil, err
	}
	// A host write's transaction holds at most refreshGroup refresh
	// changes: those beyond go first, in writes of their own.
	for len(c.Refreshed)+len(c.RefreshEnded) > refreshGroup {
		var part hostqueue.Commit
		if n := min(len(c.Refreshed), refreshGroup); n > 0 {
			part.Refreshed, c.Refreshed = c.Refreshed[:n], c.Refreshed[n:]
		} else {
			part.RefreshEnded, c.RefreshEnded = c.RefreshEnded[:refreshGroup], c.RefreshEnded[refreshGroup:]
		}
		op := &commitOp{s: s, key: key, c: part, refreshOnly: true}
		if _, _, err := s.writeHost(ctx, key, "commit "+key, true, op.write); err != nil {
			return nil, err
		}
	}
	op := &commitOp{s: s, key: key, c: c, done: make(map[string]bool, len(c.Done)), robots: robots}
	for _, id := range c.Done {
		op.done[id] = true
	}
	w, others, err := s.writeHost(ctx, key, "commit "+key, true, op.write)
	if err != nil {
		return nil, err
	}
	return s.finishCommit(ctx, key, w, others, c.Want)
}

// commitOp is one Commit: what its attempts share.
type commitOp struct {
	s      *Store
	key    string
	c      hostqueue.Commit
	done   map[string]bool
	robots map[string]inlineRobots // c.Robots in the host item's form
	// refreshOnly marks a write of refresh changes alone, ahead of the
	// commit's own (Commit splits those a transaction cannot hold).
	refreshOnly bool
}

// write builds an attempt's write on cur, the host item as read: take the
// done entries off the head, record the politeness state, release the
// host if asked, keep the robots.txt answers.
func (op *commitOp) write(ctx context.Context, cur *hostItem) (*hostWrite, error) {
	if cur == nil {
		return nil, fmt.Errorf("commit %s: %w", op.key, hostqueue.ErrNotFound)
	}
	next := cur.successor()
	var rc *refreshChange
	if urls := refreshURLs(op.c); len(urls) > 0 {
		before, err := op.s.view(ctx, cur, urls, false)
		if err != nil {
			return nil, &retryableError{err}
		}
		rc = &refreshChange{before: before, after: before.clone()}
		commitRefreshes(next.PK, op.c, rc.after)
		next.applyRefreshes(rc)
	}
	if op.refreshOnly {
		return &hostWrite{next: next, prev: cur.Version, refresh: rc}, nil
	}
	_, dead, err := op.s.popHead(ctx, next, -1, op.done)
	if err != nil {
		return nil, err
	}
	next.recordProgress(op.c, op.done)
	due := op.s.now()
	if op.c.Release {
		next.release(op.c, op.s.now)
		due = op.c.NextDue
		if next.pending() == 0 && next.RefreshCount > 0 && next.RefreshDue > due.UnixMilli() {
			// Only refreshes wait: the host leaves the due index until
			// the earliest (no check reads or writes it before), not
			// before its politeness allows.
			due = time.UnixMilli(next.RefreshDue)
		}
	}
	if next.needsEntry() {
		// A move: into the bucket of its due time, before the commit.
		sk, err := op.s.addToBucket(ctx, op.key, next.VirtualShard, cur.Version, due.UnixMilli())
		if err != nil {
			return nil, &retryableError{err}
		}
		next.activate(due, sk)
	}
	next.mergeRobots(op.robots)
	collect := op.c.Release && next.pending() == 0 && next.SpilledSinceEmpty
	if collect {
		next.SpilledSinceEmpty = false
	}
	return &hostWrite{next: next, prev: cur.Version, dead: dead, collect: collect, refresh: rc}, nil
}

// finishCommit completes a commit whose write w landed: the chunks it
// consumed are nobody's now, and with the queue drained any orphans can go.
func (s *Store) finishCommit(ctx context.Context, key string, w *hostWrite, others []*hostWrite, want int) (*hostqueue.Host, error) {
	s.deleteChunksQuietly(w.next.PK, w.dead)
	s.dropWrites(w.next.PK, others)
	if w.collect {
		s.collectOrphans(w.next.PK)
	}
	return s.toHost(ctx, key, w.next, want)
}

// writeHost is the retry loop of Append and Commit on the host item of
// key. Each attempt reads the item (attempts.next: after the first, once
// a back-off has passed, judging the call's earlier writes against what
// it reads), has build make the write from it and writes it under the
// version condition. It returns the write that landed, and the call's
// other writes, whose chunks the caller drops once it has finished; or
// the error that ended the call. An error of build ends the call too,
// unless it is a *retryableError, which uses up one of the store's own
// retries as a failed write does.
func (s *Store) writeHost(ctx context.Context, key, what string, strict bool, build func(context.Context, *hostItem) (*hostWrite, error)) (*hostWrite, []*hostWrite, error) {
	return s.writeHostFrom(ctx, key, what, strict, nil, build)
}

// writeHostFrom is writeHost whose first attempt starts from pre, when
// set: the host item as the caller read it.
func (s *Store) writeHostFrom(ctx context.Context, key, what string, strict bool, pre *preread, build func(context.Context, *hostItem) (*hostWrite, error)) (*hostWrite, []*hostWrite, error) {
	at := s.attempts(hostPK(key), what, strict)
	at.pre = pre
	defer at.sweep()
	for {
		cur, w, err := at.next(ctx)
		if err != nil {
			return nil, nil, err
		}
		if w != nil {
			return w, at.inflight, nil // an earlier write of the call landed
		}
		if at.n > 1 && s.OnRetry != nil {
			s.OnRetry()
		}
		w, err = build(ctx, cur)
		var retry *retryableError
		if errors.As(err, &retry) {
			at.failed(retry.err)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if err := s.putHostWrite(ctx, w); err != nil {
			at.answered(w, err)
			continue
		}
		s.saw(w.next)
		s.advanceView(w)
		return w, at.inflight, nil
	}
}

// retryableError is an attempt that failed before its host write (a chunk
// write), which the next attempt may get past.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// orphanAge is how old an unreferenced chunk must be before it is deleted:
// far longer than any append takes between writing a chunk and the host
// item that references it, so a chunk of a write in progress is never
// taken for an orphan.
const orphanAge = time.Hour

// collectOrphans deletes the chunk items of a host whose queue has just
// become empty: none is referenced any more, so any left is an orphan of a
// crashed or lost write (or a failed best-effort delete). Young chunks are
// left alone (they may belong to an append in progress) and are collected
// at a later drain. Best effort: a failure leaves items, never a loss.
func (s *Store) collectOrphans(pk string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:              &s.table,
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :c)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: pk},
			":c":  &types.AttributeValueMemberS{Value: chunkPrefix},
		},
		ProjectionExpression: aws.String("sk, t"),
	})
	if err != nil {
		return
	}
	cutoff := s.now().Add(-orphanAge).UnixMilli()
	var old []string
	for _, it := range out.Items {
		var c chunkItem
		if attributevalue.UnmarshalMap(it, &c) == nil && c.WrittenAt < cutoff {
			old = append(old, c.SK)
		}
	}
	_ = s.deleteChunks(ctx, pk, old)
}

// AcquireShard implements hostqueue.Leases.
//
// A run waiting for a shard another run holds asks again and again (a
// scheduled run while a woken one finishes, a successor at the minute): a
// failed conditional write is billed like a write, so once an attempt has
// failed, the next ones read the lease first (a fifth of the price) and
// write only when it is free, expired or theirs.
func (s *Store) AcquireShard(ctx context.Context, vshard int, owner string, until, now time.Time) (bool, error) {
	if _, waiting := s.contended.Load(vshard); waiting {
		cur, err := s.readLease(ctx, vshard)
		if err != nil {
			return false, err
		}
		if cur != nil && cur.Owner != owner && cur.Until >= now.UnixMilli() {
			s.dropHold(vshard, owner)
			return false, nil
		}
	}
	nonce := newNonce()
	item, err := attributevalue.MarshalMap(leaseItem{PK: shardPK(vshard), SK: leaseSK, Owner: owner, Until: until.UnixMilli(), Nonce: nonce})
	if err != nil {
		return false, fmt.Errorf("encode lease of shard %d: %w", vshard, err)
	}
	out, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           &s.table,
		Item:                item,
		ReturnValues:        types.ReturnValueAllOld, // free: tells a takeover
		ConditionExpression: aws.String("attribute_not_exists(pk) OR u < :now OR o = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": &types.AttributeValueMemberN{Value: fmt.Sprint(now.UnixMilli())},
			":o":   &types.AttributeValueMemberS{Value: owner},
		},
	})
	if isConditionFailed(err) {
		// Another run's live lease. Never our own write sent again by the
		// SDK after its answer was lost: that retry passes `o = :o`.
		s.contended.Store(vshard, struct{}{})
		s.dropHold(vshard, owner)
		return false, nil
	}
	if err != nil {
		// The lease may have landed all the same. If it did, this run
		// holds it, and saying otherwise would leave the shard to a lease
		// nobody works under until it runs out.
		sctx, cancel := s.settling(ctx)
		cur, rerr := s.readLease(sctx, vshard)
		cancel()
		if rerr != nil {
			return false, fmt.Errorf("lease shard %d: %w: %w; reading it back: %w", vshard, ErrOutcomeUnknown, err, rerr)
		}
		if cur == nil || cur.Nonce != nonce {
			return false, fmt.Errorf("lease shard %d: %w", vshard, err)
		}
	}
	s.contended.Delete(vshard)
	var prev leaseItem
	if err == nil && out != nil {
		_ = attributevalue.UnmarshalMap(out.Attributes, &prev)
	}
	// Still the holder only when the lease item was this owner's all
	// along (renewed, or expired with nobody taking it meanwhile).
	s.hold(vshard, owner, until, prev.Owner == owner)
	if prev.Owner != "" && prev.Owner != owner && s.OnTakeover != nil {
		// A released lease is deleted: one still there under another
		// owner had expired (its run died, overran or kept it).
		s.OnTakeover()
	}
	return true, nil
}

// readLease reads a shard's lease item, strongly consistent (nil: none).
func (s *Store) readLease(ctx context.Context, vshard int) (*leaseItem, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: itemKey(shardPK(vshard), leaseSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("read lease of shard %d: %w", vshard, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	var cur leaseItem
	if err := attributevalue.UnmarshalMap(out.Item, &cur); err != nil {
		return nil, fmt.Errorf("decode lease of shard %d: %w", vshard, err)
	}
	return &cur, nil
}

// ReleaseShard implements hostqueue.Leases.
func (s *Store) ReleaseShard(ctx context.Context, vshard int, owner string) error {
	s.dropHold(vshard, owner)
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       itemKey(shardPK(vshard), leaseSK),
		ConditionExpression:       aws.String("o = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: owner}},
	})
	if err == nil || isConditionFailed(err) {
		// A failed condition: the lease is another run's, or gone. Gone
		// also when our delete applied, its answer was lost and the SDK
		// sent it again: released either way.
		return nil
	}
	// An error: the delete may have applied all the same.
	sctx, cancel := s.settling(ctx)
	defer cancel()
	if cur, rerr := s.readLease(sctx, vshard); rerr == nil && (cur == nil || cur.Owner != owner) {
		return nil
	}
	return fmt.Errorf("release shard %d: %w", vshard, err)
}

// popHead removes entries from the head of next's queue: n of them (n >= 0),
// or, with n < 0, as long as the head entry's ID is in done. It returns the
// removed entries and the sort keys of chunks that became empty.
func (s *Store) popHead(ctx context.Context, next *hostItem, n int, done map[string]bool) ([]hostqueue.Entry, []string, error) {
	var popped []entryItem
	var dead []string
	take := func(e entryItem) bool {
		if n >= 0 {
			return len(popped) < n
		}
		return done[e.ID]
	}
	chunks := append([]chunkRef(nil), next.Chunks...)
	co := next.FirstChunkTaken
	for len(chunks) > 0 {
		entries, err := s.chunk(ctx, next.PK, chunks[0].ID)
		if err != nil {
			return nil, nil, err
		}
		if entries == nil {
			// A referenced chunk is deleted only after it was fully consumed
			// (see Commit), so a missing one has nothing left to give.
			dead = append(dead, chunkPrefix+chunks[0].ID)
			chunks, co = chunks[1:], 0
			continue
		}
		for co < len(entries) && take(entries[co]) {
			popped = append(popped, entries[co])
			co++
		}
		if co < len(entries) {
			break
		}
		dead = append(dead, chunkPrefix+chunks[0].ID)
		chunks, co = chunks[1:], 0
	}
	q := next.Tail
	if len(chunks) == 0 {
		i := 0
		for i < len(q) && take(q[i]) {
			popped = append(popped, q[i])
			i++
		}
		q = q[i:]
	}
	next.Chunks, next.FirstChunkTaken, next.Tail = chunks, co, q
	if len(next.Chunks) == 0 {
		next.Chunks, next.FirstChunkTaken = nil, 0
	}
	return toEntries(popped), dead, nil
}

// spill moves the inline tail into new chunks, written before the host item
// references them, under the nonce of the host write to come.
func (s *Store) spill(ctx context.Context, next *hostItem) ([]string, error) {
	var written []string
	q := next.Tail
	for len(q) > 0 {
		n, size := 0, 0
		for n < len(q) && (n == 0 || size+entrySize(q[n]) <= maxChunkBytes) {
			size += entrySize(q[n])
			n++
		}
		id, err := s.putChunk(ctx, next.PK, q[:n], next.Nonces[0])
		if err != nil {
			// Nothing references them: the host item is written after.
			s.deleteChunksQuietly(next.PK, written)
			return nil, fmt.Errorf("write chunk of %d urls for %s: %w", n, next.PK, err)
		}
		written = append(written, chunkPrefix+id)
		next.Chunks = append(append([]chunkRef(nil), next.Chunks...), chunkRef{ID: id, Count: n})
		q = q[n:]
	}
	next.Tail = nil
	next.SpilledSinceEmpty = true
	return written, nil
}

// maxChunkIDDraws bounds the ids tried for one chunk; two taken in a row
// among 2^96 means something other than chance.
const maxChunkIDDraws = 3

// putChunk writes q as a new chunk item and returns its id. The chunk is
// written only where no item is (its id is random): a failed condition,
// or an error, may mean it is there all the same, written by this very
// request before its answer was lost (the SDK's retry then fails the
// condition), so the item is read to tell that from another append's
// chunk, which must never be overwritten.
func (s *Store) putChunk(ctx context.Context, pk string, q []entryItem, nonce string) (string, error) {
	for draw := 1; ; draw++ {
		id := newChunkID()
		item, err := attributevalue.MarshalMap(chunkItem{PK: pk, SK: chunkPrefix + id, Entries: q, WrittenAt: s.now().UnixMilli(), Nonce: nonce})
		if err != nil {
			return "", fmt.Errorf("encode chunk: %w", err)
		}
		_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: &s.table, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		if err == nil {
			s.cacheChunk(pk, id, q)
			return id, nil
		}
		sctx, cancel := s.settling(ctx)
		exists, owner, rerr := s.chunkOwner(sctx, pk, id)
		cancel()
		switch {
		case rerr != nil:
			// Not deleted by the caller either: it may be another's.
			return "", fmt.Errorf("chunk %s: %w; reading it back: %w", id, err, rerr)
		case exists && owner == nonce:
			s.cacheChunk(pk, id, q)
			return id, nil
		case !exists && !isConditionFailed(err):
			return "", err
		case draw >= maxChunkIDDraws:
			return "", fmt.Errorf("chunk id %s taken by another write (%d draws): %w", id, draw, err)
		}
	}
}

// chunkOwner reads whether a chunk item exists and the nonce of the write
// that made it.
func (s *Store) chunkOwner(ctx context.Context, pk, id string) (bool, string, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: itemKey(pk, chunkPrefix+id), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("pk, n"),
	})
	if err != nil {
		return false, "", err
	}
	if len(out.Item) == 0 {
		return false, "", nil
	}
	n, _ := out.Item["n"].(*types.AttributeValueMemberS)
	if n == nil {
		return true, "", nil
	}
	return true, n.Value, nil
}

func (s *Store) toHost(ctx context.Context, key string, it *hostItem, want int) (*hostqueue.Host, error) {
	refreshes, err := s.headRefreshes(ctx, it, want)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", key, err)
	}
	h := &hostqueue.Host{
		Key:          key,
		VirtualShard: it.VirtualShard,
		Refreshes:    refreshes,
		Refreshing:   it.RefreshCount,
		Pending:      it.pending(),
		Attempts:     it.Attempts,
		State:        politeness.State{Errors: it.Errors, LastError: it.LastError},
	}
	if it.FailingSince != 0 {
		h.FailingSince = time.UnixMilli(it.FailingSince)
	}
	if due := it.dueAt(); due != 0 {
		h.Due = time.UnixMilli(due)
	}
	if it.LastFetch != 0 {
		h.LastFetch = time.UnixMilli(it.LastFetch)
	}
	if it.PauseUntil != 0 {
		h.PauseUntil = time.UnixMilli(it.PauseUntil)
	}
	h.RateDelay, h.LastTook = time.Duration(it.RateDelay)*time.Millisecond, time.Duration(it.LastTook)*time.Millisecond
	if it.RateSince != 0 {
		h.RateSince = time.UnixMilli(it.RateSince)
	}
	if err := politeness.DecodeOrigins(it.Origins, &h.State); err != nil {
		return nil, fmt.Errorf("host %s: %w", key, err)
	}
	for origin, ir := range it.Robots {
		if ir.StoredApart {
			if h.RobotsItems == nil {
				h.RobotsItems = map[string]bool{}
			}
			h.RobotsItems[origin] = true
			continue
		}
		if r, err := ir.robots(); err == nil {
			if h.Robots == nil {
				h.Robots = map[string]hostqueue.Robots{}
			}
			h.Robots[origin] = r
		}
	}
	co := it.FirstChunkTaken
	for _, c := range it.Chunks {
		if len(h.Head) >= want {
			break
		}
		entries, err := s.chunk(ctx, it.PK, c.ID)
		if err != nil {
			return nil, err
		}
		if co < len(entries) {
			h.Head = append(h.Head, toEntries(entries[co:min(len(entries), co+want-len(h.Head))])...)
		}
		co = 0
	}
	if len(h.Head) < want {
		h.Head = append(h.Head, toEntries(it.Tail[:min(len(it.Tail), want-len(h.Head))])...)
	}
	return h, nil
}

func (s *Store) getHost(ctx context.Context, pk string) (*hostItem, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            itemKey(pk, hostSK),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("read host %s: %w", pk, err)
	}
	if len(out.Item) == 0 {
		s.sawAbsent(pk)
		return nil, nil
	}
	var it hostItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return nil, fmt.Errorf("decode host %s: %w", pk, err)
	}
	s.saw(&it)
	return &it, nil
}

// putHost writes the host item if its version is still prev (0: if there
// is none yet). A failed condition comes back as the SDK's error (see
// isConditionFailed); an error before sending as an *encodeError.
func (s *Store) putHost(ctx context.Context, it *hostItem, prev int64) error {
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return &encodeError{fmt.Errorf("encode host %s: %w", it.PK, err)}
	}
	in := &dynamodb.PutItemInput{TableName: &s.table, Item: item}
	if prev > 0 {
		in.ConditionExpression = aws.String("v = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: fmt.Sprint(prev)}}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	}
	if _, err := s.client.PutItem(ctx, in); err != nil {
		return fmt.Errorf("write host %s: %w", it.PK, err)
	}
	return nil
}

// putHostWrite writes w's host item (see putHost) and, in one transaction
// with it, its changes to refresh items. The transaction's token is the
// write's nonce: the SDK's retry of a transaction that landed succeeds
// without applying it again.
func (s *Store) putHostWrite(ctx context.Context, w *hostWrite) error {
	if !w.refresh.changed() {
		return s.putHost(ctx, w.next, w.prev)
	}
	ops, err := w.refresh.ops(s.table)
	if err != nil {
		return &encodeError{err}
	}
	item, err := attributevalue.MarshalMap(w.next)
	if err != nil {
		return &encodeError{fmt.Errorf("encode host %s: %w", w.next.PK, err)}
	}
	put := &types.Put{TableName: &s.table, Item: item}
	if w.prev > 0 {
		put.ConditionExpression = aws.String("v = :v")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: fmt.Sprint(w.prev)}}
	} else {
		put.ConditionExpression = aws.String("attribute_not_exists(pk)")
	}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      append([]types.TransactWriteItem{{Put: put}}, ops...),
		ClientRequestToken: aws.String(w.nonce()),
	})
	if err != nil {
		return fmt.Errorf("write host %s with %d refresh changes: %w", w.next.PK, len(ops), err)
	}
	return nil
}

// advanceView keeps the store's view of the host's refresh items after w
// landed: w's own, or the one it had, unchanged by a write that changed
// none.
func (s *Store) advanceView(w *hostWrite) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.refresh != nil {
		v := w.refresh.after
		v.version = w.next.Version
		s.viewItems += len(v.byURL) - len(s.views[w.next.PK].items())
		s.views[w.next.PK] = v
		return
	}
	if v := s.views[w.next.PK]; v != nil && v.version == w.prev {
		v.version = w.next.Version
	}
}

// chunk returns a chunk's entries (nil when it does not exist). Chunks never
// change once written, so they are cached.
func (s *Store) chunk(ctx context.Context, pk, id string) ([]entryItem, error) {
	ck := pk + "\x00" + id
	s.mu.Lock()
	c, ok := s.chunks[ck]
	s.mu.Unlock()
	if ok {
		return c.q, nil
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            itemKey(pk, chunkPrefix+id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("read chunk %s of %s: %w", id, pk, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	var it chunkItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return nil, fmt.Errorf("decode chunk %s of %s: %w", id, pk, err)
	}
	s.cacheChunk(pk, id, it.Entries)
	return it.Entries, nil
}

// The chunk cache is bounded in items and in bytes (a chunk holds up to
// maxChunkBytes, so the item bound alone would allow 256 MB, a Lambda's
// whole memory); it is simply cleared when full, since a miss costs one
// read.
const (
	maxCachedChunks = 4096
	maxCachedBytes  = 16 << 20
)

type cachedChunk struct {
	q    []entryItem
	size int // estimated, as entriesSize counts
}

func (s *Store) cacheChunk(pk, id string, q []entryItem) {
	size := entriesSize(q)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.chunks) >= maxCachedChunks || s.cachedBytes+size > maxCachedBytes {
		clear(s.chunks)
		s.cachedBytes = 0
	}
	ck := pk + "\x00" + id
	s.cachedBytes += size - s.chunks[ck].size
	s.chunks[ck] = cachedChunk{q: q, size: size}
}

func (s *Store) uncacheChunk(pk, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ck := pk + "\x00" + id
	s.cachedBytes -= s.chunks[ck].size
	delete(s.chunks, ck)
}

// deleteChunks deletes chunk items, going on past a failure (an item left
// over is an orphan, collected at a drain).
func (s *Store) deleteChunks(ctx context.Context, pk string, sks []string) error {
	var errs []error
	for _, sk := range sks {
		s.uncacheChunk(pk, strings.TrimPrefix(sk, chunkPrefix))
		if _, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: itemKey(pk, sk)}); err != nil {
			errs = append(errs, fmt.Errorf("delete chunk %s of %s: %w", sk, pk, err))
		}
	}
	return errors.Join(errs...)
}

// deleteChunksQuietly removes chunks nobody references and nobody ever
// will (see the top of this file): those written for a host write that is
// known not to land, and those a write that landed stopped referencing.
// It is best effort: a failure leaves an unreferenced item, never a loss.
func (s *Store) deleteChunksQuietly(pk string, sks []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.deleteChunks(ctx, pk, sks)
}

func itemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk},
		"sk": &types.AttributeValueMemberS{Value: sk},
	}
}

// isConditionFailed tells whether err is a failed condition: of a write,
// or of a transaction (or its conflict with a write in progress on one of
// its items), which another attempt may get past as well.
func isConditionFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return true
	}
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if c := aws.ToString(r.Code); c == "ConditionalCheckFailed" || c == "TransactionConflict" {
				return true
			}
		}
	}
	return false
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newChunkID returns 96 random bits: chunk ids never collide in practice,
// and putChunk never overwrites one that does.
func newChunkID() string { return randomID(12) }

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return idEncoding.EncodeToString(b)
}

// maxLastError bounds the failure text kept in a host item.
const maxLastError = 512

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
