package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/hostqueue"
)

// Due lists (see layout.go for why). An ingest batch reads every host it
// appends to (the read each append's first attempt makes anyway), then
// writes, for each virtual shard with at least listMin hosts that get work
// and have no index entry, one list item naming them with the version it
// read each at, and only then appends. The append joins the host to the
// list (Listed, ListedDue) only on that version: its write is conditioned
// on the version it read, so a host named by a list is either joined by a
// write at exactly listed version + 1, or never.
//
// That makes a list's end decidable from the hosts alone. The check,
// holding the shard's lease, reads the shard's lists with a consistent
// query (DueHosts) and each host named, from what the store saw of it last
// or with a read:
//
//   - at a version past the listed one and not joined to the list
//     (Listed differs): settled, for good. Its listing write landed and a
//     later write took it out (drained, or moved into the GSI), or it never
//     will land (its version has passed). Nothing joins it to the list
//     again: only an append on the listed version does.
//   - joined (Listed is the list): due, at the list's due time.
//   - still at the listed version (or no item): its append has not landed
//     yet (a batch in progress), or never will (a crash between the list
//     and the append). Not due, and the list stays. Once the list is older
//     than any ingest lives (listFenceAge), the check fences the host: a
//     conditional write that moves it past the listed version, after which
//     no append of that batch can join it.
//
// A list is deleted once every host it names is settled, conditional on the
// nonce it was read with. Its put carries no condition: the same key and
// the same content, so a put sent again after a lost answer (or landing
// late, even after the delete) changes nothing a reader relies on (a list
// back from the dead names settled hosts only, and is deleted again).
//
// A host whose append loses its version to another write is decided again
// on what the next attempt reads: with no entry any more (drained
// meanwhile), it goes into the GSI, as an Append's host does.

const (
	// listMin is the fewest hosts of a shard a list is written for: a list
	// costs two writes (its put and its delete), a GSI entry two a host.
	listMin = 3
	// maxListBytes bounds a list item, well under DynamoDB's 400 KB: a
	// shard's hosts beyond it go into further lists.
	maxListBytes = 200 << 10
	// listFenceAge is how old a list must be before the check fences the
	// hosts it names that never joined it: far longer than an ingest
	// invocation lives (60 s), so a batch in progress is left alone.
	listFenceAge = 10 * time.Minute
	// batchConcurrency bounds a batch's parallel reads and writes, as
	// hostqueue.Ingester.Concurrency does for single appends.
	batchConcurrency = 32
	// maxSeen bounds the hosts the store remembers (cleared when full: a
	// forgotten host costs a read).
	maxSeen = 1 << 16
)

// listItem is a due list: the hosts of one ingest batch and shard that it
// gave work and that had no entry.
type listItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	// Hosts are the queue keys named, Versions the version of each host
	// item when the batch read it (0: none yet).
	Hosts    []string `dynamodbav:"h"`
	Versions []int64  `dynamodbav:"hv"`
	// WrittenAt is when the batch wrote it (ms): fencing waits for age.
	WrittenAt int64  `dynamodbav:"t"`
	Nonce     string `dynamodbav:"n"`
}

// listing is the due list that names a host of a batch: its sort key and
// the host's version when the batch read it.
type listing struct {
	sk      string
	version int64
}

// preread is a host item as a batch read it (item nil: there is none).
type preread struct{ item *hostItem }

// hostSeen is what the store last saw of a host item: its version, the
// due list it had joined, and the epoch of its shard's lease then (-1: not
// held).
type hostSeen struct {
	version int64
	listed  string
	epoch   int
}

// shardHold is the store's lease on a shard: until when (ms), and an epoch
// that changes whenever the store may have stopped holding it.
type shardHold struct {
	until int64
	epoch int
}

// hold records a lease the store took or renewed until until; renewed: it
// held it without a break.
func (s *Store) hold(vshard int, until time.Time, renewed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[vshard]
	if !renewed || h.until < s.now().UnixMilli() {
		h.epoch++
	}
	h.until = until.UnixMilli()
	s.holds[vshard] = h
}

// dropHold records that the store no longer holds vshard's lease.
func (s *Store) dropHold(vshard int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[vshard]
	h.until = 0
	h.epoch++
	s.holds[vshard] = h
}

// epoch is vshard's lease epoch while the store holds it, else -1; with mu
// held.
func (s *Store) epoch(vshard int) int {
	h, ok := s.holds[vshard]
	if !ok || h.until < s.now().UnixMilli() {
		return -1
	}
	return h.epoch
}

func duePK(v int) string { return duePrefix + strconv.Itoa(v) }

// listSK is a list's sort key: its due time first, so a shard's lists sort
// by it and a query stops at now.
func listSK(due int64, batch string) string {
	return fmt.Sprintf("%s%013d#%s", listPrefix, due, batch)
}

// listDue is the due time (ms) a list's sort key holds.
func listDue(sk string) int64 {
	rest, _ := strings.CutPrefix(sk, listPrefix)
	ms, _, _ := strings.Cut(rest, "#")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return n
}

// saw records a host item the store read or wrote. Versions only grow, so
// an older sight (an eventually consistent read) never replaces a newer.
func (s *Store) saw(it *hostItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.seen[it.PK]; ok && cur.version > it.Version {
		return
	}
	if len(s.seen) >= maxSeen {
		clear(s.seen)
	}
	s.seen[it.PK] = hostSeen{version: it.Version, listed: it.Listed, epoch: s.epoch(it.VirtualShard)}
}

// sight is what the store last saw of key's host item, and whether it
// still stands for what the item holds (trusted): a host joined to a list
// leaves it only by a commit of its shard's lease holder, so a sight of it
// joined stands while the store has held the lease since (its own commits
// update it). A settled sight stands for good.
func (s *Store) sight(key string) (h hostSeen, ok, trusted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok = s.seen[hostPK(key)]
	return h, ok, ok && h.epoch >= 0 && h.epoch == s.epoch(hostqueue.VirtualShard(key))
}

// AppendBatch implements hostqueue.BatchAppender.
func (s *Store) AppendBatch(ctx context.Context, reqs []hostqueue.AppendRequest) []hostqueue.AppendOutcome {
	return s.AppendBatchUntil(ctx, reqs, time.Time{})
}

// AppendBatchUntil implements hostqueue.UntilBatchAppender: the batch's
// reads, its due lists, then its appends, no host's started after until
// (by the store's clock; zero: no bound).
func (s *Store) AppendBatchUntil(ctx context.Context, reqs []hostqueue.AppendRequest, until time.Time) []hostqueue.AppendOutcome {
	out := make([]hostqueue.AppendOutcome, len(reqs))
	late := func() bool { return !until.IsZero() && !s.now().Before(until) }
	pres := make([]*preread, len(reqs))
	parallel(len(reqs), func(i int) {
		if late() || ctx.Err() != nil {
			return
		}
		// A failed read leaves the append to read for itself.
		if it, err := s.getHost(ctx, hostPK(reqs[i].Key)); err == nil {
			pres[i] = &preread{item: it}
		}
	})
	lists := s.putLists(ctx, reqs, pres)
	parallel(len(reqs), func(i int) {
		if err := ctx.Err(); err != nil {
			out[i].Err = err
			return
		}
		if late() {
			out[i].Err = hostqueue.ErrNoTime
			return
		}
		out[i].Result, out[i].Err = s.appendHost(ctx, reqs[i], pres[i], lists[i])
	})
	return out
}

// putLists writes the due lists of a batch read as pres and returns each
// request's listing (zero: none names it). A list that fails to be written
// names no host: theirs go into the GSI. Written side by side, before any
// append.
func (s *Store) putLists(ctx context.Context, reqs []hostqueue.AppendRequest, pres []*preread) []listing {
	type group struct {
		vs  int
		due int64
	}
	groups := map[group][]int{}
	for i, r := range reqs {
		p := pres[i]
		if p == nil || len(r.Entries) == 0 || p.item != nil && (p.item.hasEntry() || p.item.pending() > 0) {
			continue
		}
		g := group{hostqueue.VirtualShard(r.Key), r.Due.UnixMilli()}
		groups[g] = append(groups[g], i)
	}
	out := make([]listing, len(reqs))
	batch := randomID(8)
	var lists []*listItem
	var members [][]int
	for g, idx := range groups {
		if len(idx) < listMin {
			continue
		}
		var cur *listItem
		size := 0
		for _, i := range idx {
			if cur == nil || size+len(reqs[i].Key)+16 > maxListBytes {
				cur = &listItem{PK: duePK(g.vs), SK: listSK(g.due, batch+strconv.Itoa(len(lists))), WrittenAt: s.now().UnixMilli(), Nonce: newNonce()}
				lists = append(lists, cur)
				members = append(members, nil)
				size = 0
			}
			var v int64
			if it := pres[i].item; it != nil {
				v = it.Version
			}
			cur.Hosts = append(cur.Hosts, reqs[i].Key)
			cur.Versions = append(cur.Versions, v)
			members[len(members)-1] = append(members[len(members)-1], i)
			size += len(reqs[i].Key) + 16
		}
	}
	parallel(len(lists), func(k int) {
		if s.putList(ctx, lists[k]) != nil {
			return
		}
		for j, i := range members[k] {
			out[i] = listing{sk: lists[k].SK, version: lists[k].Versions[j]}
		}
	})
	return out
}

// putList writes a list. Unconditional: sent again, it writes the same.
// An error may hide a put that landed; its hosts then never join it, and
// the check settles it by their versions.
func (s *Store) putList(ctx context.Context, l *listItem) error {
	item, err := attributevalue.MarshalMap(l)
	if err != nil {
		return fmt.Errorf("encode due list %s: %w", l.SK, err)
	}
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item}); err != nil {
		return fmt.Errorf("write due list %s of %s: %w", l.SK, l.PK, err)
	}
	return nil
}

// dueKey is a due host and when it is due (ms).
type dueKey struct {
	key string
	due int64
}

// listedDue returns up to limit hosts of vshard's due lists due at or
// before now, earliest first, deleting the lists whose hosts have all
// settled and fencing the hosts of old lists that never joined them.
func (s *Store) listedDue(ctx context.Context, vshard int, now time.Time, limit int) ([]dueKey, error) {
	lists, err := s.queryLists(ctx, vshard, now)
	if err != nil {
		return nil, err
	}
	var due []dueKey
	seen := map[string]bool{}
	for _, l := range lists {
		if len(due) >= limit {
			break
		}
		var unknown []int
		for j, key := range l.Hosts {
			h, ok, trusted := s.sight(key)
			settled := ok && h.version > l.Versions[j] && h.listed != l.SK
			// Only a joined host's sight can stand under the lease: an
			// unjoined one may be joined any moment by its batch's append.
			if !settled && !(trusted && h.listed == l.SK) {
				unknown = append(unknown, j)
			}
		}
		s.readHosts(ctx, l, unknown)
		old := s.now().Sub(time.UnixMilli(l.WrittenAt)) > listFenceAge
		settled := true
		for j, key := range l.Hosts {
			h, ok, _ := s.sight(key)
			switch {
			case ok && h.listed == l.SK:
				settled = false
				if !seen[key] {
					seen[key] = true
					due = append(due, dueKey{key, listDue(l.SK)})
				}
			case ok && h.version > l.Versions[j]:
			default:
				settled = false
				if old {
					s.fence(ctx, key, l.SK, l.Versions[j])
				}
			}
		}
		if settled {
			s.deleteList(ctx, l)
		}
	}
	return due, nil
}

// queryLists reads vshard's lists due at or before now, earliest first.
func (s *Store) queryLists(ctx context.Context, vshard int, now time.Time) ([]listItem, error) {
	var lists []listItem
	var start map[string]types.AttributeValue
	for {
		out, err := s.client.Query(ctx, &dynamodb.QueryInput{
			TableName:              &s.table,
			ConsistentRead:         aws.Bool(true),
			KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": &types.AttributeValueMemberS{Value: duePK(vshard)},
				":lo": &types.AttributeValueMemberS{Value: listPrefix},
				// '~' sorts after the '#' and the id's characters.
				":hi": &types.AttributeValueMemberS{Value: listSK(now.UnixMilli(), "~")},
			},
			ExclusiveStartKey: start,
		})
		if err != nil {
			return nil, fmt.Errorf("query due lists of shard %d: %w", vshard, err)
		}
		for _, it := range out.Items {
			var l listItem
			if err := attributevalue.UnmarshalMap(it, &l); err != nil || len(l.Versions) != len(l.Hosts) {
				return nil, fmt.Errorf("decode due list of shard %d: %v", vshard, err)
			}
			lists = append(lists, l)
		}
		start = out.LastEvaluatedKey
		if len(start) == 0 {
			return lists, nil
		}
	}
}

// readHosts reads the hosts of l at js, side by side, for what the store
// sees of them. Eventually consistent is enough: a stale item shows an
// older version, which can only make a settled host look unsettled (it is
// read again), never the other way round. A failed read leaves the host
// unknown, and its list in place.
func (s *Store) readHosts(ctx context.Context, l listItem, js []int) {
	parallel(len(js), func(k int) {
		key := l.Hosts[js[k]]
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: itemKey(hostPK(key), hostSK)})
		if err != nil || len(out.Item) == 0 {
			return
		}
		var it hostItem
		if attributevalue.UnmarshalMap(out.Item, &it) == nil {
			s.saw(&it)
		}
	})
}

// fence moves a host named by an old list past the version it was listed
// at (listed, of list sk), so that no append of that batch joins the list
// any more: a write of the item as it stands (a stub when there is none,
// expiring as an idle host does), under the version condition. Best
// effort: the next look fences again.
func (s *Store) fence(ctx context.Context, key, sk string, listed int64) {
	cur, err := s.getHost(ctx, hostPK(key))
	if err != nil || cur != nil && (cur.Version > listed || cur.Listed == sk) {
		return // read again, it needs no fence
	}
	var next *hostItem
	var prev int64
	if cur == nil {
		next = &hostItem{PK: hostPK(key), SK: hostSK, VirtualShard: hostqueue.VirtualShard(key), Version: 1,
			Nonces: []string{newNonce()}, TTL: s.now().Add(fenceTTL).Unix()}
	} else {
		next, prev = cur.successor(), cur.Version
	}
	if s.putHost(ctx, next, prev) == nil {
		s.saw(next)
	}
}

// fenceTTL is how long the stub a fence writes for a host with no item
// lives.
const fenceTTL = 24 * time.Hour

// deleteList deletes a list whose hosts have all settled, if it is still
// the one read. Best effort: a list left is read and deleted again.
func (s *Store) deleteList(ctx context.Context, l listItem) {
	_, _ = s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       itemKey(l.PK, l.SK),
		ConditionExpression:       aws.String("n = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: l.Nonce}},
	})
}

// DueHosts implements hostqueue.Queues: the hosts of the shard's due lists
// and of the GSI due at or before now, earliest first.
func (s *Store) DueHosts(ctx context.Context, vshard int, now time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var listed, indexed []dueKey
	var lerr, ierr error
	var wg sync.WaitGroup
	wg.Go(func() { listed, lerr = s.listedDue(ctx, vshard, now, limit) })
	wg.Go(func() { indexed, ierr = s.indexedDue(ctx, vshard, now, limit) })
	wg.Wait()
	if err := errors.Join(lerr, ierr); err != nil {
		return nil, err
	}
	all := append(listed, indexed...)
	slices.SortStableFunc(all, func(a, b dueKey) int { return int(a.due - b.due) })
	var keys []string
	taken := map[string]bool{}
	for _, d := range all {
		if len(keys) >= limit {
			break
		}
		if !taken[d.key] {
			taken[d.key] = true
			keys = append(keys, d.key)
		}
	}
	return keys, nil
}

// indexedDue returns up to limit hosts of vshard in the GSI due at or
// before now, earliest first.
func (s *Store) indexedDue(ctx context.Context, vshard int, now time.Time, limit int) ([]dueKey, error) {
	var keys []dueKey
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
			var due int64
			if d, ok := it["due"].(*types.AttributeValueMemberN); ok {
				due, _ = strconv.ParseInt(d.Value, 10, 64)
			}
			if key, ok := keyOfPK(pk.Value); ok {
				keys = append(keys, dueKey{key, due})
			}
		}
		start = out.LastEvaluatedKey
		if len(start) == 0 || len(keys) >= limit {
			return keys, nil
		}
	}
}

// parallel runs f(0..n-1), batchConcurrency at a time.
func parallel(n int, f func(i int)) {
	sem := make(chan struct{}, batchConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}
