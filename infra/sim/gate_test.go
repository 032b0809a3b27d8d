package main

import (
	"strings"
	"testing"
	"time"
)

// TestGateDesigns holds the comparison of `sim -gate` (gate.go) to its
// claims: placement by address (c) adds no write for a list of one host
// per address (the target: at most 0.1 write units a URL more than
// today) where a gate item (a) adds at least one and a lease (b) more than
// the target; (c) keeps 40 names on one address ServerDelay apart, one in
// flight, in about requests x ServerDelay, where today sends them at once
// and (b) takes far longer; a burst of 2,000 names on one address starves
// its shard's other hosts under (c) unless the dispatcher holds a few of
// them, and defeats (a) on its gate item; DNS changes move hosts under
// (c) without a request in the wrong shard.
func TestGateDesigns(t *testing.T) {
	cfgs := append(gateConfigs(1), gateDNSConfigs(1)...)
	reps, _ := runAll(cfgs, 2)
	by := map[string]*Report{}
	for _, r := range reps {
		by[r.Name] = r
	}
	get := func(list string, g GateDesign, hold bool) *Report {
		for _, r := range reps {
			if strings.HasPrefix(r.Name, list+", ") && r.Cfg.Gate == g && (r.Cfg.GateHold > 0) == hold {
				return r
			}
		}
		t.Fatalf("no run of %q under %s", list, gateNames[g])
		return nil
	}
	gateUnits := func(r *Report) float64 { return r.WByCat[catGate] / float64(r.URLs) }
	perURL := func(r *Report) float64 { return r.WCU / float64(r.URLs) }
	holds := func(r *Report) {
		t.Helper()
		for _, v := range r.Check() {
			t.Errorf("%s: %s", r.Name, v)
		}
		if r.AddrClose > 0 || r.AddrMaxInflight > 1 {
			t.Errorf("%s: %d starts to one address closer than ServerDelay (smallest %.2f of it), up to %d in flight; want none and 1",
				r.Name, r.AddrClose, r.AddrMinGapRel, r.AddrMaxInflight)
		}
	}

	// One host per address: the cost target.
	const alone = "one host per address"
	today := get(alone, GateNone, false)
	for _, hold := range []bool{false, true} {
		c := get(alone, GatePlace, hold)
		holds(c)
		if g, d := gateUnits(c), perURL(c)-perURL(today); g != 0 || d > 0.1 {
			t.Errorf("%s: %.3f gate write units a URL, %+.3f in all against today; want 0 and at most +0.1", c.Name, g, d)
		}
	}
	if a := get(alone, GateItem, false); gateUnits(a) < 1 {
		t.Errorf("%s: %.3f gate write units a URL; a write per request is at least 1", a.Name, gateUnits(a))
	}
	if b := get(alone, GateLease, false); gateUnits(b) <= 0.1 {
		t.Errorf("%s: %.3f gate write units a URL; a lease per invocation and address costs more than the target", b.Name, gateUnits(b))
	}

	// 40 names on one address.
	const forty = "40 names on one address"
	if r := get(forty, GateNone, false); r.AddrClose == 0 || r.AddrMaxInflight < 2 {
		t.Errorf("%s: %d starts closer than ServerDelay, %d in flight: today's bug did not show", r.Name, r.AddrClose, r.AddrMaxInflight)
	}
	place := get(forty, GatePlace, true)
	holds(place)
	floor := time.Duration(place.BusiestAddr) * place.Cfg.ServerDelay
	if place.LastResult < floor || place.LastResult > floor*5/4 {
		t.Errorf("%s: span %s, requests x ServerDelay %s; want within 25%% above it", place.Name, place.LastResult, floor)
	}
	if b := get(forty, GateLease, false); b.LastResult < 3*place.LastResult/2 {
		t.Errorf("%s: span %s against (c)'s %s; the deferrals were expected to cost at least half as long again", b.Name, b.LastResult, place.LastResult)
	}

	// A burst of 2,000 names on one address beside hosts alone.
	const burst = "2,000 names on one address beside 2,000 alone"
	base := get(burst, GateNone, false)
	held := get(burst, GatePlace, true)
	holds(held)
	if free := get(burst, GatePlace, false); free.AloneP99 < 5*time.Minute || held.AloneP99 > 2*base.AloneP99 {
		t.Errorf("hosts alone, p99: %s today, %s under (c), %s with the dispatcher's hold; want (c) to starve them (over 5 min) and the hold to keep them within twice today's",
			base.AloneP99, free.AloneP99, held.AloneP99)
	}
	if a := get(burst, GateItem, false); a.HotTable < a.Cfg.KeyWriteLimit && a.Ended == a.URLs {
		t.Errorf("%s: hottest key %.0f units/s, every URL ended; the herd on the gate item was expected to reach the key's limit", a.Name, a.HotTable)
	}

	// DNS changes.
	for _, r := range reps {
		if !strings.HasPrefix(r.Name, "DNS changes") || r.Cfg.Gate != GatePlace {
			continue
		}
		holds(r)
		if r.Moves == 0 || r.MoveW/float64(r.Moves) > 4 {
			t.Errorf("%s: %d moves, %.1f write units each; want some, at most 4 each", r.Name, r.Moves, r.MoveW/float64(max(1, r.Moves)))
		}
	}

	// 100M URLs a day: the largest shared address's shard stays within
	// one invocation's rate under (c); its gate item is hot under (a).
	g := gateScaleOf(gateScaleConfig())
	capURLs := g.invRPS / requestsPerURL100M
	if x := g.byAddr[g.vA]; g.names < 1000 || x > capURLs/2 {
		t.Errorf("100M/day: the largest address has %d names, its shard %.1f URLs/s against an invocation's %.0f; want over 1,000 names and under half", g.names, x, capURLs)
	}
	if herd := float64(g.names) / gateDelay.Seconds(); herd <= gateScaleConfig().KeyWriteLimit {
		t.Errorf("100M/day: %.0f failed writes a second on the gate item of %d names; want past the key's limit", herd, g.names)
	}
}
