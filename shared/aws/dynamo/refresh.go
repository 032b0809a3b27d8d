package dynamo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
)

// Refreshing URLs (docs/refresh.md, How it is stored): an item each under
// the host's partition, sorted by due time,
//
//	refresh pk "h#<key>", sk "f#<due ms, 13 digits>#<url hash>"
//
// ("f#", not the "r#" docs/refresh.md first had: robots items are
// "r#<origin>" under the same partition, and a Query of "r#" would read
// them too.)
// so the host's due ones are one Query of the range up to now, a read
// unit for 4 KB of them. The host item counts them (RefreshCount, for
// MaxRefreshPerHost) and keeps the earliest due time (RefreshDue): a host
// whose queue is empty is named by the due index at that time, so until
// then no check reads or writes anything of it.
//
// Every change to refresh items rides in one TransactWriteItems with the
// host item's write under its version condition: the host item's version
// then orders them too, and the outcome of a lost answer is judged from the
// host item alone (outcome.go), as the transaction lands whole or not at
// all. A transaction's writes cost twice a plain write's units
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html#transaction-capacity-handling).
const (
	refreshPrefix = "f#"
	// maxTxItems is TransactWriteItems' bound on the items of one call
	// (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
	maxTxItems = 100
	// refreshGroup bounds the refreshes one host write changes: each is
	// at most a delete and a put, beside the host item.
	refreshGroup = (maxTxItems - 1) / 2
	// maxCachedViews and maxCachedRefreshes bound the hosts whose
	// refresh items the store remembers and the items (a few hundred
	// bytes each: some 30 MB); the cache is cleared when full (a miss
	// costs a Query).
	maxCachedViews     = 4096
	maxCachedRefreshes = 100_000
)

// refreshItem.Flags holds hostqueue.Refresh.Flags.
const (
	refreshAdapt         = hostqueue.RefreshAdapt
	refreshEmitUnchanged = hostqueue.RefreshEmitUnchanged
	refreshStop          = hostqueue.RefreshStop
	refreshFailing       = hostqueue.RefreshFailing
)

// refreshItem is a refreshing URL as stored; its due time is in its sort
// key.
type refreshItem struct {
	PK            string `dynamodbav:"pk"`
	SK            string `dynamodbav:"sk"`
	ID            string `dynamodbav:"i"`
	URL           string `dynamodbav:"u"`
	Hops          int    `dynamodbav:"h,omitempty"`
	Every         int64  `dynamodbav:"ev"` // ms
	Flags         int    `dynamodbav:"f,omitempty"`
	ETag          string `dynamodbav:"e,omitempty"`
	LastModified  string `dynamodbav:"m,omitempty"`
	ValidatorsURL string `dynamodbav:"vu,omitempty"`
	SHA256        string `dynamodbav:"s,omitempty"`
	Seq           int    `dynamodbav:"q,omitempty"`
}

// refreshSK is the sort key of url's refresh item due at due (ms): 64 bits
// of the URL's digest tell apart the URLs due in the same millisecond.
func refreshSK(due int64, url string) string {
	sum := sha256.Sum256([]byte(url))
	return fmt.Sprintf("%s%013d#%s", refreshPrefix, max(due, 0), hex.EncodeToString(sum[:8]))
}

// due is the item's due time (ms), from its sort key.
func (r refreshItem) due() int64 {
	s := strings.TrimPrefix(r.SK, refreshPrefix)
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// at is r moved to due (ms).
func (r refreshItem) at(due int64) refreshItem {
	r.SK = refreshSK(due, r.URL)
	return r
}

func toRefreshItem(pk string, r hostqueue.Refresh, due int64) refreshItem {
	f := r.Flags()
	return refreshItem{PK: pk, SK: refreshSK(due, r.URL), ID: r.ID, URL: r.URL, Hops: r.Hops, Every: r.Every.Milliseconds(),
		Flags: f, ETag: r.ETag, LastModified: r.LastModified, ValidatorsURL: r.StoredValidatorsURL(), SHA256: r.SHA256, Seq: r.Seq}
}

func (r refreshItem) refresh() hostqueue.Refresh {
	return hostqueue.Refresh{ID: r.ID, URL: r.URL, Hops: r.Hops, Stop: r.Flags&refreshStop != 0, Schedule: refresh.Schedule{
		Every: time.Duration(r.Every) * time.Millisecond, Adapt: r.Flags&refreshAdapt != 0,
		EmitUnchanged: r.Flags&refreshEmitUnchanged != 0, Due: time.UnixMilli(r.due()),
		ETag: r.ETag, LastModified: r.LastModified, ValidatorsURL: r.ValidatorsURL, SHA256: r.SHA256,
		Seq: r.Seq, Failing: r.Flags&refreshFailing != 0,
	}}
}

// refreshView is what the store knows of a host's refresh items as they
// stood at one version of its host item: all of them (complete) or its
// earliest, which every other is due no earlier than (beyond, ms). A write
// conditioned on that version changes them knowing how they stand: had
// anything changed them, it changed the host item too.
type refreshView struct {
	version  int64
	byURL    map[string]refreshItem
	complete bool
	beyond   int64
}

// clone is a copy of v to change.
func (v *refreshView) clone() *refreshView {
	out := *v
	out.byURL = make(map[string]refreshItem, len(v.byURL))
	for u, it := range v.byURL {
		out.byURL[u] = it
	}
	return &out
}

// first is the earliest due time of the view's items (ms), ok false when
// it knows of none.
func (v *refreshView) first() (int64, bool) {
	var first int64
	ok := false
	for _, it := range v.byURL {
		if d := it.due(); !ok || d < first {
			first, ok = d, true
		}
	}
	if !v.complete && (!ok || v.beyond < first) {
		first, ok = v.beyond, true
	}
	return first, ok
}

// view returns the host's refresh items as they stand at cur's version:
// all of them when all is set, else at least those of urls (read whole
// when they are not all known). It reads nothing for a host with none.
func (s *Store) view(ctx context.Context, cur *hostItem, urls []string, all bool) (*refreshView, error) {
	if cur == nil || cur.RefreshCount == 0 {
		return &refreshView{version: cur.versionOrZero(), byURL: map[string]refreshItem{}, complete: true}, nil
	}
	v := s.cachedView(cur.PK)
	if v != nil && v.version == cur.Version {
		known := v.complete
		if !known && !all {
			known = true
			for _, u := range urls {
				if _, ok := v.byURL[u]; !ok {
					known = false
					break
				}
			}
		}
		if known {
			return v, nil
		}
	}
	its, complete, err := s.queryRefreshes(ctx, cur.PK, 0)
	if err != nil {
		return nil, err
	}
	v = &refreshView{version: cur.Version, byURL: make(map[string]refreshItem, len(its)), complete: complete}
	for _, it := range its {
		v.byURL[it.URL] = it
	}
	s.keepView(cur.PK, v)
	return v.clone(), nil
}

// items are the view's refresh items (nil view: none).
func (v *refreshView) items() map[string]refreshItem {
	if v == nil {
		return nil
	}
	return v.byURL
}

func (h *hostItem) versionOrZero() int64 {
	if h == nil {
		return 0
	}
	return h.Version
}

// cachedView is a copy of the store's view of pk's refresh items (nil:
// none).
func (s *Store) cachedView(pk string) *refreshView {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.views[pk]; v != nil {
		return v.clone()
	}
	return nil
}

// keepView remembers v as how pk's refresh items stand.
func (s *Store) keepView(pk string, v *refreshView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.viewItems += len(v.byURL) - len(s.views[pk].items())
	if len(s.views) >= maxCachedViews || s.viewItems > maxCachedRefreshes {
		clear(s.views)
		s.viewItems = len(v.byURL)
	}
	s.views[pk] = v
}

// queryRefreshes reads pk's refresh items earliest first, strongly
// consistent: limit of them (0: all, which MaxRefreshPerHost bounds),
// and whether that is all there are.
func (s *Store) queryRefreshes(ctx context.Context, pk string, limit int) ([]refreshItem, bool, error) {
	var out []refreshItem
	var start map[string]types.AttributeValue
	for {
		in := &dynamodb.QueryInput{
			TableName:              &s.table,
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :f)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": &types.AttributeValueMemberS{Value: pk},
				":f":  &types.AttributeValueMemberS{Value: refreshPrefix},
			},
			ConsistentRead:    aws.Bool(true),
			ExclusiveStartKey: start,
		}
		if limit > 0 {
			in.Limit = aws.Int32(int32(limit - len(out)))
		}
		page, err := s.client.Query(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("read refreshing urls of %s: %w", pk, err)
		}
		for _, m := range page.Items {
			var it refreshItem
			if err := attributevalue.UnmarshalMap(m, &it); err != nil {
				return nil, false, fmt.Errorf("decode refreshing url of %s: %w", pk, err)
			}
			out = append(out, it)
		}
		start = page.LastEvaluatedKey
		if len(start) == 0 {
			return out, true, nil
		}
		if limit > 0 && len(out) >= limit {
			return out, false, nil
		}
	}
}

// headRefreshes is the host's want earliest refreshes, from the store's
// view when it knows them all, else read (and remembered).
func (s *Store) headRefreshes(ctx context.Context, it *hostItem, want int) ([]hostqueue.Refresh, error) {
	if it.RefreshCount == 0 || want <= 0 {
		return nil, nil
	}
	v := s.cachedView(it.PK)
	var its []refreshItem
	if v != nil && v.version == it.Version && v.complete {
		for _, r := range v.byURL {
			its = append(its, r)
		}
		sortRefreshItems(its)
		its = its[:min(len(its), want)]
	} else {
		var complete bool
		var err error
		if its, complete, err = s.queryRefreshes(ctx, it.PK, want); err != nil {
			return nil, err
		}
		v = &refreshView{version: it.Version, byURL: make(map[string]refreshItem, len(its)), complete: complete}
		for _, r := range its {
			v.byURL[r.URL] = r
		}
		if n := len(its); n > 0 {
			v.beyond = its[n-1].due()
		}
		s.keepView(it.PK, v)
	}
	out := make([]hostqueue.Refresh, len(its))
	for i, r := range its {
		out[i] = r.refresh()
	}
	return out, nil
}

func sortRefreshItems(its []refreshItem) {
	for i := 1; i < len(its); i++ {
		for j := i; j > 0 && its[j].SK < its[j-1].SK; j-- {
			its[j], its[j-1] = its[j-1], its[j]
		}
	}
}

// refreshChange is a host write's change to its refresh items: the view
// it starts from and the one it leaves.
type refreshChange struct {
	before, after *refreshView
}

// ops are the change's writes, for the host write's transaction: a put
// where an item is new or changed, a delete where one moved or ended,
// each conditioned on the item being there or not as the view says.
func (c *refreshChange) ops(table string) ([]types.TransactWriteItem, error) {
	if c == nil {
		return nil, nil
	}
	var ops []types.TransactWriteItem
	put := func(it refreshItem, exists bool) error {
		m, err := attributevalue.MarshalMap(it)
		if err != nil {
			return fmt.Errorf("encode refreshing url %s: %w", it.URL, err)
		}
		cond := "attribute_not_exists(pk)"
		if exists {
			cond = "attribute_exists(pk)"
		}
		ops = append(ops, types.TransactWriteItem{Put: &types.Put{TableName: &table, Item: m, ConditionExpression: aws.String(cond)}})
		return nil
	}
	for u, old := range c.before.byURL {
		if now, ok := c.after.byURL[u]; !ok || now.SK != old.SK {
			ops = append(ops, types.TransactWriteItem{Delete: &types.Delete{TableName: &table, Key: itemKey(old.PK, old.SK),
				ConditionExpression: aws.String("attribute_exists(pk)")}})
		}
	}
	for u, now := range c.after.byURL {
		old, ok := c.before.byURL[u]
		switch {
		case !ok || old.SK != now.SK:
			if err := put(now, false); err != nil {
				return nil, err
			}
		case old != now:
			if err := put(now, true); err != nil {
				return nil, err
			}
		}
	}
	return ops, nil
}

// changed tells whether the change writes anything.
func (c *refreshChange) changed() bool {
	if c == nil {
		return false
	}
	if len(c.before.byURL) != len(c.after.byURL) {
		return true
	}
	for u, it := range c.after.byURL {
		if c.before.byURL[u] != it {
			return true
		}
	}
	return false
}

// applyRefreshes records next's refresh count and earliest due time from
// the change's view.
func (next *hostItem) applyRefreshes(c *refreshChange) {
	if c == nil {
		return
	}
	next.RefreshCount += len(c.after.byURL) - len(c.before.byURL)
	next.RefreshDue = 0
	if first, ok := c.after.first(); ok && next.RefreshCount > 0 {
		next.RefreshDue = first
	}
}

// appendRefreshes keeps req's refreshing URLs (and stops) in v and
// returns how many were refused for req.RefreshCap (from the first new
// one beyond it, the rest, as the SQLite store does) and the ids of the
// stops that marked a kept schedule (AppendResult.Stopped).
func appendRefreshes(pk string, req hostqueue.AppendRequest, v *refreshView) (refused int, stopped []string) {
	n := len(v.byURL)
	now := req.Due.UnixMilli()
	for i, r := range req.Refreshes {
		old, exists := v.byURL[r.URL]
		switch {
		case exists && r.Stop:
			old.Flags |= refreshStop
			v.byURL[r.URL] = old.at(now)
			stopped = append(stopped, r.ID)
		case exists:
			// A resent URL takes the new interval and flags; its id, seq,
			// validators and due time stay.
			old.Every = r.Every.Milliseconds()
			old.Flags = r.Respec(old.Flags)
			v.byURL[r.URL] = old
		case n >= req.RefreshCap && !r.Stop:
			return len(req.Refreshes) - i, stopped
		default:
			// A stop for a URL with no schedule is kept too, due now: the
			// engine answers it (stopped, under its own id).
			due := now
			if !r.Stop {
				due = refresh.FirstDue(req.Due, r.Every, req.Key+" "+r.URL).UnixMilli()
				n++
			}
			v.byURL[r.URL] = toRefreshItem(pk, r, due)
		}
	}
	return 0, stopped
}

// commitRefreshes records c's refetches and ended schedules in v; a URL
// no longer kept is ignored, and a stop that came meanwhile keeps its due
// time (now), so it is not put off to the next cycle.
func commitRefreshes(pk string, c hostqueue.Commit, v *refreshView) {
	for _, r := range c.Refreshed {
		old, ok := v.byURL[r.URL]
		if !ok {
			continue
		}
		it := toRefreshItem(pk, r, r.Due.UnixMilli())
		it.ID, it.Hops = old.ID, old.Hops
		it.Flags = old.Flags&^refreshFailing | it.Flags&refreshFailing
		if old.Flags&refreshStop != 0 {
			it.SK = old.SK
		}
		v.byURL[r.URL] = it
	}
	for _, u := range c.RefreshEnded {
		delete(v.byURL, u)
	}
}

// refreshURLs are the URLs a commit changes.
func refreshURLs(c hostqueue.Commit) []string {
	out := make([]string, 0, len(c.Refreshed)+len(c.RefreshEnded))
	for _, r := range c.Refreshed {
		out = append(out, r.URL)
	}
	return append(out, c.RefreshEnded...)
}
