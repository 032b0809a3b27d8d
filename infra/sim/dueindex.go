package main

import "math"

// The built layout's due index as shared/aws/dynamo spreads it (layout.go,
// bucket.go there): each virtual shard's index items under dueSpread
// partition keys; a bucket per 5 s slot of the due time and sequence, a
// slot's buckets taking the sub-keys in turn from one the slot picks; a
// due list on its batch's sub-key; and each process (an ingest instance,
// a check invocation) remembering per shard and slot which bucket its
// adds go to. An add to a bucket that filled meanwhile (another process's
// adds) is refused, billed, and followed by a one-item consistent query a
// sub-key for the slot's newest bucket.

// dueSpread is shared/aws/dynamo's dueSpread.
const dueSpread = 4

// bucketSub is shared/aws/dynamo's bucketSub: the sub-key of a slot's bucket.
func bucketSub(slot int64, seq int) int { return int((slot + int64(seq)) % dueSpread) }

// slotKey is one slot (of bucketSpan) of one virtual shard.
type slotKey struct {
	vs   int
	slot int64
}

// positions is one process's bucket positions.
type positions map[slotKey]int

// openBucket is the newest bucket of a slot of a shard: its sequence
// number and how many adds it took.
type openBucket struct{ seq, fill int }

func dueKeyName(k int) string {
	if k%dueSpread == 0 {
		return "due index d#" + itoa(k/dueSpread)
	}
	return "due index d#" + itoa(k/dueSpread) + "#" + itoa(k%dueSpread)
}

// spreadAdd is Store.addToBucket: h's add, due at due, by the process
// whose positions are pos. It returns the wait.
func (s *Sim) spreadAdd(h *host, move bool, due int64, pos positions) int64 {
	d := &s.ddb
	v := int(h.vs)
	slot := max(due, s.now) / int64(bucketSpan)
	at := slotKey{v, slot}
	b := d.open[at]
	if b == nil {
		if len(d.open) > 1<<16 {
			for o := range d.open {
				if o.slot < s.now/int64(bucketSpan)-2 {
					delete(d.open, o)
				}
			}
		}
		b = &openBucket{}
		d.open[at] = b
		k := v*dueSpread + bucketSub(slot, 0)
		d.write(catIndex, &d.dueBins[k], dueKeyName(k), 1, -1, 0, -1) // its delete, later
	}
	var wait int64
	d.adds++
	if pos[at] < b.seq || b.fill >= bucketCap {
		// Refused: the bucket this process took for open is full. The
		// queries find the newest; a full one opens the next.
		k := v*dueSpread + bucketSub(slot, pos[at])
		w, _ := d.write(catIndex, &d.dueBins[k], dueKeyName(k), 1, -1, 0, -1)
		var r int64
		for sub := range dueSpread {
			rw, _ := d.read(catQuery, &d.dueBins[v*dueSpread+sub], 1, s.cfg.QueryLatency)
			r = max(r, rw)
		}
		wait += w + r
		d.refusedAdds++
		if b.fill >= bucketCap {
			b.seq, b.fill = b.seq+1, 0
			k := v*dueSpread + bucketSub(slot, b.seq)
			d.write(catIndex, &d.dueBins[k], dueKeyName(k), 1, -1, 0, -1) // its delete, later
		}
	}
	pos[at] = b.seq
	b.fill++
	k := v*dueSpread + bucketSub(slot, b.seq)
	w, _ := d.write(catIndex, &d.dueBins[k], dueKeyName(k), 1, -1, 0, -1)
	if move {
		d.read(catQuery, &h.bins, 1, s.cfg.DynamoLatency)
	}
	return wait + w
}

// queryDue is DueHosts' reads of shard v in the built layout: a
// consistent query of each sub-key (about returned hosts' entries in
// all). It returns the wait (side by side).
func (s *Sim) queryDue(v, returned int) int64 {
	var wait int64
	for sub := range dueSpread {
		k := v*dueSpread + sub
		units := math.Ceil(float64(max(1, returned/dueSpread)*listBytes) / 4096)
		w, _ := s.ddb.read(catQuery, &s.ddb.dueBins[k], units, s.cfg.QueryLatency)
		wait = max(wait, w)
	}
	return wait
}
