package dynamo

import (
	"strconv"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/shared/hostqueue"
)

// The table layout. One table, three kinds of item, all under pk/sk:
//
//	host  pk "h#<key>", sk "h"       politeness state, the queue's inline tail,
//	                                 the ordered list of its chunks
//	chunk pk "h#<key>", sk "c#<id>"  an immutable run of queued entries
//	lease pk "s#<vshard>", sk "l"    which check invocation owns a virtual shard
//
// Why this shape: DynamoDB bills a write on the whole item, so the host item
// is kept under ~1 KB and rewritten cheaply, while bulk URLs sit in chunks that
// are written once and deleted once (never rewritten as the queue drains: the
// host item records how far into the first chunk the queue has advanced).
// A host is in the sparse GSI due-index (vs, due) only while it has work.
const (
	hostPrefix  = "h#"
	shardPrefix = "s#"
	hostSK      = "h"
	chunkPrefix = "c#"
	leaseSK     = "l"

	// DueIndex is the GSI on (vs, due), KEYS_ONLY.
	DueIndex = "due-index"

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
	// Due is when the host is next checked (ms); absent (zero) keeps the
	// host out of the sparse due-index.
	Due     int64 `dynamodbav:"due,omitempty"`
	Version int64 `dynamodbav:"v"`
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

func keyOfPK(pk string) (string, bool) {
	return strings.CutPrefix(pk, hostPrefix)
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

// activate puts a host with work into the due index at due, unless it is
// there already, and keeps its state from expiring. It returns whether it
// put the host there.
func (h *hostItem) activate(due time.Time) bool {
	if h.pending() == 0 {
		return false
	}
	h.TTL = 0
	if h.Due != 0 {
		return false
	}
	h.Due = due.UnixMilli()
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
// left it is due again at NextDue (or, with Continue, stays due as it is);
// drained, it leaves the due index and its state expires IdleTTL from now.
func (h *hostItem) release(c hostqueue.Commit, now func() time.Time) {
	if h.pending() > 0 {
		// Continue leaves Due alone: the host is still due (it was when
		// the holder took it), and an unchanged index key costs no index
		// write.
		if !c.Continue || h.Due == 0 {
			h.Due = c.NextDue.UnixMilli()
		}
		h.TTL = 0
		return
	}
	h.Due = 0
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
