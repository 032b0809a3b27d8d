package main

import (
	"fmt"
	"math"
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
		// The largest shared address of the 100M/day workload (gateScale),
		// every name due at once, beside hosts alone: under (c) all its
		// hosts are in one virtual shard, with an eighth of the others.
		{"2,000 names on one address beside 2,000 alone", "2,000 hosts x 1 URL on one address and 2,000 hosts x 1 URL each alone, FetchDelay 1 s", func(c *Config) {
			*c = shapeConfig(Shape{cfg: func(c *Config) { c.Sizes = repeat(4000, 1) }})
			c.P.FetchDelay = time.Second
			c.Addr = AddrModel{OneAddr: 2000}
		}},
	}
}

// gateVariant is one design as the comparison runs it; hold: GateHold
// set to gateHold's figure.
type gateVariant struct {
	gate GateDesign
	hold bool
}

var gateVariants = []gateVariant{{GateNone, false}, {GateItem, false}, {GateLease, false}, {GatePlace, false}, {GatePlace, true}}

// gateHold is the (c) variant's GateHold: enough hosts of one address to
// keep its gate busy while each waits its own FetchDelay,
// ceil(FetchDelay / ServerDelay) + 1.
func gateHold(c Config) int {
	return int(math.Ceil(float64(c.P.FetchDelay)/float64(c.ServerDelay))) + 1
}

// gateName names a run's design.
func gateName(c Config) string {
	if c.Gate == GatePlace && c.GateHold > 0 {
		return fmt.Sprintf("(c) + at most %d hosts of an address at once", c.GateHold)
	}
	return gateNames[c.Gate]
}

// gateConfigs are every workload under every design, today's first.
func gateConfigs(seed uint64) []Config {
	var out []Config
	for _, wl := range gateWorkloads() {
		for _, v := range gateVariants {
			var c Config
			wl.cfg(&c)
			c.Seed = seed
			c.Gate, c.ServerDelay, c.ServerConnections = v.gate, gateDelay, 1
			if v.hold {
				c.GateHold = gateHold(c)
			}
			c.Name = wl.Name + ", " + gateName(c)
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
	b.WriteString("| list | design | **gate write units / URL** | write units / URL (vs today) | read units / URL (vs today) | $ DynamoDB per million URLs (vs today) | smallest start gap / ServerDelay, starts closer, most in flight to one address | hottest key, write units in one second | requests; span (requests x ServerDelay to the busiest address); p99 latency of hosts alone |\n")
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
		alone, span := "-", dur(r.LastResult)
		if r.AloneP99 > 0 {
			alone = dur(r.AloneP99)
		}
		if r.Ended < r.URLs {
			span = fmt.Sprintf("**%d of %d URLs without a result after %s**", r.URLs-r.Ended, r.URLs, dur(r.Cfg.MaxTime))
		}
		gap := "-"
		if r.AddrGaps > 0 {
			gap = fmt.Sprintf("%.2f, %d of %d, %d", r.AddrMinGapRel, r.AddrClose, r.AddrGaps, r.AddrMaxInflight)
		}
		fmt.Fprintf(&b, "| %s | %s | **%.3f** | %.3f (%+.3f) | %.3f (%+.3f) | $%.2f (%+.2f) | %s | %s %.0f | %s; %s (%s); %s |\n",
			strings.SplitN(r.Cfg.Name, ", ", 2)[0], gateName(r.Cfg), r.WByCat[catGate]/u,
			w, w-bw, rd, rd-br, usd(r), usd(r)-usd(base), gap, r.HotTableKey, r.HotTable,
			num(float64(r.Requests)), span, dur(time.Duration(r.BusiestAddr)*r.Cfg.ServerDelay), alone)
	}
	return b.String()
}

// gateDNSRate is the DNS change rate the DNS runs use: every host's
// address changes about once an hour, so that a list's minutes meet
// enough changes to measure a move; gateDNS prices the moves at the
// workload's DNSChangePerDay (1% of hosts a day).
const gateDNSRate = 24

// gateDNSConfigs are the shared-hosting mix under each design with DNS
// changing at gateDNSRate.
func gateDNSConfigs(seed uint64) []Config {
	var out []Config
	for _, c := range gateConfigs(seed) {
		if c.Addr.Shared > 0 {
			c.Name = "DNS changes, " + gateName(c)
			c.Addr.DNSChangePerDay = gateDNSRate
			out = append(out, c)
		}
	}
	return out
}

// GateDNSTable renders the DNS runs and prices (c)'s moves at 1% of hosts
// a day: on the list (if its hosts stayed queued a whole day, a bound)
// and at 100M URLs a day (every host with work that day, a bound).
func GateDNSTable(reps []*Report, scale gateScale) string {
	var b strings.Builder
	b.WriteString("| design | changes met by a check | moves | write, read units a move | smallest start gap / ServerDelay | invariants | at 1% of hosts a day: write units / URL on the list (bound), at 100M/day (bound) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range reps {
		per, perR := 0.0, 0.0
		if r.Moves > 0 {
			per, perR = r.MoveW/float64(r.Moves), r.MoveR/float64(r.Moves)
		}
		inv := "hold"
		if v := r.Check(); len(v) > 0 {
			inv = fmt.Sprintf("**%d broken**: %s", len(v), v[0])
		}
		rate := r.Cfg.Addr.DNSChangePerDay / gateDNSRate * 0.01 // the workload's 1% a day
		list := rate * float64(len(r.Cfg.Sizes)) / float64(max(1, r.URLs)) * per
		day := rate * float64(scale.alone+scale.shared) / scale.cfg.PerDay * per
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f, %.2f | %.2f | %s | %.4f, %.6f |\n",
			gateName(r.Cfg), r.DNSChanges, r.Moves, per, perR, r.AddrMinGapRel, inv, list, day)
	}
	return b.String()
}

// gateMain is `sim -gate`: the designs compared (gate.go).
func gateMain(seed uint64, parallel int) error {
	lists, dns := gateConfigs(seed), gateDNSConfigs(seed)
	// A run that breaks an invariant is a design's failure to show (its
	// URLs without a result are in the table), not the command's.
	all, _ := runAll(append(lists, dns...), parallel)
	scale := gateScaleOf(gateScaleConfig())
	fmt.Printf("One gate per server address on AWS: the designs compared (ServerDelay %s, ServerConnections 1; the benchmark's site and delay, the template's deployment; `go run ./infra/sim -gate`).\n\n", dur(gateDelay))
	for _, wl := range gateWorkloads() {
		fmt.Printf("- %s: %s\n", wl.Name, wl.What)
	}
	fmt.Println()
	fmt.Println(GateTable(all[:len(lists)]))
	fmt.Printf("DNS changes: the shared-hosting mix with every host's address changing about %d times a day (a change met by a check; under (c) a move when the new address is in another virtual shard):\n\n", gateDNSRate)
	fmt.Println(GateDNSTable(all[len(lists):], scale))
	fmt.Println("At 100 million URLs a day (the recommended deployment; from the workload, no run):")
	fmt.Println()
	fmt.Println(GateScaleTable(scale))
	return nil
}
