package main

import (
	"fmt"
	"strings"
)

// CostTable renders what the shapes cost on the simulation's meter: units
// per URL by where they go, and dollars per million URLs at the page's
// on-demand prices (DynamoDB + SQS, as the benchmark's table; a list's
// run stops when the deployment is idle, before the last invocations end,
// so its Lambda time is not whole and not shown).
func CostTable(reps []*Report) string {
	var b strings.Builder
	b.WriteString("| shape | layout | URLs (hosts) | appends / host, sessions / host | **write units / URL** | host items / index / leases + robots | read units / URL | SQS requests / URL | **$ per million URLs**: DynamoDB + SQS | write units vs today |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
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
		fmt.Fprintf(&b, "| %s | %s | %s (%s) | %.2f, %.2f | **%.2f** | %.2f / %.2f / %.2f | %.2f | %.3f | **$%.2f**: %.2f + %.2f | %s |\n",
			r.Cfg.Name, layoutName(r.Cfg), num(float64(r.URLs)), num(float64(hosts)),
			float64(r.Appends)/float64(max(1, hosts)), float64(r.Sessions)/float64(max(1, hosts)),
			w, host/u, index/u, other/u, r.RCU/u, r.SQSTotal/u,
			(r.CostDynamo+r.CostSQS)/(u/1e6), r.CostDynamo/(u/1e6), r.CostSQS/(u/1e6), vs)
	}
	return b.String()
}

// costMain is `sim -cost`: the shapes (those whose name contains only) on
// the simulation's meter.
func costMain(only string, seed uint64, parallel int) error {
	var cfgs []Config
	for _, sh := range Shapes() {
		if only != "" && !strings.Contains(sh.Name, only) {
			continue
		}
		c := shapeConfig(sh)
		c.Seed = seed
		cfgs = append(cfgs, c)
	}
	reps, bad := runAll(cfgs, parallel)
	fmt.Println("Shapes (the benchmark's site and delay, the template's deployment):")
	fmt.Println()
	for _, sh := range Shapes() {
		if only == "" || strings.Contains(sh.Name, only) {
			fmt.Printf("- %s: %s\n", sh.Name, sh.What)
		}
	}
	fmt.Println()
	fmt.Println(CostTable(reps))
	if bad > 0 {
		return fmt.Errorf("%d cost runs broke an invariant", bad)
	}
	return nil
}
