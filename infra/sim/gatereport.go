package main

import (
	"fmt"
	"strings"
	"time"
)

// gateDelay is the ServerDelay the comparison runs at: the test
// (200 ms), inside the range the issue names for the default.
const gateDelay = 200 * time.Millisecond

// gateWorkload is one list the designs are compared on.
type gateWorkload struct {
	Name, What string
	cfg        func(*Config)
}

// gateWorkloads are the lists of the comparison: the Zipf list (the cost
// shapes', benchmark's site and delay) with every host alone on its
// address, the same list with the shared-hosting mix, and the 40
// names on one address (5 URLs each, FetchDelay 1 s, ShardCount 4).
func gateWorkloads() []gateWorkload {
	zipfList := func(c *Config) {
		*c = shapeConfig(Shapes()[3])
	}
	return []gateWorkload{
		{"one host per address", "the Zipf list (10,000 hosts, 16,449 URLs), every host alone on its address", zipfList},
		{"shared-hosting mix", "the Zipf list, 70% of hosts alone, 20% on shared servers of up to 200 names, 10% behind exempt CDN ranges", func(c *Config) {
			zipfList(c)
			c.Addr = SharedMix(200)
		}},
		{"40 names on one address", "40 hosts x 5 URLs on one address, FetchDelay 1 s, ShardCount 4", func(c *Config) {
			*c = shapeConfig(Shape{cfg: func(c *Config) { c.Sizes = repeat(40, 5) }})
			c.P.FetchDelay = time.Second
			c.ShardCount = 4
			c.Addr = AddrModel{OneAddr: 40}
		}},
	}
}

// gateConfigs are every workload under every design, today's first.
func gateConfigs(seed uint64) []Config {
	var out []Config
	for _, wl := range gateWorkloads() {
		for g := range nGates {
			var c Config
			wl.cfg(&c)
			c.Name = wl.Name + ", " + gateNames[g]
			c.Seed = seed
			c.Gate, c.ServerDelay, c.ServerConnections = g, gateDelay, 1
			out = append(out, c)
		}
	}
	return out
}

// GateTable renders the runs of gateConfigs: what each design adds per
// URL against today on the same list (the design's gate items, and all
// units, which also move with the timing the gate changes), how polite
// the address saw it, and the list's span.
func GateTable(reps []*Report) string {
	var b strings.Builder
	b.WriteString("| list | design | **gate write units / URL** | write units / URL (vs today) | read units / URL (vs today) | $ DynamoDB per million URLs (vs today) | smallest start gap / ServerDelay, starts closer, most in flight to one address | hottest key, write units in one second | requests; span (requests x ServerDelay to the busiest address) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	var base *Report
	for _, r := range reps {
		if r.Cfg.Gate == GateNone {
			base = r
		}
		u := float64(max(1, r.URLs))
		w, rd := r.WCU/u, r.RCU/u
		bw, br := base.WCU/float64(max(1, base.URLs)), base.RCU/float64(max(1, base.URLs))
		usd := func(r *Report) float64 { return (r.WCU*priceWRU + r.RCU*priceRRU) / (float64(max(1, r.URLs)) / 1e6) }
		gap := "-"
		if r.AddrGaps > 0 {
			gap = fmt.Sprintf("%.2f, %d of %d, %d", r.AddrMinGapRel, r.AddrClose, r.AddrGaps, r.AddrMaxInflight)
		}
		fmt.Fprintf(&b, "| %s | %s | **%.3f** | %.3f (%+.3f) | %.3f (%+.3f) | $%.2f (%+.2f) | %s | %s %.0f | %s; %s (%s) |\n",
			strings.SplitN(r.Cfg.Name, ", ", 2)[0], gateNames[r.Cfg.Gate], r.WByCat[catGate]/u,
			w, w-bw, rd, rd-br, usd(r), usd(r)-usd(base), gap, r.HotTableKey, r.HotTable,
			num(float64(r.Requests)), dur(r.LastResult), dur(time.Duration(r.BusiestAddr)*r.Cfg.ServerDelay))
	}
	return b.String()
}
