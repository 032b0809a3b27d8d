package main

import (
	"fmt"
	"math"
	"strings"
)

// requestsPerURL100M is the requests a URL of the 100M/day runs (robots.txt
// and retries included; cost.go's headline steps, "1.08 requests a URL").
const requestsPerURL100M = 1.08

// gateScale is the 100M/day deployment under the shared-hosting mix, from
// the workload alone (no run): the largest shared address, where each
// design puts its hosts, and the load of the virtual shards.
type gateScale struct {
	cfg Config
	// The largest shared address: its names and URLs a second; the
	// busiest address by URLs a second, its names.
	names                 int
	rate                  float64
	busiestNames          int
	busiestRate           float64
	shared, alone, exempt int // hosts
	// URLs a second by virtual shard, placed by name (today, (a), (b))
	// and by address ((c)); the largest address's virtual shard under (c).
	byName, byAddr []float64
	vA             int
	// One check invocation's requests a second (invocationRPS).
	invRPS float64
}

func gateScaleOf(c Config) gateScale {
	s := New(c)
	g := gateScale{cfg: c, invRPS: invocationRPS(c)}
	n := len(s.addr.cum)
	names, rate := make([]int, n), make([]float64, n)
	g.byName = make([]float64, c.VirtualShards)
	g.byAddr = make([]float64, c.VirtualShards)
	perSec := c.PerDay / 86400
	for r := range s.cdf {
		a := s.addrOf(r)
		x := share(s.cdf, r) * perSec
		byName := vshardOf(hostName(r), c.VirtualShards)
		g.byName[byName] += x
		switch {
		case a == addrExempt:
			g.exempt++
			g.byAddr[byName] += x
			continue
		case a < int64(n):
			g.shared++
			names[a]++
			rate[a] += x
		default:
			g.alone++
			if x > g.busiestRate {
				g.busiestRate, g.busiestNames = x, 1
			}
		}
		g.byAddr[vshardOf(addrKey(a), c.VirtualShards)] += x
	}
	largest := 0
	for i := range names {
		if names[i] > names[largest] {
			largest = i
		}
		if rate[i] > g.busiestRate {
			g.busiestRate, g.busiestNames = rate[i], names[i]
		}
	}
	if n > 0 {
		g.names, g.rate = names[largest], rate[largest]
		g.vA = vshardOf(addrKey(int64(largest)), c.VirtualShards)
	}
	return g
}

func maxOf(xs []float64) (int, float64) {
	best := 0
	for i, x := range xs {
		if x > xs[best] {
			best = i
		}
	}
	return best, xs[best]
}

// GateScaleTable says, at 100M URLs a day, whether a virtual shard or a
// partition key gets hot under each design, and what the design does.
func GateScaleTable(g gateScale) string {
	c := g.cfg
	sd := c.ServerDelay.Seconds()
	gateRPS := 1 / sd // one address's requests a second through its gate
	total := c.PerDay / 86400
	mean := total / float64(c.VirtualShards)
	// One invocation runs the shards it owns (VirtualShards / ShardCount).
	perInv := float64(c.VirtualShards) / float64(c.ShardCount)
	capURLs := g.invRPS / requestsPerURL100M
	_, hotName := maxOf(g.byName)
	_, hotAddr := maxOf(g.byAddr)
	reqA := g.rate * requestsPerURL100M
	burst := float64(min(g.names, c.ShardCount*c.P.MaxConcurrentHosts))
	var b strings.Builder
	fmt.Fprintf(&b, "Workload: %s URLs a day over %s hosts (Zipf %.1f), the shared-hosting mix with servers of up to %d names: %s hosts alone on their address, %s on shared servers, %s behind exempt CDN ranges. The largest shared address carries %d names and %.2f URLs/s (%.2f requests/s); the busiest address (%d names) %.2f URLs/s. ServerDelay %s: one address takes at most %.0f requests/s. %d virtual shards, ShardCount %d, one check invocation %.0f requests/s (%.0f URLs/s; invocationRPS at %d MB); a virtual shard's mean load %.1f URLs/s, an invocation's (%.0f shards) %.1f.\n\n",
		num(c.PerDay), num(float64(c.Hosts)), c.ZipfS, c.Addr.MaxNames, num(float64(g.alone)), num(float64(g.shared)), num(float64(g.exempt)),
		g.names, g.rate, reqA, g.busiestNames, g.busiestRate, dur(c.ServerDelay), gateRPS,
		c.VirtualShards, c.ShardCount, g.invRPS, capURLs, c.CheckMemoryMB, mean, perInv, perInv*mean)
	b.WriteString("| design | where the largest address's hosts are | busiest virtual shard, URLs/s (its invocation's load of its capacity) | hottest partition key the gate adds, write units/s (limit 1,000) | what the design does about it |\n")
	b.WriteString("|---|---|---|---|---|\n")
	// An invocation runs perInv shards: the busiest one's and the others' mean.
	shard := func(x float64) string {
		return fmt.Sprintf("%.1f (%.0f%%)", x, 100*(x+(perInv-1)*mean)/capURLs)
	}
	fmt.Fprintf(&b, "| %s | spread by name over %d shards | %s | none | its server gets %.2f requests/s from every shard at once, unpaced |\n",
		gateNames[GateNone], c.VirtualShards, shard(hotName), reqA)
	// (a): at the steady rate, 2 writes a request; a list naming all the
	// address's hosts at once: every waiter's write fails at each slot.
	fmt.Fprintf(&b, "| %s | spread by name | %s (unchanged) | gate item of the address: %.1f steady (2 a request); %.0f when its %d names are due at once (each waiter's failed write every ServerDelay): %s | nothing: the herd is the design's; jitter spreads it, does not shrink it |\n",
		gateNames[GateItem], shard(hotName), 2*min(reqA, gateRPS), (burst+2)/sd, g.names, hotVerdict((burst+2)/sd))
	// (b): a lease write per term per holder, one failed write per other
	// invocation; deferred hosts each a commit and an index move.
	fmt.Fprintf(&b, "| %s | spread by name; one invocation fetches, the others defer | %s (unchanged) | lease item: at most %.2f (a renewal every %s, a failed write per other invocation each term) | deferral: each host of the address met by another invocation is released, due when the lease ends (a commit and an index move: ~%d writes each term when its names are due at once) |\n",
		gateNames[GateLease], shard(hotName), (1+float64(c.ShardCount-1))/(gateLeaseTerm.Seconds()/2), dur(gateLeaseTerm/2), 2*int(burst*float64(c.ShardCount-1)/float64(c.ShardCount)))
	fmt.Fprintf(&b, "| %s | all %d in virtual shard %d | %s; shard %d: %s | none (the shard's due-index keys take its hosts' adds, at most %.0f a second) | its load is capped by its own gate at %.0f requests/s, %.0f%% of an invocation; but a burst of its %d names due at once waits in %d worker slots of %d and fills the due query's window of %d: the shard's other hosts starve (the 2,000-names list above) |\n",
		gateNames[GatePlace], g.names, g.vA, shard(hotAddr), g.vA, shard(g.byAddr[g.vA]), gateRPS, gateRPS, 100*gateRPS/g.invRPS,
		g.names, min(g.names, c.P.MaxConcurrentHosts), c.P.MaxConcurrentHosts, c.P.MaxConcurrentHosts+1)
	fmt.Fprintf(&b, "| (c) + at most ceil(FetchDelay / ServerDelay) + 1 hosts of an address at once (%d here) | the same | the same | none | the dispatcher takes at most %d hosts of one address and its due query reads on past the others (they stay in the index, unwritten): worker slots and the query's window stay free for the shard's other hosts, at the reads of the held entries (the 2,000-names list above) |\n",
		int(math.Ceil(float64(c.P.FetchDelay)/float64(c.ServerDelay)))+1, int(math.Ceil(float64(c.P.FetchDelay)/float64(c.ServerDelay)))+1)
	return b.String()
}

func hotVerdict(units float64) string {
	if units > 1000 {
		return "**hot, throttled**"
	}
	return "not hot"
}

// gateScaleConfig is the 100M/day scenario the README recommends, with
// the shared-hosting mix (servers of up to 2,000 names) and ServerDelay.
func gateScaleConfig() Config {
	for _, c := range Scenarios() {
		if c.Name == "100M/day" {
			c.Addr = SharedMix(2000)
			c.ServerDelay, c.ServerConnections, c.Gate = gateDelay, 1, GatePlace
			return c
		}
	}
	panic("no 100M/day scenario")
}
