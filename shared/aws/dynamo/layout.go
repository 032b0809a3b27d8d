package dynamo

import (
	"strconv"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// The table layout. One table, all under pk/sk, no secondary index: these
// kinds of item, and the due index's below (robots and idempotency items
// have their own files):
//
//	host  pk "h#<key>", sk "h"       politeness state, the queue's inline tail,
//	                                 the ordered list of its chunks
//	chunk pk "h#<key>", sk "c#<id>"  an immutable run of queued entries
//	lease pk "s#<vshard>", sk "l"    which check invocation owns a virtual shard
//	refresh pk "h#<key>", sk "f#<due ms>#<url hash>"  a refreshing URL
//	                                 (refresh.go)
//
// Why this shape: DynamoDB bills a write on the whole item, so the host item
// is kept under ~1 KB and rewritten cheaply, while bulk URLs sit in chunks that
// are written once and deleted once (never rewritten as the queue drains: the
// host item records how far into the first chunk the queue has advanced).
//
// The due index, what a shard's check reads to find its hosts with work,
// is items of the table too, under dueSpread partition keys of the shard
// (its sub-keys, "d#<vshard>" for sub 0 and "d#<vshard>#<sub>" for the
// others), each sorted by time (a host with work is always named by one of
// them):
//
//	due list   pk "d#<vshard>[#<sub>]", sk "<due ms>#l#<batch>"  the hosts
//	                                 an ingest batch gave their first work,
//	                                 of one shard (from listMin of them)
//	due bucket pk "d#<vshard>[#<sub>]", sk "<slot ms>#b#<seq>"  every
//	                                 other host given an entry: a batch's
//	                                 lone hosts of a shard, and every move
//	                                 (a host released with work due later:
//	                                 a back-off, a run's end), by the 5 s
//	                                 slot of its due time, at most
//	                                 bucketCap hosts an item
//
// Why sub-keys: a partition key takes at most 1,000 write units a second
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html),
// and split-for-heat cannot split keys whose sort keys only grow in time,
// as these do. A slot's buckets take the shard's sub-keys in turn, from
// one the slot's time picks (bucket.go, bucketSub), and a list the sub-key
// of its batch, so a shard's writes spread over dueSpread keys as soon as
// they fill more than a bucket a slot; the check reads every sub-key of its
// shard and merges them by time (duelist.go, queryIndex). Sub 0 keeps the
// key the index had before it was spread, so items written before an
// upgrade are still read.
//
// Why: an entry in a secondary index (the design before, a GSI on the host
// item's shard and due time) costs a host two index writes (the put when it
// gets work, the delete when it leaves), which was half the write units of
// many small hosts. A due list names a whole batch's new hosts of one
// shard in one item, written once before their appends and deleted once; a
// bucket entry is one small conditional add, and the bucket's delete is
// shared by the hosts it holds. Leaving writes nothing but the host item:
// the host records the index item naming it and its due time (ix, dd), and
// an index item is deleted once every host it names has left it. See
// duelist.go for how that stays safe under crashes, races and lost answers.
const (
	hostPrefix  = "h#"
	shardPrefix = "s#"
	hostSK      = "h"
	chunkPrefix = "c#"
	leaseSK     = "l"
	duePrefix   = "d#"
	listMark    = "#l#"
	bucketMark  = "#b#"

	// dueSpread is how many partition keys a shard's due index spreads
	// over: four keys give a shard four times a key's 1,000 write units a
	// second, far above the simulation's planned peak (docs/benchmarks.md).
	// Each look of the check reads every one of them, a read unit each.
	dueSpread = 4

	// inlineBudget is the estimated size of the inline tail above which it is
	// spilled into a chunk: it keeps the host item within one write unit.
	inlineBudget = 700
	// maxChunkBytes keeps chunks well under DynamoDB's 400 KB item limit.
	maxChunkBytes = 64 << 10
)

// The item types below are the stored layout, and only this package sees
// them: the domain's types (hostqueue.Entry, hostqueue.Robots) carry no
// DynamoDB tags and are converted at the store's boundary. Field names say
// what they hold; the attribute names stay short, because every write of
// an item pays for its names as well as its values.

// hostItem is a host's state: politeness, the queue's inline tail and the
// ordered list of its chunks.
type hostItem struct {
	PK           string `dynamodbav:"pk"`
	SK           string `dynamodbav:"sk"`
	VirtualShard int    `dynamodbav:"vs"`
	// Listed is the sort key of the due-index item (a due list or a
	// bucket) that names the host, ListedDue when it is due (ms); both
	// empty while it has no work. Set by the write that gave it the entry
	// (on the version the index item names it at), cleared when it leaves
	// or moves.
	Listed    string `dynamodbav:"ix,omitempty"`
	ListedDue int64  `dynamodbav:"dd,omitempty"`
	Version   int64  `dynamodbav:"v"`
	// Nonces holds the nonces of the item's latest writes, newest first
	// (at most nonceHistory): Nonces[k] made version Version-k. A writer
	// whose answer was lost learns from it whether its write landed (see
	// store.go).
	Nonces     []string `dynamodbav:"n,omitempty"`
	LastFetch  int64    `dynamodbav:"lf,omitempty"` // ms
	PauseUntil int64    `dynamodbav:"pu,omitempty"` // ms
	Errors     int      `dynamodbav:"er,omitempty"`
	// FailingSince is when the host's current run of failures began (ms),
	// LastError the latest failure's text: the give-up bound is counted
	// from FailingSince.
	FailingSince int64  `dynamodbav:"fs,omitempty"`
	LastError    string `dynamodbav:"le,omitempty"`
	// RateDelay (ms), RateSince (ms) and LastTook (ms) are the delays the
	// host taught (politeness.State); absent means none learned. A few
	// bytes each: a host's writes stay in their size class.
	RateDelay int64 `dynamodbav:"rd,omitempty"`
	RateSince int64 `dynamodbav:"rs,omitempty"`
	LastTook  int64 `dynamodbav:"lt,omitempty"`
	// Origins holds the failure runs of the host's other origins
	// (politeness.EncodeOrigins): absent for a host with one origin that
	// answers, and at most politeness.MaxOrigins runs of a few hundred
	// bytes each otherwise, well inside the item's 400 KB.
	Origins string `dynamodbav:"og,omitempty"`
	// Tail is the queue's inline tail, after every chunk's entries.
	Tail []entryItem `dynamodbav:"q,omitempty"`
	// Chunks lists the queue's chunk items, oldest first; FirstChunkTaken
	// counts the entries of the first one already taken off the queue
	// (chunks are never rewritten as the queue drains).
	Chunks          []chunkRef     `dynamodbav:"c,omitempty"`
	FirstChunkTaken int            `dynamodbav:"co,omitempty"`
	Attempts        map[string]int `dynamodbav:"at,omitempty"`
	// TTL is when DynamoDB may delete an idle host (Unix seconds).
	TTL int64 `dynamodbav:"ttl,omitempty"`
	// SpilledSinceEmpty marks a host that has spilled chunks since its
	// queue was last empty: only such a host can have orphan chunks to
	// collect.
	SpilledSinceEmpty bool `dynamodbav:"hc,omitempty"`
	// Robots holds small robots.txt answers by origin (most are a bare
	// 404), written with the commit instead of as a robots item of their
	// own.
	Robots map[string]inlineRobots `dynamodbav:"rb,omitempty"`
	// RefreshCount counts the host's refresh items, RefreshDue is the
	// earliest due time among them (ms): refresh.go.
	RefreshCount int   `dynamodbav:"rn,omitempty"`
	RefreshDue   int64 `dynamodbav:"rf,omitempty"`
}

// entryItem is a queued URL as stored, in a host item's tail or a chunk.
// Its fields are hostqueue.Entry's, so the two convert into each other.
type entryItem struct {
	ID           string `dynamodbav:"i"`
	URL          string `dynamodbav:"u"`
	ETag         string `dynamodbav:"e,omitempty"`
	LastModified string `dynamodbav:"m,omitempty"`
	// ValidatorsURL is absent when the validators are the URL's own
	// (hostqueue.Entry.StoredValidatorsURL): most entries pay nothing.
	ValidatorsURL string `dynamodbav:"v,omitempty"`
	Hops          int    `dynamodbav:"h,omitempty"`
}

// toEntryItems is es in the stored form.
func toEntryItems(es []hostqueue.Entry) []entryItem {
	out := make([]entryItem, len(es))
	for i, e := range es {
		out[i] = entryItem(e)
		out[i].ValidatorsURL = e.StoredValidatorsURL()
	}
	return out
}

// toEntries is the domain's form of stored entries.
func toEntries(its []entryItem) []hostqueue.Entry {
	if its == nil {
		return nil
	}
	out := make([]hostqueue.Entry, len(its))
	for i, it := range its {
		out[i] = hostqueue.Entry(it)
	}
	return out
}

// inlineRobots is a robots.txt answer in a host item (Robots).
type inlineRobots struct {
	Status   int    `dynamodbav:"s"`
	GzipBody []byte `dynamodbav:"b,omitempty"`
	// FetchedAt is when it was fetched (ms).
	FetchedAt int64 `dynamodbav:"t"`
	// StoredApart marks an answer too large to ride here, stored in a
	// robots item of its own: without the mark a reader knows there is
	// none to look up.
	StoredApart bool `dynamodbav:"x,omitempty"`
}

// chunkRef names one of a host's chunks and how many entries it holds.
type chunkRef struct {
	ID    string `dynamodbav:"i"`
	Count int    `dynamodbav:"n"`
}

// chunkItem is an immutable run of queued entries.
type chunkItem struct {
	PK      string      `dynamodbav:"pk"`
	SK      string      `dynamodbav:"sk"`
	Entries []entryItem `dynamodbav:"q"`
	// WrittenAt is when the chunk was written (ms): orphans are collected
	// only once they are far older than any write in progress.
	WrittenAt int64 `dynamodbav:"t,omitempty"`
	// Nonce is the nonce of the host write the chunk was spilled for: a
	// writer that finds the chunk's key taken tells its own write, sent
	// again after its answer was lost, from another append's chunk.
	Nonce string `dynamodbav:"n,omitempty"`
}

// leaseItem is the lease on a virtual shard.
type leaseItem struct {
	PK    string `dynamodbav:"pk"`
	SK    string `dynamodbav:"sk"`
	Owner string `dynamodbav:"o"`
	Until int64  `dynamodbav:"u"` // ms
	// Nonce is the nonce of the write that made the lease: a run whose
	// lease write answered with an error learns from it whether it holds
	// it.
	Nonce string `dynamodbav:"n,omitempty"`
}

func hostPK(key string) string { return hostPrefix + key }
func shardPK(v int) string     { return shardPrefix + strconv.Itoa(v) }

// duePK is the partition key of sub-key sub of vshard v's due index; sub
// 0 is the key of the index before it was spread.
func duePK(v, sub int) string {
	if sub == 0 {
		return duePrefix + strconv.Itoa(v)
	}
	return duePrefix + strconv.Itoa(v) + "#" + strconv.Itoa(sub)
}

// pending counts the entries queued in a host item.
func (h *hostItem) pending() int {
	n := len(h.Tail)
	for _, c := range h.Chunks {
		n += c.Count
	}
	if len(h.Chunks) > 0 {
		n -= h.FirstChunkTaken
	}
	return n
}

// successor is the item a write on top of h starts from: the next version,
// under a nonce of its own.
func (h *hostItem) successor() *hostItem {
	next := *h
	next.Version = h.Version + 1
	next.Nonces = withNonce(h.Nonces, newNonce())
	return &next
}

// idle tells whether the host has no work and no entry: nobody works it,
// and an append may place it in another shard (AppendRequest.ShardFor).
func (h *hostItem) idle() bool { return h.pending() == 0 && !h.hasEntry() }

// hasEntry tells whether a due-index item names the host.
func (h *hostItem) hasEntry() bool { return h.Listed != "" }

// dueAt is when the host is due (ms); zero when it has no entry.
func (h *hostItem) dueAt() int64 { return h.ListedDue }

// needsEntry tells whether the host has work (queued, or refreshing URLs
// to fetch some day) and no entry: the write on top of it must give it one
// (activate) or it would never be found.
func (h *hostItem) needsEntry() bool { return h.hasWork() && !h.hasEntry() }

// hasWork tells whether the host has queued entries or refreshing URLs.
func (h *hostItem) hasWork() bool { return h.pending() > 0 || h.RefreshCount > 0 }

// workDue is when the host's work is due (ms) for a host whose queued
// entries are due at queued: its queue's time, or its earliest refresh
// when that comes first or the queue is empty.
func (h *hostItem) workDue(queued int64) int64 {
	if h.RefreshCount == 0 {
		return queued
	}
	if h.pending() == 0 {
		return h.RefreshDue
	}
	return min(queued, h.RefreshDue)
}

// activate keeps a host with work from expiring and gives it the entry sk
// (the index item that names it) due at due, when it needs one. It
// returns whether it did.
func (h *hostItem) activate(due time.Time, sk string) bool {
	if !h.hasWork() {
		return false
	}
	h.TTL = 0
	if h.hasEntry() {
		return false
	}
	h.Listed, h.ListedDue = sk, due.UnixMilli()
	return true
}

// recordProgress applies a commit's politeness state and failed-attempt
// counters (kept only for entries still queued).
func (h *hostItem) recordProgress(c hostqueue.Commit, done map[string]bool) {
	if lf := c.LastFetch.UnixMilli(); !c.LastFetch.IsZero() && lf > h.LastFetch {
		h.LastFetch = lf
	}
	h.PauseUntil = 0
	if !c.PauseUntil.IsZero() {
		h.PauseUntil = c.PauseUntil.UnixMilli()
	}
	h.Errors = c.Errors
	h.FailingSince, h.LastError = 0, clip(c.LastError, maxLastError)
	if !c.FailingSince.IsZero() {
		h.FailingSince = c.FailingSince.UnixMilli()
	}
	h.RateDelay, h.RateSince, h.LastTook = c.RateDelay.Milliseconds(), 0, c.LastTook.Milliseconds()
	h.Origins = politeness.EncodeOrigins(c.State)
	if !c.RateSince.IsZero() {
		h.RateSince = c.RateSince.UnixMilli()
	}
	h.Attempts = nil
	for id, n := range c.Attempts {
		if !done[id] && n > 0 {
			if h.Attempts == nil {
				h.Attempts = map[string]int{}
			}
			h.Attempts[id] = n
		}
	}
}

// release ends the holder's work on the host (Commit.Release): with work
// left it is due again at NextDue, which needs a new entry (the host is
// left without one: the commit then adds it to a bucket, see needsEntry),
// or, with Continue, stays due as it is; drained, it leaves the due index
// and its state expires IdleTTL from now. Leaving writes nothing but the
// host item: an index item is deleted once every host it names has left
// it (duelist.go).
func (h *hostItem) release(c hostqueue.Commit, now func() time.Time) {
	if h.pending() > 0 {
		// Continue leaves the entry alone: the host is still due (it was
		// when the holder took it), and keeping it costs no index write.
		if !c.Continue || !h.hasEntry() {
			h.Listed, h.ListedDue = "", 0
		}
		h.TTL = 0
		return
	}
	h.Listed, h.ListedDue = "", 0
	if h.RefreshCount > 0 {
		// Only refreshes wait: the commit names it in the bucket of the
		// earliest (see commitOp.write); it never expires meanwhile. The
		// attempts stay: they are the refreshing URLs' failed ones,
		// counted to MaxAttempts across sessions.
		h.TTL = 0
		return
	}
	h.Attempts = nil
	h.TTL = now().Add(c.IdleTTL).Unix()
}

// entrySize estimates an entry's stored size in bytes, the way DynamoDB
// counts it (names plus values plus a little per-map overhead).
func entrySize(e entryItem) int {
	n := 8 + len(e.ID) + len(e.URL)
	if e.ETag != "" {
		n += 1 + len(e.ETag)
	}
	if e.LastModified != "" {
		n += 1 + len(e.LastModified)
	}
	if e.ValidatorsURL != "" {
		n += 1 + len(e.ValidatorsURL)
	}
	return n
}

func entriesSize(es []entryItem) int {
	n := 0
	for _, e := range es {
		n += entrySize(e)
	}
	return n
}
