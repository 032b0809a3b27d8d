package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urldownloader/urldownloader/shared/params"
)

// CostTable renders what the shapes cost on the simulation's meter: units
// per URL by where they go, and dollars per million URLs at the page's
// on-demand prices (DynamoDB + SQS, as the benchmark's table; a list's
// run stops when the deployment is idle, before the last invocations end,
// so its Lambda time is not whole and not shown).
func CostTable(reps []*Report) string {
	var b strings.Builder
	b.WriteString("| shape | layout | URLs (hosts) | appends / host, sessions / host | latency p50 / p99 | **write units / URL** | host items / index / leases + robots | read units / URL | SQS requests / URL | **$ per million URLs**: DynamoDB + SQS | write units vs today |\n")
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
	// The 100M/day deployment the README recommends, today's layout and
	// the cheapest, for the all-in figure.
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
	// The headline's before: the 512 MB deployment with results' bodies
	// plain (the recommended configuration packs them with gzip).
	// And a lever on the producer's side, for what is left: ten URLs a
	// message (an array) on the input queue.
	var before, packed []Config
	for _, c := range memory {
		if c.CheckMemoryMB == headlineMemoryMB {
			p := c
			p.URLsPerMessage = 10
			p.Name += ", 10 URLs a message"
			packed = append(packed, p)
			c.P.ResultBodyEncoding = params.BodyPlain
			c.Name += ", plain bodies"
			before = append(before, c)
		}
	}
	all, bad := runAll(append(append(append(append(cfgs, steady...), memory...), before...), packed...), parallel)
	reps, steadyReps := all[:len(cfgs)], all[len(cfgs):len(cfgs)+len(steady)]
	rest := all[len(cfgs)+len(steady):]
	memReps, beforeReps, packedReps := rest[:len(memory)], rest[len(memory):len(memory)+len(before)], rest[len(memory)+len(before):]
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
	var head []*Report
	for _, r := range memReps {
		if r.Cfg.CheckMemoryMB == headlineMemoryMB {
			head = append(head, r)
		}
	}
	if len(beforeReps) > 0 && len(head) > 0 {
		fmt.Println("The headline at 100M/day: the recommended deployment (due lists and buckets, the template's provisioned auto scaling, check functions of 512 MB), all-in, before and after packing results' bodies with gzip:")
		fmt.Println()
		rows := slices.Concat(beforeReps, head, packedReps) // a new slice: the parts share all's array
		fmt.Println(HeadlineTable(rows))
	}
	if bad > 0 {
		return fmt.Errorf("%d cost runs broke an invariant", bad)
	}
	return nil
}

// headlineMemoryMB is the check function's memory of the headline: the
// cheapest size that keeps up (the memory table above).
const headlineMemoryMB = 512

// HeadlineTable is the all-in cost of steady 100M/day runs, per million
// URLs: DynamoDB in the template's provisioned mode (auto scaling at its
// target, priced over a steady day), SQS (input receive and delete, the
// wake queue, the output queue's SendMessageBatch per 64 KB), the body
// bucket's requests for bodies too large inline (PUT-class $0.005 and
// GET-class $0.0004 per 1,000), and Lambda (GB-seconds and invocations).
func HeadlineTable(reps []*Report) string {
	var b strings.Builder
	b.WriteString("| deployment | result bodies | URLs a message | sustained URLs/s (requests/s an invocation) | latency p50 / p99 | SQS requests / URL: all (output, input, wake) | bodies stored / URL | DynamoDB (provisioned) | SQS | S3 requests | Lambda | **$ per million URLs, all-in** |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reps {
		dynamo := 0.0
		for _, m := range priceModes(r, Scalings(r.Cfg)[:1]) {
			if m.Curve == DayCurves()[0].Name && m.Mode != "on demand" {
				dynamo = m.PerMillion
			}
		}
		sqs, s3, lambda := perM(r, r.CostSQS), perM(r, r.CostS3), perM(r, r.CostLambda)
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
		fmt.Fprintf(&b, "| %s, check %d MB | %s | %d | %.0f (%.0f) | %s / %s | %.3f (%.3f, %.3f, %.3f) | %.4f | $%.2f | $%.2f | $%.3f | $%.2f | **$%.2f** |\n",
			layoutName(r.Cfg), r.Cfg.CheckMemoryMB, r.Cfg.P.ResultBodyEncoding, max(1, r.Cfg.URLsPerMessage), r.Sustained, invocationRPS(r.Cfg),
			dur(r.P50), dur(r.P99), r.SteadySQS, out/u, in/u, wake/u, r.Stored/max(1, r.CostURLs),
			dynamo, sqs, s3, lambda, dynamo+sqs+s3+lambda)
	}
	return b.String()
}
