package main

import "math"

// The DynamoDB model.
//
// Throughput: every partition key (a host's items, a shard's lease item, a
// due-index key) serves at most KeyWriteLimit write units and KeyReadLimit
// read units in any one second, table and GSI alike (AWS: "each individual
// partition is limited to 1,000 write units per second and 3,000 read units
// per second"; a hot GSI partition throttles the table writes that feed it).
// A request that would go past its key's limit in its second is throttled
// and not billed. The table as a whole, and the GSI, serve at once up to
// their warm throughput (4,000 write and 12,000 read units a second for a
// new on-demand table) and after that up to twice the highest one-minute
// average seen before ("throttling can occur if the throughput exceeds
// twice the previous peak within the same 30 minutes").
//
// Billing (on demand, as internal/billing meters it on moto): a write costs
// ceil(max(old, new) / 1 KB) units, a failed condition the same; a read
// ceil(size / 4 KB), half when eventually consistent; the KEYS_ONLY due
// index a put when a host enters it, a delete when it leaves, both when its
// due time changes.
//
// Retries: the SDK's standard retryer (aws-sdk-go-v2 v1.48, retry package):
// 3 attempts, the legacy backoff rand[0,1) x 2^attempt seconds. A request
// throttled three times fails to its caller.

// keyBins counts one partition key's units in the last few seconds.
type keyBins struct {
	sec [4]int64
	w   [4]float32
	r   [4]float32
}

// add charges units at second sc if the limit allows; it returns the new
// total, or -1 when the request is throttled.
func (b *keyBins) add(sc int64, units, limit float64, write bool) float64 {
	i := sc & 3
	if b.sec[i] != sc {
		b.sec[i], b.w[i], b.r[i] = sc, 0, 0
	}
	cur := &b.r[i]
	if write {
		cur = &b.w[i]
	}
	if float64(*cur)+units > limit && *cur > 0 {
		return -1
	}
	*cur += float32(units)
	return float64(*cur)
}

// peek returns the units charged at second sc.
func (b *keyBins) peek(sc int64, write bool) float64 {
	i := sc & 3
	if b.sec[i] != sc {
		return 0
	}
	if write {
		return float64(b.w[i])
	}
	return float64(b.r[i])
}

// level is a table's (or the GSI's) total throughput against its warm
// throughput and previous peak.
type level struct {
	warm     float64
	secT     int64
	secUnits float64
	minT     int64
	minPeak  float64 // busiest second of the current minute
	peak     float64 // busiest second of the minutes before
}

// capacity is what the table serves at once: its warm throughput, or
// twice the busiest second of the minutes before, so it can double every
// minute (the model's reading of "up to double the previous peak").
func (l *level) capacity() float64 { return math.Max(l.warm, 2*l.peak) }

func (l *level) add(sc int64, units float64) bool {
	if m := sc / 60; m != l.minT {
		l.peak = math.Max(l.peak, l.minPeak)
		l.minT, l.minPeak = m, 0
	}
	if sc != l.secT {
		l.secT, l.secUnits = sc, 0
	}
	if l.secUnits+units > l.capacity() {
		return false
	}
	l.secUnits += units
	l.minPeak = math.Max(l.minPeak, l.secUnits)
	return true
}

func (l *level) refund(units float64) { l.secUnits -= units }

// Billing categories.
type cat int

const (
	catAppend cat = iota
	catCommit
	catChunk
	catLoad
	catLease
	catQuery
	catRobots
	catGSI
	catIndex // the due index's own items in the layouts that have them (layout.go)
	catGate  // a design's gate items per server address (gate.go)
	nCats
)

var catNames = [nCats]string{"host append", "host commit", "chunks", "host load", "leases", "due queries", "robots items", "due index (GSI)", "due index items", "server gate"}

type dynamoModel struct {
	s          *Sim
	gsi        []keyBins // by GSI partition key
	lease      []keyBins // by virtual shard
	table, idx level
	tableR     level

	// Billed units by category, and the same units counted where they
	// were charged (by key class): the two must agree ("units conserved").
	wByCat, rByCat         [nCats]float64
	wByKey, rByKey         float64
	throttled              map[string]int64
	failed                 map[string]int64
	hotGSI, hotTable       float64 // highest one-second write units on one key
	hotGSIKey, hotTableKey string
	hotRead                float64
	requests               map[string]int64
	gsiWritesByKey         []float64
	// The index's own items, by virtual shard (layout.go).
	bucketBins []keyBins
	buckets    []bucket
	// The built layout's sub-keys (dueindex.go): by v*dueSpread+sub; the
	// newest bucket of each slot; its adds and those refused.
	dueBins           []keyBins
	open              map[slotKey]*openBucket
	adds, refusedAdds int64
}

func (d *dynamoModel) init(s *Sim) {
	d.s = s
	d.gsi = make([]keyBins, len(s.due))
	d.gsiWritesByKey = make([]float64, len(s.due))
	d.lease = make([]keyBins, len(s.leases))
	d.bucketBins = make([]keyBins, len(s.leases))
	d.buckets = make([]bucket, len(s.leases))
	d.dueBins = make([]keyBins, len(s.leases)*dueSpread)
	d.open = map[slotKey]*openBucket{}
	d.table.warm, d.idx.warm, d.tableR.warm = s.cfg.WarmWrite, s.cfg.WarmWrite, s.cfg.WarmRead
	d.throttled = map[string]int64{}
	d.failed = map[string]int64{}
	d.requests = map[string]int64{}
}

// write is one table write (PutItem or DeleteItem) of units on a key, with
// its due-index writes: gsiUnits on GSI key g (a second key g2 when the
// host moves between keys). It returns the time the caller waits (latency
// and retries) and whether it succeeded.
func (d *dynamoModel) write(c cat, bins *keyBins, keyName string, units float64, g int, gsiUnits float64, g2 int) (int64, bool) {
	s := d.s
	d.requests[catNames[c]]++
	var wait int64
	for attempt := 1; ; attempt++ {
		t := s.now + wait
		lat := s.cfg.DynamoLatency.sample(s.rng, s.cfg.FixedLatency)
		if reason := d.tryWrite(t, c, bins, keyName, units, g, gsiUnits, g2); reason == "" {
			return wait + lat, true
		} else {
			d.throttled[reason]++
			s.m.series(t).throttled++
			if attempt == 3 {
				d.failed[catNames[c]]++
				return wait + lat, false
			}
			wait += lat + int64(s.rng.Float64()*float64(int64(1)<<attempt)*float64(sec))
		}
	}
}

// tryWrite charges a write at time t, or names why it is throttled.
func (d *dynamoModel) tryWrite(t int64, c cat, bins *keyBins, keyName string, units float64, g int, gsiUnits float64, g2 int) string {
	s := d.s
	sc := t / sec
	lim := s.cfg.KeyWriteLimit
	// Check every key first: a throttled request charges nothing.
	if bins.peek(sc, true)+units > lim && bins.peek(sc, true) > 0 {
		return "table key"
	}
	for _, k := range []int{g, g2} {
		if k >= 0 && gsiUnits > 0 && d.gsi[k].peek(sc, true)+gsiUnits > lim && d.gsi[k].peek(sc, true) > 0 {
			return "due-index key"
		}
	}
	if !d.table.add(sc, units) {
		return "table (warm throughput)"
	}
	gu := 0.0
	for _, k := range []int{g, g2} {
		if k >= 0 && gsiUnits > 0 {
			gu += gsiUnits
		}
	}
	if gu > 0 && !d.idx.add(sc, gu) {
		d.table.refund(units)
		return "due index (warm throughput)"
	}
	v := bins.add(sc, units, math.Inf(1), true)
	if v > d.hotTable {
		d.hotTable, d.hotTableKey = v, keyName
	}
	s.m.series(t).noteTable(v)
	d.wByCat[c] += units
	d.wByKey += units
	s.m.series(t).wcu += float32(units)
	for _, k := range []int{g, g2} {
		if k < 0 || gsiUnits <= 0 {
			continue
		}
		v := d.gsi[k].add(sc, gsiUnits, math.Inf(1), true)
		if v > d.hotGSI {
			d.hotGSI, d.hotGSIKey = v, d.gsiName(k)
		}
		s.m.series(t).noteGSI(v)
		d.gsiWritesByKey[k] += gsiUnits
		d.wByCat[catGSI] += gsiUnits
		d.wByKey += gsiUnits
		s.m.series(t).wcu += float32(gsiUnits)
	}
	return ""
}

func (d *dynamoModel) gsiName(k int) string {
	b := d.s.cfg.GSIBuckets
	if b == 1 {
		return "due-index vs=" + itoa(k)
	}
	return "due-index vs=" + itoa(k/b) + "#" + itoa(k%b)
}

// read is one read of units (already halved for eventual consistency) on a
// key; it returns the wait and whether it succeeded.
func (d *dynamoModel) read(c cat, bins *keyBins, units float64, latency Dist) (int64, bool) {
	s := d.s
	d.requests[catNames[c]]++
	var wait int64
	for attempt := 1; ; attempt++ {
		t := s.now + wait
		sc := t / sec
		lat := latency.sample(s.rng, s.cfg.FixedLatency)
		v := bins.add(sc, units, s.cfg.KeyReadLimit, false)
		if v >= 0 && d.tableR.add(sc, units) {
			d.rByCat[c] += units
			d.rByKey += units
			s.m.series(t).rcu += float32(units)
			if v > d.hotRead {
				d.hotRead = v
			}
			return wait + lat, true
		}
		if v >= 0 {
			// Refund the key: the table level refused it.
			bins.r[sc&3] -= float32(units)
		}
		d.throttled["read"]++
		if attempt == 3 {
			d.failed[catNames[c]]++
			return wait + lat, false
		}
		wait += lat + int64(s.rng.Float64()*float64(int64(1)<<attempt)*float64(sec))
	}
}

// writeUnits is the billed size of a write of an item that was old bytes
// and becomes new bytes.
func writeUnits(old, new int) float64 {
	return math.Ceil(float64(max(old, new, 1)) / 1024)
}

// readUnits is the billed size of a consistent read of bytes.
func readUnits(bytes int) float64 {
	return math.Ceil(float64(max(bytes, 1)) / 4096)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	neg := n < 0
	if neg {
		n = -n
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
