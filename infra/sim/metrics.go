package main

// metrics are the run's counters and its per-second series.
type metrics struct {
	ended      int
	duplicates int
	byStatus   [nStatus]int
	latency    []float32 // seconds from the producer's send to the result
	// steadyLatency: the same for URLs sent after the start-up (a third of
	// the window in), when the deployment runs as it would all day.
	steadyLatency  []float32
	violations     []string // broken invariants (politeness, ownership)
	conflicts      int64
	requests       int64 // HTTP requests (robots.txt and pages)
	gaps           int64 // requests that followed an earlier one to the same host
	minGapRel      float64
	sessions       int64
	appends        int64 // host appends that landed
	dlq            int   // URLs whose record went to the input dead-letter queue
	redeliver      int   // records handed back to the input queue
	ingestTimeouts int
	sqs            map[string]float64
	s3put, s3get   float64 // the body bucket's requests (PUT-class, GET-class)
	perSec         []second
	endT           int64
	dropped        int
	givenUp        int
	released       int64 // hosts released to wait out a pause (ReleaseOnWait)
	longDelays     int64 // hosts released for a delay longer than check waits in place
	limited        int64 // requests a rate-limiting host refused (429)
	limitedHosts   int   // rate-limiting hosts that refused one
	limitedMax     int   // most requests one of them refused
	rateWait       int64 // time requests waited for the invocation's rate (InvocationRPS), ns
	// The server addresses' view (gate.go): starts that followed an
	// earlier one to the same address, the smallest gap over ServerDelay,
	// those closer than it, the most requests in flight to one address;
	// deferred counts GateLease's deferrals.
	addrGaps, addrClose int64
	addrMinGapRel       float64
	addrMaxInflight     int
	deferred            int64
	// gateQueue is the most requests waiting at one gate at once.
	gateQueue int
	// DNS changes met by checks, the moves (c) made, their units.
	dnsChanges, moves int64
	moveW, moveR      float64
	// aloneLatency: URLs' latency whose host is alone on its address.
	aloneLatency []float32
}

// second is one simulated second.
type second struct {
	results   int32
	worked    int32 // results other than dropped (evicted at ingest)
	throttled int32
	hotGSI    float32 // most write units one due-index key took in it
	hotTable  float32 // most write units one table key took in it
	check     int16   // check invocations running at its start
	ingest    int16
	sent      int32 // URLs the producer sent in it
	// What it cost: write and read units, SQS requests, Lambda GB-seconds
	// and invocations, the body bucket's PUT-class and GET-class requests.
	wcu, rcu, sqs, gbs float32
	invocations        int32
	s3put, s3get       float32
}

func (m *metrics) init() {
	m.sqs = map[string]float64{}
	m.minGapRel = 1e9
	m.addrMinGapRel = 1e9
}

// series returns the second t falls in.
func (m *metrics) series(t int64) *second {
	i := int(t / sec)
	for len(m.perSec) <= i {
		m.perSec = append(m.perSec, second{})
	}
	return &m.perSec[i]
}

// sqsReq counts billed SQS requests at t under a name.
func (m *metrics) sqsReq(t int64, name string, n float64) {
	m.sqs[name] += n
	m.series(t).sqs += float32(n)
}

// s3Req counts the body bucket's billed requests at t.
func (m *metrics) s3Req(t int64, put, get float64) {
	m.s3put += put
	m.s3get += get
	x := m.series(t)
	x.s3put += float32(put)
	x.s3get += float32(get)
}

// span spreads gb x seconds of an invocation over the seconds it ran.
func (m *metrics) span(start, end int64, gb float64) {
	for t := start; t < end; {
		next := min(end, (t/sec+1)*sec)
		m.series(t).gbs += float32(float64(next-t) / float64(sec) * gb)
		t = next
	}
}

func (x *second) noteGSI(v float64) {
	if float32(v) > x.hotGSI {
		x.hotGSI = float32(v)
	}
}

func (x *second) noteTable(v float64) {
	if float32(v) > x.hotTable {
		x.hotTable = float32(v)
	}
}
