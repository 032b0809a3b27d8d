package dynamo

import (
	"strconv"
	"strings"

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

type hostItem struct {
	PK  string `dynamodbav:"pk"`
	SK  string `dynamodbav:"sk"`
	VS  int    `dynamodbav:"vs"`
	Due int64  `dynamodbav:"due,omitempty"`
	V   int64  `dynamodbav:"v"`
	// N holds the nonces of the item's latest writes, newest first (at
	// most nonceHistory): N[k] made version V-k. A writer whose answer was
	// lost learns from it whether its write landed (see store.go).
	N  []string `dynamodbav:"n,omitempty"`
	LF int64    `dynamodbav:"lf,omitempty"`
	PU int64    `dynamodbav:"pu,omitempty"`
	ER int      `dynamodbav:"er,omitempty"`
	// FS is when the host's current run of failures began (ms), LE the
	// latest failure's text: the give-up bound is counted from FS.
	FS  int64             `dynamodbav:"fs,omitempty"`
	LE  string            `dynamodbav:"le,omitempty"`
	Q   []hostqueue.Entry `dynamodbav:"q,omitempty"`
	C   []chunkRef        `dynamodbav:"c,omitempty"`
	CO  int               `dynamodbav:"co,omitempty"`
	AT  map[string]int    `dynamodbav:"at,omitempty"`
	TTL int64             `dynamodbav:"ttl,omitempty"`
	// HC marks a host that has spilled chunks since its queue was last
	// empty: only such a host can have orphan chunks to collect.
	HC bool `dynamodbav:"hc,omitempty"`
	// RB holds small robots.txt answers by origin (most are a bare 404),
	// written with the commit instead of as a robots item of their own.
	RB map[string]inlineRobots `dynamodbav:"rb,omitempty"`
}

type inlineRobots struct {
	S int    `dynamodbav:"s"`
	B []byte `dynamodbav:"b,omitempty"` // gzip
	T int64  `dynamodbav:"t"`
	// X marks an answer too large to ride here, stored in a robots item of
	// its own: without the mark a reader knows there is none to look up.
	X bool `dynamodbav:"x,omitempty"`
}

type chunkRef struct {
	ID string `dynamodbav:"i"`
	N  int    `dynamodbav:"n"`
}

type chunkItem struct {
	PK string            `dynamodbav:"pk"`
	SK string            `dynamodbav:"sk"`
	Q  []hostqueue.Entry `dynamodbav:"q"`
	// T is when the chunk was written (ms): orphans are collected only
	// once they are far older than any write in progress.
	T int64 `dynamodbav:"t,omitempty"`
	// N is the nonce of the host write the chunk was spilled for: a
	// writer that finds the chunk's key taken tells its own write, sent
	// again after its answer was lost, from another append's chunk.
	N string `dynamodbav:"n,omitempty"`
}

type leaseItem struct {
	PK    string `dynamodbav:"pk"`
	SK    string `dynamodbav:"sk"`
	Owner string `dynamodbav:"o"`
	Until int64  `dynamodbav:"u"`
	// N is the nonce of the write that made the lease: a run whose lease
	// write answered with an error learns from it whether it holds it.
	N string `dynamodbav:"n,omitempty"`
}

func hostPK(key string) string { return hostPrefix + key }
func shardPK(v int) string     { return shardPrefix + strconv.Itoa(v) }

func keyOfPK(pk string) (string, bool) {
	return strings.CutPrefix(pk, hostPrefix)
}

// pending counts the entries queued in a host item.
func (h *hostItem) pending() int {
	n := len(h.Q)
	for _, c := range h.C {
		n += c.N
	}
	if len(h.C) > 0 {
		n -= h.CO
	}
	return n
}

// entrySize estimates an entry's stored size in bytes, the way DynamoDB
// counts it (names plus values plus a little per-map overhead).
func entrySize(e hostqueue.Entry) int {
	n := 8 + len(e.ID) + len(e.URL)
	if e.ETag != "" {
		n += 1 + len(e.ETag)
	}
	if e.LastModified != "" {
		n += 1 + len(e.LastModified)
	}
	return n
}

func entriesSize(es []hostqueue.Entry) int {
	n := 0
	for _, e := range es {
		n += entrySize(e)
	}
	return n
}
