// Package dynamo keeps host queues in DynamoDB (see layout.go for the item
// shapes and why). Writes are read-modify-write under a version condition,
// retried on conflict, so concurrent ingests and checks never lose an entry.
package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/hostqueue"
)

// Client is the part of *dynamodb.Client the store uses.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
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

	mu     sync.Mutex
	chunks map[string][]hostqueue.Entry // immutable chunks by pk+sk

	// contended holds the virtual shards whose last acquisition found
	// another holder; see AcquireShard.
	contended sync.Map // int -> struct{}
}

// New returns a store on table; now is the clock used for TTLs.
func New(client Client, table string, now func() time.Time) *Store {
	return &Store{client: client, table: table, now: now, chunks: map[string][]hostqueue.Entry{}}
}

// Append implements hostqueue.Store.
func (s *Store) Append(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
	pk := hostPK(req.Key)
	reported := map[string]bool{}
	for attempt := 0; ; attempt++ {
		if attempt >= maxAttempts {
			return hostqueue.AppendResult{}, fmt.Errorf("append to %s: %w after %d attempts", req.Key, hostqueue.ErrConflict, attempt)
		}
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return hostqueue.AppendResult{}, err
			}
		}
		cur, err := s.getHost(ctx, pk)
		if err != nil {
			return hostqueue.AppendResult{}, err
		}
		exists := cur != nil
		if !exists {
			cur = &hostItem{PK: pk, SK: hostSK, VS: hostqueue.VirtualShard(req.Key)}
		}
		next := *cur
		next.V = cur.V + 1
		incoming := req.Entries
		fromPending, fromIncoming := hostqueue.Evict(cur.pending(), len(incoming), req.Limit)

		var evicted []hostqueue.Entry
		var dead []string // chunk sort keys emptied by eviction
		if fromPending > 0 {
			var popped []hostqueue.Entry
			popped, dead, err = s.popHead(ctx, &next, fromPending, nil)
			if err != nil {
				return hostqueue.AppendResult{}, err
			}
			evicted = append(evicted, popped...)
		}
		evicted = append(evicted, incoming[:fromIncoming]...)
		incoming = incoming[fromIncoming:]
		if fresh := unreported(evicted, reported); len(fresh) > 0 && req.OnEvict != nil {
			if err := req.OnEvict(ctx, fresh); err != nil {
				return hostqueue.AppendResult{}, fmt.Errorf("report %d evicted urls of %s: %w", len(fresh), req.Key, err)
			}
			for _, e := range fresh {
				reported[e.ID] = true
			}
		}

		next.Q = append(append([]hostqueue.Entry(nil), next.Q...), incoming...)
		var spilled []string
		if entriesSize(next.Q) > inlineBudget {
			spilled, err = s.spill(ctx, &next)
			if err != nil {
				return hostqueue.AppendResult{}, err
			}
		}
		activated := false
		if next.pending() > 0 {
			next.TTL = 0
			if next.Due == 0 {
				next.Due = req.Due.UnixMilli()
				activated = true
			}
		}
		ok, err := s.putHost(ctx, &next, exists, cur.V)
		if err != nil {
			s.deleteChunksQuietly(pk, spilled)
			return hostqueue.AppendResult{}, err
		}
		if !ok {
			// Lost the race: our spilled chunks are referenced by nobody,
			// while the chunks we would have evicted still are.
			s.deleteChunksQuietly(pk, spilled)
			continue
		}
		s.deleteChunksQuietly(pk, dead)
		return hostqueue.AppendResult{Appended: len(incoming), Evicted: len(evicted), Pending: next.pending(), Activated: activated}, nil
	}
}

// Load implements hostqueue.Store.
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

// Commit implements hostqueue.Store.
func (s *Store) Commit(ctx context.Context, key string, c hostqueue.Commit) (*hostqueue.Host, error) {
	pk := hostPK(key)
	done := make(map[string]bool, len(c.Done))
	for _, id := range c.Done {
		done[id] = true
	}
	// Small robots.txt answers ride in the host item (applied at every
	// attempt below); large ones get an item of their own, written once
	// here rather than again on every lost race.
	small := map[string]inlineRobots{}
	for origin, r := range c.Robots {
		if ir, ok := inline(r); ok {
			small[origin] = ir
		} else if err := s.PutRobots(ctx, key, origin, r); err != nil {
			return nil, err
		} else {
			small[origin] = inlineRobots{X: true, T: r.FetchedAt.UnixMilli()}
		}
	}
	for attempt := 0; ; attempt++ {
		if attempt >= maxAttempts {
			return nil, fmt.Errorf("commit %s: %w after %d attempts", key, hostqueue.ErrConflict, attempt)
		}
		if attempt > 0 {
			if err := backoff(ctx, attempt); err != nil {
				return nil, err
			}
		}
		cur, err := s.getHost(ctx, pk)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, fmt.Errorf("commit %s: %w", key, hostqueue.ErrNotFound)
		}
		next := *cur
		next.V = cur.V + 1
		_, dead, err := s.popHead(ctx, &next, -1, done)
		if err != nil {
			return nil, err
		}
		if lf := c.LastFetch.UnixMilli(); !c.LastFetch.IsZero() && lf > next.LF {
			next.LF = lf
		}
		next.PU = 0
		if !c.PauseUntil.IsZero() {
			next.PU = c.PauseUntil.UnixMilli()
		}
		next.ER = c.Errors
		next.FS, next.LE = 0, c.LastError
		if !c.FailingSince.IsZero() {
			next.FS = c.FailingSince.UnixMilli()
		}
		next.AT = nil
		for id, n := range c.Attempts {
			if !done[id] && n > 0 {
				if next.AT == nil {
					next.AT = map[string]int{}
				}
				next.AT[id] = n
			}
		}
		if c.Release {
			if next.pending() > 0 {
				// Continue leaves Due alone: the host is still due (it
				// was when the holder took it), and an unchanged index
				// key costs no index write.
				if !c.Continue || next.Due == 0 {
					next.Due = c.NextDue.UnixMilli()
				}
				next.TTL = 0
			} else {
				next.Due = 0
				next.AT = nil
				next.TTL = s.now().Add(c.IdleTTL).Unix()
			}
		}
		if len(small) > 0 {
			next.RB = maps.Clone(next.RB)
			if next.RB == nil {
				next.RB = map[string]inlineRobots{}
			}
			maps.Copy(next.RB, small)
		}
		collect := c.Release && next.pending() == 0 && next.HC
		if collect {
			next.HC = false
		}
		ok, err := s.putHost(ctx, &next, true, cur.V)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		s.deleteChunksQuietly(pk, dead)
		if collect {
			s.collectOrphans(pk)
		}
		return s.toHost(ctx, key, &next, c.Want)
	}
}

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
		if attributevalue.UnmarshalMap(it, &c) == nil && c.T < cutoff {
			old = append(old, c.SK)
		}
	}
	_ = s.deleteChunks(ctx, pk, old)
}

// DueHosts implements hostqueue.Store.
func (s *Store) DueHosts(ctx context.Context, vshard int, now time.Time, limit int) ([]string, error) {
	var keys []string
	var start map[string]types.AttributeValue
	for {
		out, err := s.client.Query(ctx, &dynamodb.QueryInput{
			TableName:              &s.table,
			IndexName:              aws.String(DueIndex),
			KeyConditionExpression: aws.String("vs = :v AND due <= :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":v":   &types.AttributeValueMemberN{Value: fmt.Sprint(vshard)},
				":now": &types.AttributeValueMemberN{Value: fmt.Sprint(now.UnixMilli())},
			},
			ExclusiveStartKey: start,
			Limit:             aws.Int32(int32(min(limit-len(keys), 1000))),
		})
		if err != nil {
			return nil, fmt.Errorf("query due hosts of shard %d: %w", vshard, err)
		}
		for _, it := range out.Items {
			pk, _ := it["pk"].(*types.AttributeValueMemberS)
			if pk == nil {
				continue
			}
			if key, ok := keyOfPK(pk.Value); ok {
				keys = append(keys, key)
			}
		}
		start = out.LastEvaluatedKey
		if len(start) == 0 || len(keys) >= limit {
			return keys, nil
		}
	}
}

// AcquireShard implements hostqueue.Store.
//
// A run waiting for a shard another run holds asks again and again (a
// scheduled run while a woken one finishes, a successor at the minute): a
// failed conditional write is billed like a write, so once an attempt has
// failed, the next ones read the lease first (a fifth of the price) and
// write only when it is free, expired or theirs.
func (s *Store) AcquireShard(ctx context.Context, vshard int, owner string, until, now time.Time) (bool, error) {
	if _, waiting := s.contended.Load(vshard); waiting {
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &s.table, Key: itemKey(shardPK(vshard), leaseSK), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return false, fmt.Errorf("read lease of shard %d: %w", vshard, err)
		}
		var cur leaseItem
		if out.Item != nil {
			if err := attributevalue.UnmarshalMap(out.Item, &cur); err != nil {
				return false, fmt.Errorf("decode lease of shard %d: %w", vshard, err)
			}
			if cur.Owner != owner && cur.Until >= now.UnixMilli() {
				return false, nil
			}
		}
	}
	item, err := attributevalue.MarshalMap(leaseItem{PK: shardPK(vshard), SK: leaseSK, Owner: owner, Until: until.UnixMilli()})
	if err != nil {
		return false, fmt.Errorf("encode lease of shard %d: %w", vshard, err)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           &s.table,
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(pk) OR u < :now OR o = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": &types.AttributeValueMemberN{Value: fmt.Sprint(now.UnixMilli())},
			":o":   &types.AttributeValueMemberS{Value: owner},
		},
	})
	if isConditionFailed(err) {
		s.contended.Store(vshard, struct{}{})
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lease shard %d: %w", vshard, err)
	}
	s.contended.Delete(vshard)
	return true, nil
}

// ReleaseShard implements hostqueue.Store.
func (s *Store) ReleaseShard(ctx context.Context, vshard int, owner string) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       itemKey(shardPK(vshard), leaseSK),
		ConditionExpression:       aws.String("o = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: owner}},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("release shard %d: %w", vshard, err)
	}
	return nil
}

// popHead removes entries from the head of next's queue: n of them (n >= 0),
// or, with n < 0, as long as the head entry's ID is in done. It returns the
// removed entries and the sort keys of chunks that became empty.
func (s *Store) popHead(ctx context.Context, next *hostItem, n int, done map[string]bool) ([]hostqueue.Entry, []string, error) {
	var popped []hostqueue.Entry
	var dead []string
	take := func(e hostqueue.Entry) bool {
		if n >= 0 {
			return len(popped) < n
		}
		return done[e.ID]
	}
	chunks := append([]chunkRef(nil), next.C...)
	co := next.CO
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
	q := next.Q
	if len(chunks) == 0 {
		i := 0
		for i < len(q) && take(q[i]) {
			popped = append(popped, q[i])
			i++
		}
		q = q[i:]
	}
	next.C, next.CO, next.Q = chunks, co, q
	if len(next.C) == 0 {
		next.C, next.CO = nil, 0
	}
	return popped, dead, nil
}

// spill moves the inline tail into new chunks, written before the host item
// references them.
func (s *Store) spill(ctx context.Context, next *hostItem) ([]string, error) {
	var written []string
	q := next.Q
	for len(q) > 0 {
		n, size := 0, 0
		for n < len(q) && (n == 0 || size+entrySize(q[n]) <= maxChunkBytes) {
			size += entrySize(q[n])
			n++
		}
		id := newChunkID()
		item, err := attributevalue.MarshalMap(chunkItem{PK: next.PK, SK: chunkPrefix + id, Q: q[:n], T: s.now().UnixMilli()})
		if err != nil {
			return written, fmt.Errorf("encode chunk of %s: %w", next.PK, err)
		}
		if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item}); err != nil {
			s.deleteChunksQuietly(next.PK, written)
			return nil, fmt.Errorf("write chunk of %d urls for %s: %w", n, next.PK, err)
		}
		s.cacheChunk(next.PK, id, q[:n])
		written = append(written, chunkPrefix+id)
		next.C = append(append([]chunkRef(nil), next.C...), chunkRef{ID: id, N: n})
		q = q[n:]
	}
	next.Q = nil
	next.HC = true
	return written, nil
}

func (s *Store) toHost(ctx context.Context, key string, it *hostItem, want int) (*hostqueue.Host, error) {
	h := &hostqueue.Host{
		Key:          key,
		VirtualShard: it.VS,
		Pending:      it.pending(),
		Errors:       it.ER,
		LastError:    it.LE,
		Attempts:     it.AT,
	}
	if it.FS != 0 {
		h.FailingSince = time.UnixMilli(it.FS)
	}
	if it.Due != 0 {
		h.Due = time.UnixMilli(it.Due)
	}
	if it.LF != 0 {
		h.LastFetch = time.UnixMilli(it.LF)
	}
	if it.PU != 0 {
		h.PauseUntil = time.UnixMilli(it.PU)
	}
	for origin, ir := range it.RB {
		if ir.X {
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
	co := it.CO
	for _, c := range it.C {
		if len(h.Head) >= want {
			break
		}
		entries, err := s.chunk(ctx, it.PK, c.ID)
		if err != nil {
			return nil, err
		}
		if co < len(entries) {
			h.Head = append(h.Head, entries[co:min(len(entries), co+want-len(h.Head))]...)
		}
		co = 0
	}
	if len(h.Head) < want {
		h.Head = append(h.Head, it.Q[:min(len(it.Q), want-len(h.Head))]...)
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
		return nil, nil
	}
	var it hostItem
	if err := attributevalue.UnmarshalMap(out.Item, &it); err != nil {
		return nil, fmt.Errorf("decode host %s: %w", pk, err)
	}
	return &it, nil
}

// putHost writes the host item if its version is still prev (or it still
// does not exist); false means another writer got there first.
func (s *Store) putHost(ctx context.Context, it *hostItem, exists bool, prev int64) (bool, error) {
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return false, fmt.Errorf("encode host %s: %w", it.PK, err)
	}
	in := &dynamodb.PutItemInput{TableName: &s.table, Item: item}
	if exists {
		in.ConditionExpression = aws.String("v = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: fmt.Sprint(prev)}}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	}
	_, err = s.client.PutItem(ctx, in)
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("write host %s: %w", it.PK, err)
	}
	return true, nil
}

// chunk returns a chunk's entries (nil when it does not exist). Chunks never
// change once written, so they are cached.
func (s *Store) chunk(ctx context.Context, pk, id string) ([]hostqueue.Entry, error) {
	ck := pk + "\x00" + id
	s.mu.Lock()
	e, ok := s.chunks[ck]
	s.mu.Unlock()
	if ok {
		return e, nil
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
	var c chunkItem
	if err := attributevalue.UnmarshalMap(out.Item, &c); err != nil {
		return nil, fmt.Errorf("decode chunk %s of %s: %w", id, pk, err)
	}
	s.cacheChunk(pk, id, c.Q)
	return c.Q, nil
}

// maxCachedChunks bounds the chunk cache; it is simply cleared when full,
// since a miss costs one read.
const maxCachedChunks = 4096

func (s *Store) cacheChunk(pk, id string, q []hostqueue.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.chunks) >= maxCachedChunks {
		clear(s.chunks)
	}
	s.chunks[pk+"\x00"+id] = q
}

func (s *Store) deleteChunks(ctx context.Context, pk string, sks []string) error {
	for _, sk := range sks {
		if _, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: itemKey(pk, sk)}); err != nil {
			return fmt.Errorf("delete chunk %s of %s: %w", sk, pk, err)
		}
		s.mu.Lock()
		delete(s.chunks, pk+"\x00"+strings.TrimPrefix(sk, chunkPrefix))
		s.mu.Unlock()
	}
	return nil
}

// deleteChunksQuietly removes chunks nobody references: those written by
// an attempt that lost the race, and those a successful write stopped
// referencing. Deleting them before that write lands would leave the
// winner of a race referencing a missing chunk, which every later reader
// takes for consumed (over-evicting, and overcounting Pending meanwhile).
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

func isConditionFailed(err error) bool {
	var cf *types.ConditionalCheckFailedException
	return errors.As(err, &cf)
}

func unreported(es []hostqueue.Entry, reported map[string]bool) []hostqueue.Entry {
	var out []hostqueue.Entry
	for _, e := range es {
		if !reported[e.ID] {
			out = append(out, e)
		}
	}
	return out
}

var chunkIDEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func newChunkID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return chunkIDEncoding.EncodeToString(b[:])
}

// backoff waits a jittered, growing while before a retried write, so
// contending writers spread out instead of colliding again.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(1<<min(attempt, 6)) * time.Millisecond
	d = d/2 + time.Duration(mrand.Int64N(int64(d)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
