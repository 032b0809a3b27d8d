package main

import (
	"container/heap"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// The host-queue store, as shared/aws/dynamo implements hostqueue.Store, on the
// DynamoDB model: which items each call reads and writes, with what sizes,
// and what the due index sees. Evict is the product's own.

const (
	inlineBudget  = 700      // dynamo.inlineBudget
	maxChunkBytes = 64 << 10 // dynamo.maxChunkBytes
)

// dueEntry is a host waiting in the due index for a worker.
type dueEntry struct {
	due int64
	h   *host
	ver uint32
}

type dueHeap []dueEntry

func (q dueHeap) Len() int { return len(q) }
func (q dueHeap) Less(i, j int) bool {
	if q[i].due != q[j].due {
		return q[i].due < q[j].due
	}
	return q[i].h.rank < q[j].h.rank
}
func (q dueHeap) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *dueHeap) Push(x any)   { *q = append(*q, x.(dueEntry)) }
func (q *dueHeap) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// live reports whether a heap entry still stands for a waiting host.
func (e dueEntry) live() bool { return e.h.inIndex && e.ver == e.h.ver && e.h.session == nil }

// setIndexed records whether h is in the due index, and counts the hosts
// that are (a list's run settles when none is).
func (s *Sim) setIndexed(h *host, in bool) {
	if h.inIndex != in {
		s.indexed += map[bool]int{true: 1, false: -1}[in]
	}
	h.inIndex = in
}

// offer puts h (in the index, not held by a worker) into its key's heap.
func (s *Sim) offer(h *host) {
	if !h.inIndex || h.session != nil {
		return
	}
	h.ver++
	heap.Push(&s.due[s.gsiKey(h)], dueEntry{due: h.due, h: h, ver: h.ver})
}

// firstDue returns the earliest due time of a waiting host under GSI key
// k, or false.
func (s *Sim) firstDue(k int) (int64, bool) {
	q := &s.due[k]
	for q.Len() > 0 {
		if e := (*q)[0]; e.live() {
			return e.due, true
		}
		heap.Pop(q)
	}
	return 0, false
}

// takeDue pops the earliest waiting host due at or before t.
func (s *Sim) takeDue(k int, t int64) *host {
	q := &s.due[k]
	for q.Len() > 0 {
		e := (*q)[0]
		if !e.live() {
			heap.Pop(q)
			continue
		}
		if e.due > t {
			return nil
		}
		heap.Pop(q)
		return e.h
	}
	return nil
}

// popHead removes entries from the head of h's queue, as Store.popHead
// does: n of them (n >= 0), or, with n < 0, as long as the head entry's id
// is in done (an id no longer queued, evicted meanwhile, is ignored). It
// returns the write units of the chunk items that become empty (deleted).
func (s *Sim) popHead(h *host, n int, done map[int32]bool) (deadUnits float64) {
	take := func() bool {
		if h.pending() == 0 {
			return false
		}
		if n >= 0 {
			return n > 0
		}
		return done[h.q[h.qh]]
	}
	for take() {
		h.qh++
		n--
		if len(h.chunks) > 0 {
			h.co++
			if h.co == h.chunks[0].n {
				deadUnits += writeUnits(int(h.chunks[0].bytes), 0)
				h.chunks = h.chunks[1:]
				h.co = 0
			}
		}
	}
	if h.qh > 1024 && h.qh*2 > len(h.q) {
		h.q = append([]int32(nil), h.q[h.qh:]...)
		h.qh = 0
	}
	return deadUnits
}

// head returns up to n ids from the head of h's queue (Store.Load's want).
func head(h *host, n int) []int32 {
	return append([]int32(nil), h.q[h.qh:h.qh+min(n, h.pending())]...)
}

// spill moves the inline tail into chunks when it outgrows the budget, as
// Store.spill does, and returns the chunks' write units.
func (s *Sim) spill(h *host) (units float64, n int) {
	inline := h.pending() - h.chunked()
	eb := s.cfg.Web.EntryBytes
	if inline*eb <= inlineBudget {
		return 0, 0
	}
	per := max(1, maxChunkBytes/eb)
	for inline > 0 {
		k := min(inline, per)
		h.chunks = append(h.chunks, chunk{n: int32(k), bytes: int32(k * eb)})
		units += writeUnits(0, k*eb)
		inline -= k
		n++
	}
	return units, n
}

// conflictWait models the version condition: a write whose read came
// before another write to the item landed fails its condition (billed like
// a write) and is tried again after the store's jittered back-off. It
// returns the extra wait.
func (s *Sim) conflictWait(h *host, units float64) int64 {
	var wait int64
	for attempt := 1; h.lastWrite > s.now+wait && attempt < 50; attempt++ {
		s.m.conflicts++
		w, _ := s.ddb.write(catCommit, &h.bins, h.key, units, -1, 0, -1)
		back := int64(1<<min(attempt, 6)) * ms
		wait = h.lastWrite - s.now + w/2 + back/2 + int64(s.rng.Float64()*float64(back))
	}
	return wait
}

// appendHost is Store.Append for one host's group of an ingest batch:
// read the item, evict past PersistLimit (reporting the evicted URLs
// first), write spilled chunks, then the item, and the due index when the
// host becomes active. evicted are the URLs evicted (oldest first).
func (s *Sim) appendHost(h *host, ids []int32, dueAt int64, vshards int, pos positions) (wait int64, ok, activated bool, evicted []int32) {
	old := h.itemSize(s.cfg.Web)
	w, ok := s.ddb.read(catAppend, &h.bins, readUnits(old), s.cfg.DynamoLatency)
	wait += w
	if !ok {
		return wait, false, false, nil
	}
	wait += s.conflictWait(h, writeUnits(old, old))
	fromPending, fromIncoming := hostqueue.Evict(h.pending(), len(ids), s.cfg.P.PersistLimit)
	if fromPending > 0 {
		evicted = append(evicted, h.q[h.qh:h.qh+fromPending]...)
	}
	evicted = append(evicted, ids[:fromIncoming]...)
	// The evicted URLs are published before the write (OnEvict); the
	// caller accounts for that publish.
	deadUnits := s.popHead(h, fromPending, nil)
	h.q = append(h.q, ids[fromIncoming:]...)
	chunkUnits, chunks := s.spill(h)
	for i := 0; i < chunks; i++ {
		cw, cok := s.ddb.write(catChunk, &h.bins, h.key, chunkUnits/float64(chunks), -1, 0, -1)
		wait += cw
		if !cok {
			return wait, false, false, evicted
		}
	}
	g, g2 := -1, -1
	gsiUnits := 0.0
	listed, stale := h.listed, h.stale
	if h.vs < 0 {
		h.vs = int32(s.placeOf(h, vshards))
	}
	entering := false
	if !h.inIndex && h.pending() > 0 {
		if !h.exists || s.cfg.Migrate != nil {
			// A new item takes the virtual shard of the deployment that
			// writes it; under a migration an item entering the due index
			// takes it too (it is in no shard's index now, so no worker
			// holds it: moving it cannot strand it or give it two owners).
			h.vs = int32(s.placeOf(h, vshards))
		}
		var iw int64
		g, gsiUnits, iw = s.indexWrite(h, idxEnter, true, dueAt, pos)
		wait += iw
		entering = true
	}
	nw := h.itemSize(s.cfg.Web)
	ww, wok := s.ddb.write(catAppend, &h.bins, h.key, writeUnits(old, nw), g, gsiUnits, g2)
	wait += ww
	if !wok {
		// The URLs are not queued; the caller hands the record back.
		h.q = h.q[:len(h.q)-(len(ids)-fromIncoming)]
		h.listed, h.stale = listed, stale
		return wait, false, false, evicted
	}
	if deadUnits > 0 {
		s.ddb.write(catChunk, &h.bins, h.key, deadUnits, -1, 0, -1)
	}
	h.exists = true
	s.m.appends++
	h.itemBytes = int32(nw)
	h.lastWrite = s.now + wait
	if entering {
		s.setIndexed(h, true)
		h.due = dueAt
		activated = true
		s.offer(h)
	}
	return wait, true, activated, evicted
}

// loadHost is Store.Load: the host item and, when the head is in a chunk,
// that chunk (the store caches chunks per instance; a session on another
// instance reads it again).
func (s *Sim) loadHost(h *host) (int64, bool) {
	w, ok := s.ddb.read(catLoad, &h.bins, readUnits(h.itemSize(s.cfg.Web)), s.cfg.DynamoLatency)
	if ok && len(h.chunks) > 0 {
		cw, cok := s.ddb.read(catLoad, &h.bins, readUnits(int(h.chunks[0].bytes)), s.cfg.DynamoLatency)
		w += cw
		ok = cok
	}
	return w, ok
}

// commitReq is a hostqueue.Commit as the model needs it.
type commitReq struct {
	done    map[int32]bool // entries finished (removed from the head)
	release bool
	cont    bool // Continue
	nextDue int64
	robots  bool // a robots.txt answer is stored with it
}

// commitHost is Store.Commit: read, pop the done head, write the item
// (with small robots.txt answers), delete emptied chunks, and move or
// remove the due-index entry when the holder releases the host. Larger
// robots.txt answers are a write of their own.
func (s *Sim) commitHost(h *host, c commitReq, w *session) (int64, bool) {
	var wait int64
	if c.robots && h.robotsKind == robotsLarge {
		rw, _ := s.ddb.write(catRobots, &h.bins, h.key, writeUnits(0, robotsItemBytes), -1, 0, -1)
		wait += rw
	}
	old := h.itemSize(s.cfg.Web)
	rw, ok := s.ddb.read(catCommit, &h.bins, readUnits(old), s.cfg.DynamoLatency)
	wait += rw
	if !ok {
		return wait, false
	}
	wait += s.conflictWait(h, writeUnits(old, old))
	q, qh, co, chunks := h.q, h.qh, h.co, h.chunks
	deadUnits := s.popHead(h, -1, c.done)
	if c.robots {
		h.robotsAt = w.robotsAt
	}
	g, g2, gsiUnits := -1, -1, 0.0
	leave := false
	newDue := h.due
	listed, stale := h.listed, h.stale
	if c.release {
		var iw int64
		if h.pending() > 0 {
			if !c.cont || !h.inIndex {
				newDue = c.nextDue
				if !h.inIndex {
					g, gsiUnits, iw = s.indexWrite(h, idxEnter, false, newDue, w.r.inv.pos)
				} else if newDue != h.due {
					g, gsiUnits, iw = s.indexWrite(h, idxMove, false, newDue, w.r.inv.pos)
				}
			}
		} else if h.inIndex {
			leave = true
			g, gsiUnits, iw = s.indexWrite(h, idxLeave, false, newDue, w.r.inv.pos)
		}
		wait += iw
	}
	nw := h.itemSize(s.cfg.Web)
	ww, wok := s.ddb.write(catCommit, &h.bins, h.key, writeUnits(old, nw), g, gsiUnits, g2)
	wait += ww
	if !wok {
		// Undo: the entries stay queued (they will be fetched again).
		h.q, h.qh, h.co, h.chunks = q, qh, co, chunks
		h.listed, h.stale = listed, stale
		return wait, false
	}
	if deadUnits > 0 {
		s.ddb.write(catChunk, &h.bins, h.key, deadUnits, -1, 0, -1)
	}
	h.lastWrite = s.now + wait
	h.itemBytes = int32(nw)
	if c.release {
		if leave {
			s.setIndexed(h, false)
			h.due = 0
			h.attempts = nil
		} else if h.pending() > 0 {
			s.setIndexed(h, true)
			h.due = newDue
		}
	}
	return wait, true
}

// lease is a virtual shard's lease item.
type lease struct {
	owner *run
	until int64
}

// acquire is Store.AcquireShard: a conditional put that succeeds when the
// lease is free, expired or the caller's. A run whose last attempt found
// another holder reads first (Store.contended) and writes only when free.
// An error (throttled past the SDK's retries) leaves the run's known
// expiry as it was, as run.renew does.
func (s *Sim) acquire(v int, r *run, until int64) (wait int64, held, errored bool) {
	l := &s.leases[v]
	free := l.owner == nil || l.until < s.now || l.owner == r
	if !free && r.contended[v] {
		w, ok := s.ddb.read(catLease, &s.ddb.lease[v], 1, s.cfg.DynamoLatency)
		return w, false, !ok
	}
	w, ok := s.ddb.write(catLease, &s.ddb.lease[v], "lease s#"+itoa(v), 1, -1, 0, -1)
	if !ok {
		return w, false, true
	}
	if !free {
		r.contended[v] = true
		return w, false, false
	}
	delete(r.contended, v)
	l.owner, l.until = r, until
	return w, true, false
}

// releaseLease is Store.ReleaseShard.
func (s *Sim) releaseLease(v int, r *run) int64 {
	l := &s.leases[v]
	w, _ := s.ddb.write(catLease, &s.ddb.lease[v], "lease s#"+itoa(v), 1, -1, 0, -1)
	if l.owner == r {
		l.owner, l.until = nil, 0
	}
	return w
}
