package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/internal/billing"
)

// AWS us-east-1 list prices, as docs/benchmarks.md uses them (internal/billing
// holds them).
const (
	priceWRU       = billing.PriceWriteUnit
	priceRRU       = billing.PriceReadUnit
	priceSQS       = billing.PriceSQSRequest
	priceGBs       = billing.PriceLambdaGBSecond
	priceInvoke    = billing.PriceLambdaInvocation
	gsiItemBytes   = 40
	steadyFraction = 3 // sustained rate: from Window/steadyFraction to Window
)

// Report is what one simulated run found.
type Report struct {
	Name string
	Cfg  Config

	URLs, Ended, Duplicates, DLQ, Dropped, GivenUp int
	ByStatus                                       [nStatus]int
	Redelivered, IngestTimeouts                    int

	Offered, Sustained float64 // URLs/s sent, results/s in the steady part
	Drain, Drain99     time.Duration
	LastResult         time.Duration
	P50, P99           time.Duration

	HotGSI, HotTable       float64
	HotGSIKey, HotTableKey string
	HotGSIMean             float64 // mean of the per-second hottest due-index key, steady part
	Throttled              map[string]int64
	Failed                 map[string]int64
	Conflicts              int64
	// BucketAdds and RefusedAdds count the due-bucket adds and those a
	// full bucket refused (dueindex.go); SSMCalls Parameter Store's calls.
	BucketAdds, RefusedAdds, SSMCalls int64

	PeakCheck, PeakIngest, PeakTotal, PeakWorkers int
	GBs                                           [2]float64
	Invocations                                   [2]int64
	Scheduled, Woken, IdleRuns, ContendRuns       int64
	Blocked                                       int64
	BlockedGBs                                    float64

	WCU, RCU   float64
	WByCat     [nCats]float64
	RByCat     [nCats]float64
	SQS        map[string]float64
	SQSTotal   float64
	Requests   int64
	Sessions   int64
	Appends    int64
	RateWait   time.Duration // what requests waited for their invocation's rate, in all (Config.InvocationRPS)
	MinGapRel  float64
	Gaps       int64
	Violations []string
	Conserved  bool

	// Limited counts the 429s rate-limiting hosts answered, LimitedHosts
	// the hosts that answered one, LimitedMax the most one host did;
	// LongDelays the sessions released for a delay over 30 s.
	Limited, LongDelays      int64
	LimitedHosts, LimitedMax int

	// Server addresses (gate.go): starts that followed one to the same
	// address, the smallest gap over ServerDelay, those closer, the most
	// in flight to one address, the busiest address's requests, and
	// GateLease's deferrals.
	AddrGaps, AddrClose, BusiestAddr, Deferred int64
	AddrMinGapRel                              float64
	AddrMaxInflight                            int
	GateQueue                                  int // most requests waiting at one gate at once
	// DNS changes met, moves made (c), and the moves' write and read units.
	DNSChanges, Moves int64
	MoveW, MoveR      float64
	// AloneP99 is the p99 latency of URLs whose host is alone on its address.
	AloneP99 time.Duration

	// Costs: of the whole run (a dump), or of the steady part of the window
	// (steady traffic), over CostURLs URLs.
	CostDynamo, CostSQS, CostLambda, PerMillion float64
	CostURLs                                    float64
	SteadyW, SteadyR, SteadySQS                 float64 // per URL, steady part
	// CostS3 is the body bucket's requests for bodies too large inline
	// (not in PerMillion, whose tables say DynamoDB + SQS + Lambda);
	// Stored how many bodies went there, over the same URLs.
	CostS3, Stored float64

	Series   []second
	WallTime time.Duration
	Events   uint64
}

func (s *Sim) report() *Report {
	c := s.cfg
	r := &Report{Name: c.Name, Cfg: s.cfg, URLs: len(s.urlSent), Ended: s.m.ended, Duplicates: s.m.duplicates,
		DLQ: s.m.dlq, Dropped: s.m.dropped, GivenUp: s.m.givenUp, ByStatus: s.m.byStatus,
		Redelivered: s.m.redeliver, IngestTimeouts: s.m.ingestTimeouts,
		HotGSI: s.ddb.hotGSI, HotTable: s.ddb.hotTable, HotGSIKey: s.ddb.hotGSIKey, HotTableKey: s.ddb.hotTableKey,
		Throttled: s.ddb.throttled, Failed: s.ddb.failed, Conflicts: s.m.conflicts,
		BucketAdds: s.ddb.adds, RefusedAdds: s.ddb.refusedAdds, SSMCalls: s.ssm.calls,
		PeakCheck: s.runs.peak[lambdaCheck], PeakIngest: s.runs.peak[lambdaIngest], PeakTotal: s.runs.peakTotal,
		PeakWorkers: s.runs.peakWorkers, GBs: s.runs.gbs, Invocations: s.runs.invocations,
		Scheduled: s.runs.scheduled, Woken: s.runs.woken, IdleRuns: s.runs.idleRuns, ContendRuns: s.runs.contendRuns,
		Blocked: s.runs.blocked, BlockedGBs: s.runs.blockedGBs,
		WByCat: s.ddb.wByCat, RByCat: s.ddb.rByCat, SQS: s.m.sqs, Requests: s.m.requests, Sessions: s.m.sessions, Appends: s.m.appends, RateWait: time.Duration(s.m.rateWait),
		MinGapRel: s.m.minGapRel, Gaps: s.m.gaps, Violations: s.m.violations, Series: s.m.perSec,
		Limited: s.m.limited, LimitedHosts: s.m.limitedHosts, LimitedMax: s.m.limitedMax, LongDelays: s.m.longDelays,
		AddrGaps: s.m.addrGaps, AddrClose: s.m.addrClose, AddrMinGapRel: s.m.addrMinGapRel, AddrMaxInflight: s.m.addrMaxInflight,
		Deferred: s.m.deferred, GateQueue: s.m.gateQueue,
		DNSChanges: s.m.dnsChanges, Moves: s.m.moves, MoveW: s.m.moveW, MoveR: s.m.moveR,
	}
	if n := len(s.m.aloneLatency); n > 0 {
		lat := slices.Clone(s.m.aloneLatency)
		slices.Sort(lat)
		r.AloneP99 = time.Duration(float64(lat[min(n-1, n*99/100)]) * float64(sec))
	}
	for _, st := range s.addrMap {
		r.BusiestAddr = max(r.BusiestAddr, st.requests)
	}
	for _, u := range r.WByCat {
		r.WCU += u
	}
	for _, u := range r.RByCat {
		r.RCU += u
	}
	r.Conserved = math.Abs(r.WCU-s.ddb.wByKey) < 1e-6*max(1, r.WCU) && math.Abs(r.RCU-s.ddb.rByKey) < 1e-6*max(1, r.RCU)
	for _, v := range r.SQS {
		r.SQSTotal += v
	}
	// Rates.
	lastSend := int64(0)
	for _, t := range s.urlSent {
		lastSend = max(lastSend, t)
	}
	lastResult := int64(0)
	for i, x := range s.m.perSec {
		if x.results > 0 {
			lastResult = int64(i+1) * sec
		}
	}
	r.LastResult = time.Duration(lastResult)
	r.Drain = time.Duration(max(0, lastResult-lastSend))
	if !c.steady() {
		// A dump: URLs worked (not dropped at ingest) per second until 99%
		// of them had ended.
		total := 0
		for _, x := range s.m.perSec {
			total += int(x.worked)
		}
		cum := 0
		for i, x := range s.m.perSec {
			cum += int(x.worked)
			if float64(cum) >= 0.99*float64(total) {
				r.Sustained = float64(cum) / float64(i+1)
				break
			}
		}
	} else {
		r.Offered = c.PerDay / 86400
		from, to := int(c.Window)/int(sec)/steadyFraction, int(c.Window)/int(sec)
		n, gsi := 0, 0.0
		for i := from; i < to && i < len(s.m.perSec); i++ {
			n += int(s.m.perSec[i].worked)
			gsi += float64(s.m.perSec[i].hotGSI)
		}
		if to > from {
			r.Sustained = float64(n) / float64(to-from)
			r.HotGSIMean = gsi / float64(to-from)
		}
	}
	// 99.9% of URLs ended: the time after the last send.
	lat := s.m.latency
	if c.steady() {
		lat = s.m.steadyLatency
	}
	if n := len(lat); n > 0 {
		lat = slices.Clone(lat)
		slices.Sort(lat)
		r.P50 = time.Duration(float64(lat[n/2]) * float64(sec))
		r.P99 = time.Duration(float64(lat[min(n-1, n*99/100)]) * float64(sec))
	}
	if n := len(s.m.latency); n > 0 {
		target := int(math.Ceil(0.99 * float64(r.URLs)))
		cum := 0
		for i, x := range s.m.perSec {
			cum += int(x.results)
			if cum >= target {
				r.Drain99 = time.Duration(max(0, int64(i+1)*sec-lastSend))
				break
			}
		}
	}
	r.CostDynamo = r.WCU*priceWRU + r.RCU*priceRRU
	r.CostSQS = r.SQSTotal * priceSQS
	r.CostLambda = (r.GBs[0]+r.GBs[1])*priceGBs + float64(r.Invocations[0]+r.Invocations[1])*priceInvoke
	r.CostURLs = float64(r.URLs)
	r.CostS3, r.Stored = s.m.s3put*priceS3Put+s.m.s3get*priceS3Get, s.m.s3get
	if c.steady() {
		// A deployment under steady traffic: what the steady part of the
		// window cost, per URL sent in it (the drain after the window, an
		// hour of give-ups, is not what a steady day pays per URL).
		from, to := int(c.Window)/int(sec)/steadyFraction, int(c.Window)/int(sec)
		var w, rd, q, g, inv, sent, put, get float64
		for i := from; i < to && i < len(s.m.perSec); i++ {
			x := s.m.perSec[i]
			w, rd, q, g = w+float64(x.wcu), rd+float64(x.rcu), q+float64(x.sqs), g+float64(x.gbs)
			put, get = put+float64(x.s3put), get+float64(x.s3get)
			inv += float64(x.invocations)
			sent += float64(x.sent)
		}
		r.CostDynamo, r.CostSQS, r.CostLambda = w*priceWRU+rd*priceRRU, q*priceSQS, g*priceGBs+inv*priceInvoke
		r.CostURLs = sent
		r.CostS3, r.Stored = put*priceS3Put+get*priceS3Get, get
		r.SteadyW, r.SteadyR, r.SteadySQS = w/max(1, sent), rd/max(1, sent), q/max(1, sent)
	}
	if r.CostURLs > 0 {
		r.PerMillion = (r.CostDynamo + r.CostSQS + r.CostLambda) / (r.CostURLs / 1e6)
	}
	return r
}

// Throttles is the number of throttled requests.
func (r *Report) Throttles() int64 {
	var n int64
	for _, v := range r.Throttled {
		n += v
	}
	return n
}

// DynamoThrottles is the number of throttled DynamoDB requests (not
// Parameter Store's or Lambda's).
func (r *Report) DynamoThrottles() int64 {
	n := r.Throttles()
	for _, k := range []string{ssmThrottle, lambdaThrottle} {
		n -= r.Throttled[k]
	}
	return n
}

// Check lists the invariants the run broke: every URL ends, politeness,
// one worker per host, units conserved.
func (r *Report) Check() []string {
	var out []string
	out = append(out, r.Violations...)
	if r.Ended+r.DLQ != r.URLs {
		out = append(out, fmt.Sprintf("%d URLs accepted, %d ended, %d in the dead-letter queue: %d without a result", r.URLs, r.Ended, r.DLQ, r.URLs-r.Ended-r.DLQ))
	}
	if !r.Conserved {
		out = append(out, fmt.Sprintf("units not conserved: %.1f W / %.1f R billed by category, other totals by key", r.WCU, r.RCU))
	}
	sum := 0
	for _, n := range r.ByStatus {
		sum += n
	}
	if sum != r.Ended {
		out = append(out, fmt.Sprintf("results by status %d != ended %d", sum, r.Ended))
	}
	return out
}

func dur(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	case d < 2*time.Minute:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < 2*time.Hour:
		return fmt.Sprintf("%.1f min", d.Minutes())
	default:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
}

func num(x float64) string {
	switch {
	case x >= 1e6:
		return fmt.Sprintf("%.2fM", x/1e6)
	case x >= 1e4:
		return fmt.Sprintf("%.0fk", x/1e3)
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	default:
		return fmt.Sprintf("%.1f", x)
	}
}

// Table renders the reports as the page's main table.
func Table(reps []*Report) string {
	var b strings.Builder
	b.WriteString("| scenario | deployment | URLs | offered URLs/s | **sustained URLs/s** | time to drain after the last send (99% / all) | latency p50 / p99 | **hottest key, write units/s (limit 1000)** | **throttled requests** | Lambda peak concurrency (check / ingest), host workers | GB-s (check / ingest) | **$ per million URLs** (DynamoDB + SQS + Lambda) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reps {
		c := r.Cfg
		off := "burst"
		if c.steady() {
			off = num(r.Offered)
		}
		hot := fmt.Sprintf("%s: %.0f (GSI mean %.0f); table: %.0f", r.HotGSIKey, r.HotGSI, r.HotGSIMean, r.HotTable)
		switch {
		case r.HotGSIKey == "":
			hot = fmt.Sprintf("%s: %.0f; GSI unused", r.HotTableKey, r.HotTable)
		case r.HotTable > r.HotGSI:
			hot = fmt.Sprintf("%s: %.0f; GSI %s: %.0f", r.HotTableKey, r.HotTable, r.HotGSIKey, r.HotGSI)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | **%s** | %s / %s | %s / %s | %s | **%d** | %d / %d, %d | %s / %s | **$%.2f** (%.2f + %.2f + %.2f) |\n",
			r.Name, deployment(c), num(float64(r.URLs)), off, num(r.Sustained),
			dur(r.Drain99), dur(r.Drain), dur(r.P50), dur(r.P99), hot, r.Throttles(),
			r.PeakCheck, r.PeakIngest, r.PeakWorkers, num(r.GBs[lambdaCheck]), num(r.GBs[lambdaIngest]),
			r.PerMillion, perM(r, r.CostDynamo), perM(r, r.CostSQS), perM(r, r.CostLambda))
	}
	return b.String()
}

func perM(r *Report, cost float64) float64 {
	if r.CostURLs == 0 {
		return 0
	}
	return cost / (r.CostURLs / 1e6)
}

func deployment(c Config) string {
	s := fmt.Sprintf("ShardCount %d, %d vshards", c.ShardCount, c.VirtualShards)
	if c.GSIBuckets > 1 {
		s += fmt.Sprintf(" x %d GSI buckets", c.GSIBuckets)
	}
	if c.IngestMaxConc > 0 && c.IngestMaxConc < 1000 {
		s += fmt.Sprintf(", ingest max concurrency %d", c.IngestMaxConc)
	} else {
		s += ", ingest concurrency unbounded"
	}
	s += fmt.Sprintf(", check %d MB (%d workers", c.CheckMemoryMB, min(c.ProcessWorkers, c.P.MaxConcurrentHosts))
	if c.InvocationRPS > 0 {
		s += fmt.Sprintf(", %.0f requests/s an invocation", c.InvocationRPS)
	}
	s += ")"
	if c.P.MaxConcurrentHosts != 256 {
		s += fmt.Sprintf(", MaxConcurrentHosts %d", c.P.MaxConcurrentHosts)
	}
	if c.StarvedTick > 0 {
		s += fmt.Sprintf(", starved re-dispatch %s", dur(c.StarvedTick))
	}
	if c.ReleaseOnWait > 0 {
		s += fmt.Sprintf(", release on waits > %s", dur(c.ReleaseOnWait))
	}
	if c.GiveWay {
		s += ", scheduled runs give way"
	}
	if m := c.Migrate; m != nil {
		s += fmt.Sprintf(" -> ShardCount %d, %d vshards at %s", m.ShardCount, m.VirtualShards, dur(m.At))
	}
	return s
}

// Details renders what each run's results and units were.
func Details(reps []*Report) string {
	var b strings.Builder
	b.WriteString("| scenario | results: fetched / fetch_error / denied / dropped (given up) | duplicates, records handed back, DLQ | HTTP requests, host sessions | write units / URL (by kind) | read units / URL | SQS requests / URL | throttled by reason (DynamoDB, Parameter Store, Lambda) | check invocations: scheduled, woken; runs ended at once (shard held elsewhere, idle); scheduled runs that waited out their run for a woken one's leases (GB-s) | smallest gap / delay | invariants | wall, events |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reps {
		u := float64(max(1, r.URLs))
		var kinds []string
		for c := cat(0); c < nCats; c++ {
			if r.WByCat[c] > 0 {
				kinds = append(kinds, fmt.Sprintf("%s %.2f", catNames[c], r.WByCat[c]/u))
			}
		}
		var thr []string
		keys := make([]string, 0, len(r.Throttled))
		for k := range r.Throttled {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			thr = append(thr, fmt.Sprintf("%s %d", k, r.Throttled[k]))
		}
		var failed int64
		for _, n := range r.Failed {
			failed += n
		}
		if failed > 0 {
			thr = append(thr, fmt.Sprintf("(%d requests failed after 3 attempts)", failed))
		}
		if len(thr) == 0 {
			thr = []string{"none"}
		}
		if r.BucketAdds > 0 {
			thr = append(thr, fmt.Sprintf("(due-bucket adds refused: %d of %s, %.1f%%)", r.RefusedAdds, num(float64(r.BucketAdds)), 100*float64(r.RefusedAdds)/float64(r.BucketAdds)))
		}
		thr = append(thr, fmt.Sprintf("(Parameter Store calls: %s)", num(float64(r.SSMCalls))))
		inv := "hold"
		if v := r.Check(); len(v) > 0 {
			inv = fmt.Sprintf("**%d broken**: %s", len(v), v[0])
		}
		reqs := num(float64(r.Requests))
		if r.RateWait > 0 && r.Requests > 0 {
			reqs += fmt.Sprintf(" (waiting %s each on average for the invocation's rate)", dur(r.RateWait/time.Duration(r.Requests)))
		}
		if r.LimitedHosts > 0 {
			reqs += fmt.Sprintf(" (%d refused with 429 by %d rate-limiting hosts, at most %d a host)", r.Limited, r.LimitedHosts, r.LimitedMax)
		}
		if r.LongDelays > 0 {
			reqs += fmt.Sprintf(" (%d sessions released for a delay over 30 s)", r.LongDelays)
		}
		gap := "-"
		if r.Gaps > 0 {
			gap = fmt.Sprintf("%.3f", r.MinGapRel)
		}
		fmt.Fprintf(&b, "| %s | %d / %d / %d / %d (%d) | %d, %d, %d | %s, %s | %.2f (%s) | %.2f | %.3f | %s | %d, %d; %d, %d; %d (%s) | %s | %s | %s, %s |\n",
			r.Name, r.ByStatus[stFetched], r.ByStatus[stFetchError], r.ByStatus[stDenied], r.ByStatus[stDropped], r.GivenUp,
			r.Duplicates, r.Redelivered, r.DLQ, reqs, num(float64(r.Sessions)),
			r.WCU/u, strings.Join(kinds, ", "), r.RCU/u, r.SQSTotal/u, strings.Join(thr, ", "),
			r.Scheduled, r.Woken, r.ContendRuns, r.IdleRuns, r.Blocked, num(r.BlockedGBs), gap, inv,
			dur(r.WallTime), num(float64(r.Events)))
	}
	return b.String()
}
