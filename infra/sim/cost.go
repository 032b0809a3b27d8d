package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// CostTable renders what the shapes cost on the simulation's meter: units
// per URL by where they go, and dollars per million URLs at the page's
// on-demand prices (DynamoDB + SQS, as the benchmark's table; a list's
// run stops when the deployment is idle, before the last invocations end,
// so its Lambda time is not whole and not shown).
func CostTable(reps []*Report) string {
	var b strings.Builder
	b.WriteString("| shape | layout | URLs (hosts) | appends / host, sessions / host | latency p50 / p99 | **write units / URL** | host items / index / leases + robots | read units / URL | SQS requests / URL | **$ per million URLs**: DynamoDB + SQS | write units vs the GSI |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	base := map[string]float64{}
	for _, r := range reps {
		u := float64(max(1, r.URLs))
		hosts := len(r.Cfg.Sizes)
		host := r.WByCat[catAppend] + r.WByCat[catCommit] + r.WByCat[catChunk]
		index := r.WByCat[catGSI] + r.WByCat[catIndex]
		other := r.WByCat[catLease] + r.WByCat[catRobots]
		w := r.WCU / u
		if r.Cfg.Layout == LayoutGSI && !r.Cfg.LingerRun {
			base[r.Cfg.Name] = w
		}
		vs := "-"
		if b0, ok := base[r.Cfg.Name]; ok && b0 > 0 && (r.Cfg.Layout != LayoutGSI || r.Cfg.LingerRun) {
			vs = fmt.Sprintf("%+.0f%%", 100*(w-b0)/b0)
		}
		fmt.Fprintf(&b, "| %s | %s | %s (%s) | %.2f, %.2f | %s / %s | **%.2f** | %.2f / %.2f / %.2f | %.2f | %.3f | **$%.2f**: %.2f + %.2f | %s |\n",
			r.Cfg.Name, layoutName(r.Cfg), num(float64(r.URLs)), num(float64(hosts)),
			float64(r.Appends)/float64(max(1, hosts)), float64(r.Sessions)/float64(max(1, hosts)), dur(r.P50), dur(r.P99),
			w, host/u, index/u, other/u, r.RCU/u, r.SQSTotal/u,
			(r.CostDynamo+r.CostSQS)/(u/1e6), r.CostDynamo/(u/1e6), r.CostSQS/(u/1e6), vs)
	}
	return b.String()
}

// layoutVariants are the layouts priced on every shape.
var layoutVariants = []struct {
	layout Layout
	linger bool
}{
	{LayoutGSI, false}, {LayoutBatchList, false}, {LayoutBuckets, false}, {LayoutBucketsTTL, false},
	{LayoutExpire, false}, {LayoutListsBuckets, false}, {LayoutGSI, true}, {LayoutListsBuckets, true},
}

// costMain is `sim -cost`: the shapes (those whose name contains only) on
// the simulation's meter.
func costMain(only string, seed uint64, parallel int) error {
	var cfgs []Config
	for _, sh := range Shapes() {
		if only != "" && !strings.Contains(sh.Name, only) {
			continue
		}
		for _, v := range layoutVariants {
			c := shapeConfig(sh)
			c.Seed = seed
			c.Layout, c.LingerRun = v.layout, v.linger
			cfgs = append(cfgs, c)
		}
	}
	// The 100M/day deployment the README recommends, on the GSI it had
	// and on the due lists and buckets it has, for the all-in figure.
	var steady []Config
	for _, c := range Scenarios() {
		if c.Name == "100M/day" && (only == "" || strings.Contains(c.Name, only)) {
			for _, l := range []Layout{LayoutGSI, LayoutListsBuckets} {
				c.Seed, c.Layout = seed, l
				c.Name = "100M/day, " + layoutName(c)
				steady = append(steady, c)
			}
		}
	}
	// The check function's memory: the same deployment at other sizes
	// (its worker budget and request rate follow, config.go).
	var memory []Config
	for _, c := range Scenarios() {
		if c.Name == "100M/day" && (only == "" || strings.Contains("100M/day memory", only)) {
			for _, mb := range []int{512, 768, 1769} {
				c.Seed, c.Layout, c.CheckMemoryMB = seed, LayoutListsBuckets, mb
				c.Name = fmt.Sprintf("100M/day, %s, check %d MB", layoutName(c), mb)
				memory = append(memory, c)
			}
		}
	}
	// The headline, step by step from the 512 MB deployment with results'
	// bodies plain: each step keeps the one before (headlineSteps).
	var steps []Config
	for _, c := range memory {
		if c.CheckMemoryMB == headlineMemoryMB {
			steps = append(steps, headlineConfigs(c)...)
		}
	}
	all, bad := runAll(slices.Concat(cfgs, steady, memory, steps), parallel)
	reps, steadyReps := all[:len(cfgs)], all[len(cfgs):len(cfgs)+len(steady)]
	rest := all[len(cfgs)+len(steady):]
	memReps, stepReps := rest[:len(memory)], rest[len(memory):]
	fmt.Println("Shapes (the benchmark's site and delay, the template's deployment):")
	fmt.Println()
	for _, sh := range Shapes() {
		if only == "" || strings.Contains(sh.Name, only) {
			fmt.Printf("- %s: %s\n", sh.Name, sh.What)
		}
	}
	fmt.Println()
	fmt.Println(CostTable(reps))
	if len(steadyReps) > 0 {
		fmt.Println("At 100 million URLs a day (the steady part of the window, all-in):")
		fmt.Println()
		fmt.Println(Table(steadyReps))
		fmt.Println(Details(steadyReps))
		fmt.Println("Capacity modes over a day (DynamoDB only; the run's per-second units, scaled to the day's curve):")
		fmt.Println()
		var modes []ModeResult
		for _, r := range steadyReps {
			modes = append(modes, priceModes(r, Scalings(r.Cfg))...)
		}
		fmt.Println(ModeTable(modes))
	}
	if len(memReps) > 0 {
		fmt.Println("The check function's memory at 100M/day (with the 1,024 MB run above):")
		fmt.Println()
		fmt.Println(Table(memReps))
	}
	if len(stepReps) > 0 {
		fmt.Println("The headline's configuration, step by step (100M/day, due lists and buckets, the template's provisioned auto scaling; each step keeps the ones above it that are taken; the last taken row is the recommended configuration, the headline below):")
		fmt.Println()
		fmt.Println(HeadlineTable(stepReps))
		var last *Report
		for i, r := range stepReps {
			if i >= len(headlineSteps) || headlineSteps[i].Rejected == "" {
				last = r
			}
		}
		fmt.Printf("Headline: %s, all-in at 100 million URLs a day.\n\n", headlineSummary(last))
	}
	if bad > 0 {
		return fmt.Errorf("%d cost runs broke an invariant", bad)
	}
	return nil
}

// headlineMemoryMB is the check function's memory of the headline: the
// cheapest size that keeps up (the memory table above).
const headlineMemoryMB = 512

// headlineStep is one change on the way to the recommended configuration.
type headlineStep struct {
	What  string // what to set, and where
	apply func(*Config)
	// Rejected, when set, says why the step is measured but not taken:
	// the steps after it start from the step before it.
	Rejected string
}

// headlineSteps lead from the 512 MB deployment with plain bodies to the
// recommended configuration; each keeps the steps before it.
//
//   - ResultBodyEncoding=gzip (SSM): the output queue bills fewer 64 KB
//     chunks; the CPU slows an invocation (invocationRPS).
//   - Producers send 10 URLs a message (a JSON array, README's input
//     section): the input queue's receive and delete are billed once for
//     ten. A producer-side recommendation, not a setting of the stack.
//   - TableTargetUtilization 80 (template parameter): capacity bought at
//     consumption / 0.8 instead of / 0.7; the capacity model prices the
//     steady day's jitter and the bursty day at it (the table's columns).
//   - ShardCount 14, measured and not taken: Lambda is memory x shards x
//     the day, but 14 (or 12) shards of 512 MB do not keep up with
//     100M/day, though 1.08 requests a URL at 141 requests/s an
//     invocation would average out at 9 shards: runs are not all busy at
//     once and shards' hosts are uneven, so which of the invocation's
//     rate and its 198 workers binds on the busiest shards is not
//     isolated here.
var headlineSteps = []headlineStep{
	{"512 MB check functions, results' bodies plain", func(c *Config) { c.P.ResultBodyEncoding = params.BodyPlain }, ""},
	{"+ ResultBodyEncoding=gzip (SSM)", func(c *Config) { c.P.ResultBodyEncoding = params.BodyGzip }, ""},
	{"+ producers send 10 URLs a message", func(c *Config) { c.URLsPerMessage = 10 }, ""},
	{"+ TableTargetUtilization 80 (template)", func(c *Config) { c.TableTarget = 80 }, ""},
	{"+ ShardCount 14 (template)", func(c *Config) { c.ShardCount = 14 }, "not taken: sustains 1,063 of the 1,157 URLs/s offered, p99 8 min (12 shards: 989)"},
}

// headlineConfigs are the runs of headlineSteps from base: each step on
// the last taken one before it.
func headlineConfigs(base Config) []Config {
	var out []Config
	c := base
	for i, st := range headlineSteps {
		next := c
		next.Name = fmt.Sprintf("100M/day, headline step %d", i)
		st.apply(&next)
		out = append(out, next)
		if st.Rejected == "" {
			c = next
		}
	}
	return out
}

// stepName is the step a headline run is at (its position in the list).
func stepName(r *Report, i int) string {
	if i < len(headlineSteps) {
		if st := headlineSteps[i]; st.Rejected != "" {
			return st.What + " (" + st.Rejected + ")"
		}
		return headlineSteps[i].What
	}
	return layoutName(r.Cfg)
}

// headlineCosts are a steady run's all-in dollars per million URLs, the
// DynamoDB part priced in the template's provisioned mode over a steady
// day, with the capacity model's throttling on the steady and the bursty
// day.
type headlineCosts struct {
	dynamo, sqs, s3, lambda float64
	steadyThr, burstyThr    ModeResult
}

func (h headlineCosts) total() float64 { return h.dynamo + h.sqs + h.s3 + h.lambda }

func costsOf(r *Report) headlineCosts {
	h := headlineCosts{sqs: perM(r, r.CostSQS), s3: perM(r, r.CostS3), lambda: perM(r, r.CostLambda)}
	for _, m := range priceModes(r, Scalings(r.Cfg)[:1]) {
		switch {
		case m.Mode == "on demand":
		case m.Curve == DayCurves()[0].Name:
			h.dynamo, h.steadyThr = m.PerMillion, m
		default:
			h.burstyThr = m
		}
	}
	return h
}

// throttleCell says a day's throttling in the capacity model.
func throttleCell(m ModeResult) string {
	if m.ThrottledSeconds == 0 {
		return "none"
	}
	return fmt.Sprintf("%.2f%% of units, %d s", 100*m.ThrottledShare, m.ThrottledSeconds)
}

// headlineSummary is the one line the headline says.
func headlineSummary(r *Report) string {
	h := costsOf(r)
	return fmt.Sprintf("**$%.2f per million URLs** (DynamoDB $%.2f + SQS $%.2f + S3 $%.3f + Lambda $%.2f), ShardCount %d, check %d MB, TableTargetUtilization %d%%, ResultBodyEncoding=%s, %d URLs a message; throttled: %d requests in the run, %s on the steady day, %s on the bursty day; latency p50 %s, p99 %s",
		h.total(), h.dynamo, h.sqs, h.s3, h.lambda, r.Cfg.ShardCount, r.Cfg.CheckMemoryMB, r.Cfg.TableTarget, r.Cfg.P.ResultBodyEncoding, max(1, r.Cfg.URLsPerMessage),
		r.Throttles(), throttleCell(h.steadyThr), throttleCell(h.burstyThr), dur(r.P50), dur(r.P99))
}

// HeadlineTable is the all-in cost of steady 100M/day runs, per million
// URLs: DynamoDB in the template's provisioned mode (auto scaling at its
// target, priced over a steady day), SQS (input receive and delete, the
// wake queue, the output queue's SendMessageBatch per 64 KB), the body
// bucket's requests for bodies too large inline (PUT-class $0.005 and
// GET-class $0.0004 per 1,000), and Lambda (GB-seconds and invocations).
func HeadlineTable(reps []*Report) string {
	var b strings.Builder
	b.WriteString("| step | sustained URLs/s (requests/s an invocation, shards) | latency p50 / p99 | throttled: run's requests; capacity model, steady day / bursty day | SQS requests / URL: all (output, input, wake) | bodies stored / URL | DynamoDB (provisioned) | SQS | S3 requests | Lambda | **$ per million URLs, all-in** |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range reps {
		h := costsOf(r)
		// The split is the whole run's (the total, the steady part's).
		var out, in, wake float64
		for name, n := range r.SQS {
			switch {
			case strings.HasPrefix(name, "output"):
				out += n
			case strings.HasPrefix(name, "input"):
				in += n
			default:
				wake += n
			}
		}
		u := float64(max(1, r.URLs))
		fmt.Fprintf(&b, "| %s | %.0f (%.0f, %d) | %s / %s | %d; %s / %s | %.3f (%.3f, %.3f, %.3f) | %.4f | $%.2f | $%.2f | $%.3f | $%.2f | **$%.2f** |\n",
			stepName(r, i), r.Sustained, invocationRPS(r.Cfg), r.Cfg.ShardCount,
			dur(r.P50), dur(r.P99), r.Throttles(), throttleCell(h.steadyThr), throttleCell(h.burstyThr),
			r.SteadySQS, out/u, in/u, wake/u, r.Stored/max(1, r.CostURLs),
			h.dynamo, h.sqs, h.s3, h.lambda, h.total())
	}
	return b.String()
}
