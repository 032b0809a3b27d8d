package main

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/runtime/wiring"
)

// Sim is one simulated deployment: the virtual clock, the web, the
// DynamoDB table, the queues and the functions' invocations.
type Sim struct {
	cfg Config
	clock
	// pol is the product's politeness core with the run's parameters:
	// every politeness rule the model applies is one of its transitions.
	pol politeness.Policy
	rng *rand.Rand
	cdf []float64

	hosts []*host // by rank, created when first met

	// URLs, by id: when the producer sent it, its host's rank, and its
	// state (sent, queued, ended).
	urlSent  []int64
	urlHost  []int32
	urlState []uint8
	urlEnds  []uint8 // results published for it (more than one: a duplicate)

	// Messages on the input queue (see ingest.go).
	in inputQueue

	// The due index: per GSI partition key (virtual shard and bucket), a
	// heap of the hosts in it that no worker holds.
	due []dueHeap

	// Leases by virtual shard.
	leases []lease

	// indexed counts the hosts in the due index.
	indexed int

	ddb  dynamoModel
	ssm  ssmModel
	m    metrics
	runs runState

	// Deployment generations (a migration runs old and new side by side).
	gens []generation

	// Server addresses (gate.go): the plan and each address's state.
	addr    addrs
	addrMap map[int64]*addrState

	// Tests: script, when set, answers the requests in order instead of
	// the web model; starts, when not nil, records when each request
	// started. shape, when set, changes a host's traits when it is first
	// met; answer, when set, answers each host's requests instead of the
	// web model; hostStarts, when not nil, records each host's request
	// starts by key.
	script     []scripted
	starts     []int64
	shape      func(h *host)
	answer     func(h *host, robots bool) scripted
	hostStarts map[string][]int64
}

// scripted is one answer a test sets: what and how long it takes.
type scripted struct {
	resp response
	dur  time.Duration
}

// generation is the deployment configuration one function instance runs
// with: today's, or the one a migration deploys.
type generation struct {
	vshards, shards int
	from            int64 // instances started at or after this use it
}

// URL states.
const (
	urlSent uint8 = iota
	urlQueued
	urlEnded
)

// host is one queue key: the stored host item (politeness state, queue,
// due-index entry) and the web server behind it.
type host struct {
	rank int32
	key  string
	// addr is the server address it resolves to (gate.go), addrExempt
	// behind a CDN range.
	addr       int64
	resolvedAt int64 // when addr was last resolved (gate.go's dnsMove)
	// vs is the virtual shard stored in the host item (layout.go's vs),
	// set when the item is created, or, under a migration, when the host
	// enters the due index again.
	vs     int32
	exists bool

	kind, robotsKind uint8
	crawlDelay       int64
	medianMS         float32

	// The queue: URL ids from head qh; stored as chunks (each written once,
	// deleted once: count and bytes, the first consumed up to co) followed
	// by the inline tail of the host item.
	q      []int32
	qh     int
	chunks []chunk
	co     int32

	// Due index. listed: named by a due list, not in the GSI
	// (LayoutBatchList); named: in the list its ingest batch is writing;
	// stale: its GSI entry left behind when it left (LayoutExpire).
	inIndex, listed, named, stale bool
	due                           int64
	ver                           uint32

	// Stored politeness state: the product's own (politeness.State), as
	// the stores keep it.
	pol       politeness.State
	attempts  map[int32]uint8
	robotsAt  int64 // when robots.txt was fetched; 0: none stored
	itemBytes int32

	session   *session
	lastWrite int64 // when the item last changed (optimistic-concurrency conflicts)
	bins      keyBins

	// Politeness, as the server sees it: when the last response ended and
	// whether a request is in flight.
	lastEnd  int64
	inflight bool
	// limitAt is when a rate-limiting host (kindRateLimit) last accepted
	// a request; limited counts the requests it refused.
	limitAt int64
	limited int32
}

type chunk struct{ n, bytes int32 }

func (h *host) pending() int { return len(h.q) - h.qh }

func (h *host) chunked() int {
	n := 0
	for _, c := range h.chunks {
		n += int(c.n)
	}
	return n - int(h.co)
}

// itemSize is the host item's stored size (layout.go): keys, version,
// nonces and politeness state (~200 bytes, the benchmark measured 128-265),
// the inline tail, chunk references and small robots.txt answers.
func (h *host) itemSize(web WebModel) int {
	n := 200 + (h.pending()-h.chunked())*web.EntryBytes + 25*len(h.chunks)
	if h.robotsAt != 0 {
		n += robotsInlineBytes(h.robotsKind)
	}
	return n
}

// New builds a simulation of cfg.
func New(cfg Config) *Sim {
	if cfg.ProcessWorkers < 0 {
		cfg.ProcessWorkers = wiring.BudgetFor(cfg.CheckMemoryMB).Workers(keptBody(cfg.P))
	}
	cfg.InvocationRPS = invocationRPS(cfg)
	s := &Sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), pol: politeness.NewPolicy(cfg.P)}
	s.gens = []generation{{vshards: cfg.VirtualShards, shards: cfg.ShardCount}}
	maxV := cfg.VirtualShards
	if m := cfg.Migrate; m != nil {
		s.gens = append(s.gens, generation{vshards: m.VirtualShards, shards: m.ShardCount, from: int64(m.At)})
		maxV = max(maxV, m.VirtualShards)
	}
	s.due = make([]dueHeap, maxV*cfg.GSIBuckets)
	s.leases = make([]lease, maxV)
	switch {
	case cfg.SingleHost:
		s.cdf = []float64{1}
	case len(cfg.Sizes) > 0:
		s.cdf = sizesCDF(cfg.Sizes)
	default:
		capShare := cfg.HeadCap
		if cfg.HeadCapPerDay > 0 && cfg.PerDay > 0 {
			capShare = min(capShare, cfg.HeadCapPerDay/cfg.PerDay)
		}
		s.cdf = weights(cfg.Hosts, cfg.ZipfS, capShare)
	}
	s.hosts = make([]*host, len(s.cdf))
	s.ddb.init(s)
	s.m.init()
	s.addrMap = map[int64]*addrState{}
	s.initAddrs()
	return s
}

// gen returns the configuration an instance started at t runs with.
func (s *Sim) gen(t int64) generation {
	g := s.gens[0]
	for _, x := range s.gens[1:] {
		if t >= x.from {
			g = x
		}
	}
	return g
}

// vshardOf is hostqueue.VirtualShard for the deployed 16 virtual shards, and
// the same rule (the real FNV-1a hash modulo the count) for another count.
func vshardOf(key string, vshards int) int {
	if vshards == hostqueue.VirtualShards {
		return hostqueue.VirtualShard(key)
	}
	return int(hostqueue.Hash(key) % uint64(vshards))
}

// ownedShards is hostqueue.OwnedShards for 16 virtual shards, and the same
// ownership rule, v % ShardCount == shard, for another count.
func ownedShards(shard, shardCount, vshards int) []int {
	if vshards == hostqueue.VirtualShards {
		return hostqueue.OwnedShards(shard, shardCount)
	}
	var out []int
	for v := 0; v < vshards; v++ {
		if v%shardCount == shard {
			out = append(out, v)
		}
	}
	return out
}

// gsiKey is the due-index partition key of a host in virtual shard vs: the
// virtual shard itself today; with GSIBuckets > 1, vs#bucket, the bucket
// from the same hash.
func (s *Sim) gsiKey(h *host) int {
	b := 0
	if s.cfg.GSIBuckets > 1 {
		b = int((hostqueue.Hash(h.key) >> 32) % uint64(s.cfg.GSIBuckets))
	}
	return int(h.vs)*s.cfg.GSIBuckets + b
}

// host returns the host of rank r, creating its state when first met. A
// host met for the first time may have been seen before the simulated
// window: its robots.txt is stored and fresh with the probability a host
// visited at its rate would have one (a renewal argument: the share of
// time a RobotsTTL-long validity covers, when visits come at rate λ, is
// λ·TTL / (1 + λ·TTL)).
func (s *Sim) host(r int) *host {
	if h := s.hosts[r]; h != nil {
		return h
	}
	h := &host{rank: int32(r), key: hostName(r), vs: -1, addr: s.addrOf(r), resolvedAt: s.now}
	s.traits(h)
	if s.shape != nil {
		s.shape(h)
	}
	if !s.cfg.SingleHost && s.cfg.PerDay > 0 {
		lambda := share(s.cdf, r) * s.cfg.PerDay / float64(24*time.Hour) * float64(s.cfg.P.RobotsTTL)
		if mix(s.cfg.Seed, r, 7) < lambda/(1+lambda) && h.kind != kindNXDomain && h.kind != kindRefused && h.kind != kindBlackhole {
			h.robotsAt = -int64(mix(s.cfg.Seed, r, 8) * float64(s.cfg.P.RobotsTTL))
			h.exists = true
		}
	}
	s.hosts[r] = h
	return h
}

// Run simulates until every URL has its result or MaxTime.
func (s *Sim) Run() *Report {
	start := time.Now()
	s.startProducer()
	s.startSchedules()
	limit := int64(s.cfg.MaxTime)
	for s.step(limit) {
		if s.settled() {
			break
		}
	}
	s.m.endT = s.now
	rep := s.report()
	rep.WallTime = time.Since(start)
	rep.Events = s.events
	return rep
}

func (s *Sim) allEnded() bool {
	return s.in.doneSending && s.m.ended == len(s.urlSent)
}

// settled reports whether a list's run is over: every URL ended and, so
// that its units include every host's last commit and index removal, no
// host in the index and no worker left (steady runs end at allEnded).
func (s *Sim) settled() bool {
	if !s.allEnded() {
		return false
	}
	return len(s.cfg.Sizes) == 0 || s.indexed == 0 && s.runs.workers == 0
}

// end records a URL's result as published at the current time.
func (s *Sim) end(id int32, status resultStatus) {
	s.urlEnds[id]++
	if s.urlEnds[id] > 1 {
		s.m.duplicates++
		return
	}
	s.urlState[id] = urlEnded
	s.m.ended++
	s.m.byStatus[status]++
	lat := float32(float64(s.now-s.urlSent[id]) / float64(sec))
	s.m.latency = append(s.m.latency, lat)
	if c := s.cfg; c.steady() && s.urlSent[id] >= int64(c.Window)/steadyFraction {
		s.m.steadyLatency = append(s.m.steadyLatency, lat)
	}
	if s.cfg.ServerDelay > 0 && s.alone(s.hosts[s.urlHost[id]]) {
		s.m.aloneLatency = append(s.m.aloneLatency, lat)
	}
	x := s.m.series(s.now)
	x.results++
	if status != stDropped {
		x.worked++
	}
}

func (s *Sim) fail(format string, args ...any) {
	s.m.violations = append(s.m.violations, fmt.Sprintf("t=%s: ", time.Duration(s.now))+fmt.Sprintf(format, args...))
}
