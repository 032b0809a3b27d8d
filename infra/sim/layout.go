package main

import "time"

// Layout is how the due index is stored: what the store writes when a
// host gets work, when its due time moves and when it leaves.
// LayoutListsBuckets is shared/aws/dynamo's (the default); LayoutGSI is what it
// replaced, and the others are designs priced against it on the same runs
// (`sim -cost`). Which hosts are due, and when, is the
// same in every layout (the model's heap of due hosts): a layout changes
// what is billed, and the page says what each would have to do to keep
// the guarantees.
type Layout int

const (
	// LayoutGSI is shared/aws/dynamo's before the due lists and buckets: the
	// host item's (vs, due) in the KEYS_ONLY GSI, a put when a host enters, a delete when it leaves,
	// both when its due time moves.
	LayoutGSI Layout = iota
	// LayoutBatchList: each ingest invocation writes, before its appends,
	// one item per virtual shard listing the hosts of its batch that get
	// work (~30 bytes a host); the check consumes it and deletes it once
	// every host in it has been committed. A listed host has no GSI entry
	// and leaves without an index write; only a host released with work
	// left for later (a back-off, a run's end) gets one, as today.
	LayoutBatchList
	// LayoutBuckets: the index is items of its own, pk "d#<vs>", sk a
	// time bucket (bucketSpan) and a sequence, each a set of at most
	// bucketCap host keys (so an add stays one write unit: an update is
	// billed on the whole item). Entering or moving is one conditional add
	// ("not closed, not full"), written before the host item; leaving
	// writes nothing, the entry goes with its bucket, which the check
	// closes once past (a conditional write), reads once more and
	// deletes. A full bucket costs the add that finds it full.
	LayoutBuckets
	// LayoutBucketsTTL: the same, the closed bucket left to DynamoDB's
	// TTL (free) instead of deleted.
	LayoutBucketsTTL
	// LayoutExpire: today's GSI, but a host that leaves keeps its entry
	// (no delete); it must then be skipped by the due query, which needs a
	// lower bound on due that only grows (see the page: on an eventually
	// consistent index that bound can skip a host that has work). A host
	// coming back moves its stale entry: delete and put.
	LayoutExpire
	// LayoutListsBuckets (shared/aws/dynamo's, duelist.go and bucket.go): a
	// due list for the hosts of a batch that has at
	// least listMin of them on a shard, and a bucket add (TTL deletes)
	// for the others and for every move: each host takes the cheaper of
	// the two.
	LayoutListsBuckets
	nLayouts
)

var layoutNames = [nLayouts]string{
	"GSI entry per host (before)",
	"due list per ingest batch and shard",
	"time buckets",
	"time buckets, TTL deletes",
	"index entry left to expire",
	"due lists, buckets for the rest (built)",
}

const (
	bucketCap  = 30              // host keys of ~30 bytes: one write unit
	bucketSpan = 5 * time.Second // CheckHostPeriod: due times are staggered within it anyway
	listBytes  = 30              // a host key in a due list or bucket
	// listMin: a list of n hosts costs two writes (put, delete) of
	// 60 + 30n bytes, bucket adds n (and their share of the bucket's
	// close): a list is the cheaper from three hosts.
	listMin = 3
)

func layoutName(c Config) string {
	n := layoutNames[c.Layout]
	if c.LingerRun {
		n += ", one session per host"
	}
	return n
}

// index events, what the store does to a host's index entry.
type indexEvent int

const (
	idxEnter indexEvent = iota // the host gets work and has no entry
	idxMove                    // its due time changes
	idxLeave                   // it has no work left
)

// indexWrite returns the GSI units the host item's write carries for ev
// in the configured layout (g its GSI key, -1 for none), charging first
// the index items a layout writes apart from the host item, and returns
// their wait. fromIngest: the host enters from an ingest batch.
// due is when the host is due after the write; pos is the bucket
// positions of the process that writes (an ingest instance's, a check
// invocation's).
func (s *Sim) indexWrite(h *host, ev indexEvent, fromIngest bool, due int64, pos positions) (g int, gsiUnits float64, wait int64) {
	key := s.gsiKey(h)
	switch s.cfg.Layout {
	case LayoutListsBuckets:
		switch {
		case ev == idxEnter && fromIngest && h.named:
			h.named, h.listed = false, true
			return -1, 0, 0
		case ev == idxLeave:
			h.listed = false
			return -1, 0, 0
		}
		h.listed = false
		return -1, 0, s.spreadAdd(h, ev == idxMove, due, pos)
	case LayoutBatchList:
		if h.listed {
			h.listed = ev == idxEnter
			if ev == idxMove {
				return key, 1, 0 // out of its list into the GSI
			}
			return -1, 0, 0
		}
		if ev == idxEnter && fromIngest && h.named {
			h.named, h.listed = false, true // its batch's list names it
			return -1, 0, 0
		}
	case LayoutBuckets, LayoutBucketsTTL:
		if ev == idxLeave {
			return -1, 0, 0
		}
		return -1, 0, s.bucketAdd(h, ev == idxMove)
	case LayoutExpire:
		switch {
		case ev == idxLeave:
			h.stale = true
			return -1, 0, 0
		case ev == idxEnter && h.stale:
			h.stale = false
			return key, 2, 0
		}
	}
	// Today's GSI.
	if ev == idxMove {
		return key, 2, 0 // a key change: delete and put
	}
	return key, 1, 0
}

// bucketAdd adds h to the bucket of now on its virtual shard's index
// partition (a new bucket when the span has passed or the bucket is full:
// the add that finds it full is billed too) and charges a new bucket's
// close and, without TTL, its delete. A move leaves a stale entry in the
// old bucket: one more host-item read when that bucket is read.
func (s *Sim) bucketAdd(h *host, move bool) int64 {
	d := &s.ddb
	v := int(h.vs)
	b := &d.buckets[v]
	name := "due bucket vs=" + itoa(v)
	bins := &d.bucketBins[v]
	var wait int64
	slot := s.now / int64(bucketSpan)
	if slot != b.slot || b.fill >= bucketCap {
		if slot == b.slot {
			w, _ := d.write(catIndex, bins, name, 1, -1, 0, -1)
			wait += w
		}
		b.slot, b.fill = slot, 0
		d.write(catIndex, bins, name, 1, -1, 0, -1) // its close, later
		if s.cfg.Layout == LayoutBuckets {
			d.write(catIndex, bins, name, 1, -1, 0, -1) // its delete, later
		}
	}
	b.fill++
	w, _ := d.write(catIndex, bins, name, 1, -1, 0, -1)
	if move {
		d.read(catQuery, &h.bins, 1, s.cfg.DynamoLatency)
	}
	return wait + w
}

// bucket is one virtual shard's open bucket.
type bucket struct {
	slot int64
	fill int
}

// writeLists is LayoutBatchList's (and LayoutListsBuckets') ingest step: before its appends, one
// due-list item per virtual shard naming the batch's hosts that have no
// entry yet (written once, deleted once when consumed; both charged now).
// It returns the wait (the shards' items side by side).
func (s *Sim) writeLists(hosts []*host, vshards int) int64 {
	byVS := map[int][]*host{}
	for _, h := range hosts {
		if !h.inIndex {
			v := int(h.vs)
			if v < 0 || !h.exists {
				v = s.placeOf(h, vshards)
			}
			byVS[v] = append(byVS[v], h)
		}
	}
	least := 1
	if s.cfg.Layout == LayoutListsBuckets {
		least = listMin
	}
	var wait int64
	d := &s.ddb
	for v := range vshards {
		n := len(byVS[v])
		if n == 0 || n < least {
			continue
		}
		for _, h := range byVS[v] {
			h.named = true
		}
		units := writeUnits(0, 60+listBytes*n)
		bins, name := &d.bucketBins[v], "due list vs="+itoa(v)
		if s.cfg.Layout == LayoutListsBuckets {
			// The sub-key of the list's batch (shared/aws/dynamo's putLists).
			k := v*dueSpread + s.rng.IntN(dueSpread)
			bins, name = &d.dueBins[k], dueKeyName(k)
		}
		w, _ := d.write(catIndex, bins, name, units, -1, 0, -1)
		d.write(catIndex, bins, name, units, -1, 0, -1) // its delete
		d.read(catQuery, bins, readUnits(60+listBytes*n), s.cfg.DynamoLatency)
		wait = max(wait, w)
	}
	return wait
}
