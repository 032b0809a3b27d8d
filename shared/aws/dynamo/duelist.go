package dynamo

import (
	"cmp"
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

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// The due index (see layout.go for why): due lists and buckets, items of
// the table under the shard's sub-keys "d#<vshard>[#<sub>]". Both name hosts with the version of each
// host item the writer read; a host joins an index item (Listed) only by a
// write conditioned on exactly that version, so a host named by an index
// item is joined by a write at that version + 1, or never.
//
// An ingest batch reads every host it appends to (the read each append's
// first attempt makes anyway), then writes, for each virtual shard with at
// least listMin hosts that get work and have no entry, one list naming
// them, and only then appends. Every other host that needs an entry (a
// batch's lone hosts of a shard, a single Append's, a commit's move) is
// added to a bucket (bucket.go) by the write's own attempt, between its
// read and its write; an attempt that loses its version decides again on
// what the next reads, and adds again if the host still needs an entry
// (drained meanwhile, say): the old add is a stale entry, settled below.
//
// That makes an entry's end decidable from the hosts alone. The check,
// holding the shard's lease, reads the shard's index items due by now with
// a consistent query (DueHosts) and each host named, from what the store
// saw of it last or with a read:
//
//   - at a version past the one named and not joined to the item
//     (Listed differs): settled, for good. Its joining write landed and a
//     later write took it out (drained, or moved elsewhere), or it never
//     will land (its version has passed). Nothing joins it to the item
//     again: only a write on the named version does.
//   - joined (Listed is the item): due, at its due time.
//   - still at the named version (or no item): its write has not landed
//     yet (a batch in progress), or never will (a crash between the entry
//     and the write). Not due, and the item stays. Once the item is older
//     than any write lives (listFenceAge), the check fences the host: a
//     conditional write that moves it past the named version, after which
//     no write of that attempt can join it.
//
// An index item is deleted once every host it names is settled (a bucket
// only once its slot is over, bucket.go), conditional on what was read. A list's put
// carries no condition: the same key and the same content, so a put sent
// again after a lost answer (or landing late, even after the delete)
// changes nothing a reader relies on (a list back from the dead names
// settled hosts only, and is deleted again).

const (
	// listMin is the fewest hosts of a shard a list is written for: a list
	// costs two writes (its put and its delete), bucket adds one a host
	// and their share of the bucket's delete.
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
	// batchWave is how many hosts of a batch are read, listed and
	// appended together: a wave takes a few round trips (16 at most), so
	// the deadline a batch stops at is kept as closely as by single
	// appends, and a shard still gets a list for the dozen or so of its
	// hosts a wave holds.
	batchWave = 8 * batchConcurrency
	// maxSeen bounds the hosts the store remembers (cleared when full: a
	// forgotten host costs a read).
	maxSeen = 1 << 16
)

// indexItem is a due list or a due bucket.
type indexItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	// Hosts are the queue keys named, Versions the version of each host
	// item when its writer read it (0: none yet), Dues (a bucket's) when
	// each is due (ms); a list's hosts are due at its sort key's time.
	Hosts    []string `dynamodbav:"h"`
	Versions []int64  `dynamodbav:"hv"`
	Dues     []int64  `dynamodbav:"hd,omitempty"`
	// WrittenAt is when a list was written (ms): fencing waits for age.
	WrittenAt int64  `dynamodbav:"t,omitempty"`
	Nonce     string `dynamodbav:"n,omitempty"`
	// Count is how many adds a bucket took (bucket.go).
	Count int `dynamodbav:"c,omitempty"`
}

func (it *indexItem) bucket() bool { return strings.Contains(it.SK, bucketMark) }

// shard is the virtual shard whose due index holds it (its key
// "d#<vshard>[#<sub>]").
func (it *indexItem) shard() int {
	v, _, _ := strings.Cut(strings.TrimPrefix(it.PK, duePrefix), "#")
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

// joins tells whether a host seen as h is joined to it: its Listed is it's
// sort key, in it's shard (two shards' buckets of one slot have the same
// sort key, and a host placed or moved into another shard may join the
// other's).
func (h hostSeen) joins(it *indexItem) bool { return h.listed == it.SK && h.vs == it.shard() }

// dueOf is when the j-th host of it is due (ms).
func (it *indexItem) dueOf(j int) int64 {
	if j < len(it.Dues) {
		return it.Dues[j]
	}
	return itemTime(it.SK)
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
	// vs is the virtual shard the item was in: the lease whose epoch
	// counts.
	vs int
}

// shardHold is the store's lease on a shard: whose (the owner of the run
// that took it through this store), until when (ms), and an epoch that
// changes whenever the store may have stopped holding it.
type shardHold struct {
	owner string
	until int64
	epoch int
}

// hold records a lease owner took or renewed through the store until
// until; renewed: the lease was owner's without a break.
func (s *Store) hold(vshard int, owner string, until time.Time, renewed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[vshard]
	if !renewed || h.owner != owner || h.until < s.now().UnixMilli() {
		h.epoch++
	}
	h.owner, h.until = owner, until.UnixMilli()
	s.holds[vshard] = h
}

// dropHold records that owner no longer holds vshard's lease. Another
// owner's failing to take it (a run of the same process waiting for it)
// leaves the holder's hold alone.
func (s *Store) dropHold(vshard int, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[vshard]
	if h.owner != owner {
		return
	}
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

// listSK is a list's sort key: its due time first, so a shard's index
// items sort by time and a query stops at now.
func listSK(due int64, batch string) string {
	return fmt.Sprintf("%013d%s%s", due, listMark, batch)
}

// itemTime is the time (ms) an index item's sort key starts with.
func itemTime(sk string) int64 {
	ms, _, _ := strings.Cut(sk, "#")
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
	s.seen[it.PK] = hostSeen{version: it.Version, listed: it.Listed, epoch: s.epoch(it.VirtualShard), vs: it.VirtualShard}
}

// sawAbsent records that a consistent read found no item for pk: version
// 0. Consistent, so it replaces any sight: one of an item since deleted
// (an idle host's TTL) would otherwise stand at its old version and make
// a list that named the host anew at 0 take it for settled.
func (s *Store) sawAbsent(pk string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) >= maxSeen {
		clear(s.seen)
	}
	// Not joined: the epoch, which only a joined sight's trust uses, is none.
	s.seen[pk] = hostSeen{version: 0, epoch: -1}
}

// sight is what the store last saw of key's host item, and whether it
// still stands for what the item holds (trusted): a host joined to an
// index item leaves it only by a commit of its shard's lease holder, so a
// sight of it joined stands while the store has held the lease since (its
// own commits update it). A settled sight stands for good.
func (s *Store) sight(key string) (h hostSeen, ok, trusted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok = s.seen[hostPK(key)]
	return h, ok, ok && h.epoch >= 0 && h.epoch == s.epoch(h.vs)
}

// AppendBatch implements hostqueue.BatchAppender.
func (s *Store) AppendBatch(ctx context.Context, reqs []hostqueue.AppendRequest) []hostqueue.AppendOutcome {
	return s.AppendBatchUntil(ctx, reqs, time.Time{})
}

// AppendBatchUntil implements hostqueue.UntilBatchAppender. The batch goes
// in waves of batchWave hosts: a wave's reads, its due lists, then its
// appends. No wave starts after until (by the store's clock; zero: no
// bound): its hosts fail with ErrNoTime, and a wave under way, as few
// round trips as the single appends in flight were, finishes.
func (s *Store) AppendBatchUntil(ctx context.Context, reqs []hostqueue.AppendRequest, until time.Time) []hostqueue.AppendOutcome {
	out := make([]hostqueue.AppendOutcome, len(reqs))
	for from := 0; from < len(reqs); from += batchWave {
		wave := reqs[from:min(len(reqs), from+batchWave)]
		stop := ctx.Err()
		if stop == nil && !until.IsZero() && !s.now().Before(until) {
			stop = hostqueue.ErrNoTime
		}
		if stop != nil {
			for i := from; i < len(reqs); i++ {
				out[i].Err = stop
			}
			break
		}
		s.appendWave(ctx, wave, out[from:from+len(wave)])
	}
	return out
}

// appendWave appends reqs, its outcomes into out: every host read first
// (the read its first attempt would make), the due lists written, then the
// appends.
func (s *Store) appendWave(ctx context.Context, reqs []hostqueue.AppendRequest, out []hostqueue.AppendOutcome) {
	pres := make([]*preread, len(reqs))
	parallel(len(reqs), func(i int) {
		// A failed read leaves the append to read for itself.
		if it, err := s.getHost(ctx, hostPK(reqs[i].Key)); err == nil {
			pres[i] = &preread{item: it}
		}
	})
	lists := s.putLists(ctx, reqs, pres)
	parallel(len(reqs), func(i int) {
		out[i].Result, out[i].Err = s.appendHost(ctx, reqs[i], pres[i], lists[i])
	})
}

// putLists writes the due lists of a batch read as pres and returns each
// request's listing (zero: none names it). A list that fails to be written
// names no host: theirs go into buckets. Written side by side, before any
// append.
func (s *Store) putLists(ctx context.Context, reqs []hostqueue.AppendRequest, pres []*preread) []listing {
	type group struct {
		vs  int
		due int64
	}
	groups := map[group][]int{}
	for i, r := range reqs {
		p := pres[i]
		if p == nil || len(r.Entries) == 0 || p.item != nil && !p.item.idle() {
			continue
		}
		// The shard the append will put the host in: it is new or idle.
		stored := 0
		if p.item != nil {
			stored = p.item.VirtualShard
		}
		g := group{r.ShardFor(stored, p.item != nil, true), r.Due.UnixMilli()}
		groups[g] = append(groups[g], i)
	}
	out := make([]listing, len(reqs))
	batch := randomID(8)
	var lists []*indexItem
	var members [][]int
	for g, idx := range groups {
		if len(idx) < listMin {
			continue
		}
		var cur *indexItem
		size := 0
		for _, i := range idx {
			if cur == nil || size+len(reqs[i].Key)+16 > maxListBytes {
				sk := listSK(g.due, batch+strconv.Itoa(len(lists)))
				// Lists too spread over the shard's sub-keys, by their batch.
				cur = &indexItem{PK: duePK(g.vs, int(hostqueue.Hash(sk)%dueSpread)), SK: sk, WrittenAt: s.now().UnixMilli(), Nonce: newNonce()}
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
func (s *Store) putList(ctx context.Context, l *indexItem) error {
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

// DueHosts implements hostqueue.Queues: the hosts of vshard's due lists
// and buckets due at or before now, earliest first. On the way it deletes
// the index items whose hosts have all settled (a bucket once its slot is
// over) and fences the hosts of old items that never joined them
// (see the top of this file). The store's own clock decides those (now
// may be a time ahead, asked whether anything falls due before it).
func (s *Store) DueHosts(ctx context.Context, vshard int, now time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	var due []dueKey
	taken, tried := map[string]bool{}, map[string]bool{}
	// Merged by sort key, a slot's buckets come in the order they were
	// opened, whichever sub-key holds them, as when one key held them all.
	err := s.queryIndex(ctx, vshard, now, func(it *indexItem) bool {
		s.settle(ctx, it, now, taken, tried, &due, limit)
		return len(due) < limit
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(due, func(a, b dueKey) int { return cmp.Compare(a.due, b.due) })
	keys := make([]string, 0, min(limit, len(due)))
	for _, d := range due[:min(limit, len(due))] {
		keys = append(keys, d.key)
	}
	return keys, nil
}

// AnyDueBy implements hostqueue.LookAhead: whether vshard's due index
// names a host due at or before t that this store has not seen move on,
// read from the index alone. A host not seen counts as due (the run stays
// for it, and the look at its due time reads it as DueHosts does), so no
// host item is read for a host that is not due yet.
func (s *Store) AnyDueBy(ctx context.Context, vshard int, t time.Time) (bool, error) {
	found := false
	err := s.queryIndex(ctx, vshard, t, func(it *indexItem) bool {
		for j, key := range it.Hosts {
			if it.dueOf(j) > t.UnixMilli() {
				continue
			}
			if h, ok, _ := s.sight(key); ok && !h.joins(it) && h.version > it.Versions[j] {
				continue // settled: it moved on since this entry
			}
			found = true
			return false
		}
		return true
	})
	if err != nil {
		return true, fmt.Errorf("look ahead in shard %d: %w", vshard, err)
	}
	return found, nil
}

// unknownFrom returns up to n hosts of it due by now, from its j-th on,
// whose sight does not tell how they stand and that this look has not
// tried to read (tried: it records them). A host still unknown after its read (waiting
// to join, or the read failed) is read again by the next look, not by
// this one again.
func (s *Store) unknownFrom(it *indexItem, j, n int, tried map[string]bool, now time.Time) []string {
	var keys []string
	for ; j < len(it.Hosts) && len(keys) < n; j++ {
		if key := it.Hosts[j]; !tried[key] && it.dueOf(j) <= now.UnixMilli() && s.unknown(it, j) {
			tried[key] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// unknown tells whether the sight of it's j-th host does not tell how it
// stands: neither settled nor (trusted) joined.
func (s *Store) unknown(it *indexItem, j int) bool {
	h, ok, trusted := s.sight(it.Hosts[j])
	settled := ok && h.version > it.Versions[j] && !h.joins(it)
	// Only a joined host's sight can stand under the lease: an unjoined
	// one may be joined any moment by its writer.
	return !settled && !(trusted && h.joins(it))
}

// readChunk is how many unknown hosts settle reads side by side at a time.
const readChunk = batchConcurrency

// settle takes the hosts of it, as the store now sees them: a joined one
// due by now into due (once, by taken), a settled one left, an unjoined
// one of an old item fenced; and deletes it once every host has settled (a
// bucket once its slot is over).
//
// The hosts whose sight does not tell are read on the way, readChunk side
// by side, and only while due is short of limit: a list stops there (its
// hosts share one due time, so the ones left are no earlier), so a shard
// taken over, which knows none of its hosts, reads about as many as it
// dispatches before its first request, not every host its lists name. A
// bucket (at most bucketCap hosts, due times apart) is taken whole.
func (s *Store) settle(ctx context.Context, it *indexItem, now time.Time, taken, tried map[string]bool, due *[]dueKey, limit int) {
	old := s.now().Sub(time.UnixMilli(s.since(it))) > listFenceAge
	settled := true
	for j, key := range it.Hosts {
		if len(*due) >= limit && !it.bucket() {
			return // the rest for a later look; the list stays
		}
		if it.dueOf(j) > now.UnixMilli() && s.unknown(it, j) {
			// A bucket also names hosts due later in its slot: they are
			// read when due, not before (a host waiting for a refresh
			// costs nothing until then), and keep the bucket meanwhile.
			settled = false
			continue
		}
		if !tried[key] && s.unknown(it, j) {
			s.readHosts(ctx, s.unknownFrom(it, j, readChunk, tried, now))
		}
		h, ok, _ := s.sight(key)
		switch {
		case ok && h.joins(it):
			settled = false
			if d := it.dueOf(j); !taken[key] && d <= now.UnixMilli() {
				taken[key] = true
				*due = append(*due, dueKey{key, d})
			}
		case ok && h.version > it.Versions[j]:
		default:
			settled = false
			if old {
				s.fence(ctx, key, it, it.Versions[j])
			}
		}
	}
	if settled && (!it.bucket() || s.ripe(it)) {
		s.deleteIndexItem(ctx, it)
	}
}

// since is when an index item was last written to, as far as fencing
// goes (ms): a list's put, or the end of a bucket's slot (its adds come
// before).
func (s *Store) since(it *indexItem) int64 {
	if it.bucket() {
		return itemTime(it.SK) + bucketSpan.Milliseconds()
	}
	return it.WrittenAt
}

// queryIndex reads vshard's index items whose time is at or before now,
// earliest first across its sub-keys, and hands them to f one at a time
// until it says no more: a shard with more due hosts than it is asked for
// reads (and pays for) only the pages it needs. The sub-keys' first pages
// are read side by side; a sub-key's next page when its last item is the
// earliest left.
func (s *Store) queryIndex(ctx context.Context, vshard int, now time.Time, f func(*indexItem) bool) error {
	subs := make([]indexStream, dueSpread)
	errs := make([]error, dueSpread)
	parallel(dueSpread, func(k int) {
		subs[k].pk = duePK(vshard, k)
		errs[k] = s.nextPage(ctx, &subs[k], now)
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for {
		var first *indexStream
		for k := range subs {
			if len(subs[k].items) > 0 && (first == nil || subs[k].items[0].SK < first.items[0].SK) {
				first = &subs[k]
			}
		}
		if first == nil {
			return nil
		}
		it := &first.items[0]
		first.items = first.items[1:]
		if !f(it) {
			return nil
		}
		if len(first.items) == 0 && len(first.start) > 0 {
			if err := s.nextPage(ctx, first, now); err != nil {
				return err
			}
		}
	}
}

// indexStream is one sub-key's index items as queryIndex reads them: the
// rest of the page read, and where its next page starts (none: done).
type indexStream struct {
	pk    string
	items []indexItem
	start map[string]types.AttributeValue
}

// nextPage reads st's next page of items due by now.
func (s *Store) nextPage(ctx context.Context, st *indexStream, now time.Time) error {
	if err := s.readPage(ctx, st, now); err != nil || len(st.items) > 0 || len(st.start) == 0 {
		return err
	}
	// An empty page that is not the last (DynamoDB may answer one): read on.
	return s.nextPage(ctx, st, now)
}

// readPage reads one page of st into it.
func (s *Store) readPage(ctx context.Context, st *indexStream, now time.Time) error {
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:              &s.table,
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND sk <= :hi"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: st.pk},
			// '~' sorts after the '#' and what follows it.
			":hi": &types.AttributeValueMemberS{Value: fmt.Sprintf("%013d#~", now.UnixMilli())},
		},
		ExclusiveStartKey: st.start,
		Limit:             aws.Int32(indexPage),
	})
	if err != nil {
		return fmt.Errorf("query the due index %s: %w", st.pk, err)
	}
	st.items, st.start = make([]indexItem, len(out.Items)), out.LastEvaluatedKey
	for k, raw := range out.Items {
		it := &st.items[k]
		if err := attributevalue.UnmarshalMap(raw, it); err != nil {
			return fmt.Errorf("decode due-index item of %s: %w", st.pk, err)
		}
		if len(it.Versions) != len(it.Hosts) || len(it.Dues) != 0 && len(it.Dues) != len(it.Hosts) {
			return fmt.Errorf("due-index item %s of %s names %d hosts with %d versions and %d due times: its lists must agree", it.SK, st.pk, len(it.Hosts), len(it.Versions), len(it.Dues))
		}
	}
	return nil
}

// indexPage is how many index items one query page reads: a few hundred
// to a few thousand hosts.
const indexPage = 64

// readHosts reads the host items of keys, side by side, for what the store
// sees of them. The reads are consistent: under the strict layer's
// eventually consistent reads (up to a second stale, as DynamoDB allows)
// hosts appended a moment before were left unworked for good in the
// benchmark's politeness run, so a stale view of a host is not safe here.
// A failed read leaves the host unknown, and its index item in place.
func (s *Store) readHosts(ctx context.Context, keys []string) {
	parallel(len(keys), func(k int) {
		key := keys[k]
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: itemKey(hostPK(key), hostSK), ConsistentRead: aws.Bool(true)})
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
// at (listed, of list it), so that no append of that batch joins the list
// any more: a write of the item as it stands (a stub when there is none,
// expiring as an idle host does), under the version condition, at listed
// + 1 at once. An item below the named version (TTL deleted the host
// after it was listed, and a stub or a new item started again from 1)
// would otherwise be raised one version a look, a write a second for as
// long as the climb takes. Best effort: the next look fences again.
func (s *Store) fence(ctx context.Context, key string, it *indexItem, listed int64) {
	cur, err := s.getHost(ctx, hostPK(key))
	if err != nil || cur != nil && (cur.Version > listed || cur.Listed == it.SK && cur.VirtualShard == it.shard()) {
		return // read again, it needs no fence
	}
	var next *hostItem
	var prev int64
	if cur == nil {
		next = &hostItem{PK: hostPK(key), SK: hostSK, VirtualShard: hostqueue.VirtualShard(key),
			Nonces: []string{newNonce()}, TTL: s.now().Add(fenceTTL).Unix()}
	} else {
		next, prev = cur.successor(), cur.Version
	}
	next.Version = listed + 1
	if s.putHost(ctx, next, prev) == nil {
		s.saw(next)
	}
}

// fenceTTL is how long the stub a fence writes for a host with no item
// lives.
const fenceTTL = 24 * time.Hour

// deleteIndexItem deletes an index item whose hosts have all settled, if
// it is still the one read: a list by its nonce, a bucket by its count of
// adds. Best effort: an item left is read and deleted again.
func (s *Store) deleteIndexItem(ctx context.Context, it *indexItem) {
	in := &dynamodb.DeleteItemInput{TableName: &s.table, Key: itemKey(it.PK, it.SK)}
	if it.bucket() {
		in.ConditionExpression = aws.String("c = :c")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":c": &types.AttributeValueMemberN{Value: strconv.Itoa(it.Count)}}
	} else {
		in.ConditionExpression = aws.String("n = :n")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: it.Nonce}}
	}
	_, _ = s.client.DeleteItem(ctx, in)
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
