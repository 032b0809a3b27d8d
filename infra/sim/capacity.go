package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/internal/billing"
)

// The table's capacity mode over a day: on demand (billed per request)
// against provisioned capacity with Application Auto Scaling, priced on a
// day's load at one second's resolution. The load is a 100M/day run's own
// per-second units (its steady part, Report.Series), repeated and scaled to
// the day's curve, so a second's jitter above the minute's mean is the
// simulated deployment's, not a guess. Its background (lease renewals,
// due queries: under 1% of the writes and about 3% of the reads at
// 100M/day) is scaled with the rest, a little too much at night and too
// little at the peak.
//
// Auto scaling as AWS documents it for DynamoDB target tracking: a
// CloudWatch alarm on consumed capacity (one-minute sums) above the target
// utilization for scaleOutMinutes consecutive minutes sets the capacity to
// consumption / target, which takes effect updateLag later (requests past
// the old capacity are throttled meanwhile); below the
// target less 20 points for scaleInMinutes minutes it lowers it the same
// way, at most four decreases a day plus one for each hour without one.
// Throttled demand is not consumed, so a throttled table shows 100%
// utilization and grows by 1/target a step. Unused capacity is kept as
// burst credit for up to 300 s. A throttled request is retried (the SDK
// and the store), so throttling delays work rather than losing it; the
// target is none.

const (
	pricePWCUHour = billing.PriceWriteUnitHour // provisioned write capacity unit-hour, us-east-1
	pricePRCUHour = billing.PriceReadUnitHour  // provisioned read capacity unit-hour

	scaleOutMinutes = 2
	scaleInMinutes  = 15
	// updateLag runs from the alarm's second minute to the new capacity
	// serving: AWS, "DynamoDB Metrics and dimensions": the alarms "might
	// have a short delay of up to a few minutes", then UpdateTable "takes
	// several minutes".
	updateLag    = 4 * time.Minute
	burstSeconds = 300
)

// Scaling is one provisioned configuration: the template's
// TableTargetUtilization, TableMin/MaxWriteCapacity and
// TableMin/MaxReadCapacity (the index scales with the same values).
type Scaling struct {
	Name       string
	Target     float64
	MinW, MaxW float64
	MinR, MaxR float64
	// AtPeak sets each minimum to the day's busiest minute at the target
	// (capacity that never needs to scale up).
	AtPeak bool
}

// Scalings are the provisioned configurations priced: the template's
// defaults, and the same with minimums held at the day's peak.
func Scalings(c Config) []Scaling {
	t := float64(c.TableTarget) / 100
	def := Scaling{
		Name:   fmt.Sprintf("provisioned, auto scaling at %d%%, min %d (template defaults)", c.TableTarget, c.TableMinW),
		Target: t, MinW: float64(c.TableMinW), MaxW: float64(c.TableMaxW), MinR: float64(c.TableMinR), MaxR: float64(c.TableMaxR),
	}
	peak := def
	peak.Name, peak.AtPeak = fmt.Sprintf("provisioned, min at the day's peak (%d%%)", c.TableTarget), true
	return []Scaling{def, peak}
}

// DayCurve is a day's arrival rate, as a multiple of the mean, by minute.
type DayCurve struct {
	Name   string
	Factor func(minute int) float64
}

// DayCurves are the days priced: steady, and a working day with the same
// total (a 0.25x night and an 8-hour 2.5x day that starts at once at 09:00,
// as when a producer's job starts).
func DayCurves() []DayCurve {
	return []DayCurve{
		{"steady 100M/day", func(int) float64 { return 1 }},
		{"bursty day, same total (0.25x, 2.5x 09:00-17:00)", func(m int) float64 {
			if m >= 9*60 && m < 17*60 {
				return 2.5
			}
			return 0.25
		}},
	}
}

// dayDemand is a day's demand per second: table and index write and read
// units.
type dayDemand struct {
	w, r, iw, ir []float32
}

// demand spreads a steady run's per-URL units over a day: second t of the
// day takes the run's steady second t (cyclically) scaled by the curve.
func demand(rep *Report, curve DayCurve) dayDemand {
	c := rep.Cfg
	from, to := int(c.Window)/int(sec)/steadyFraction, int(c.Window)/int(sec)
	series := rep.Series[from:min(to, len(rep.Series))]
	var sent float64
	for _, x := range series {
		sent += float64(x.sent)
	}
	// The index's share of each (the GSI has capacity of its own).
	iwShare := rep.WByCat[catGSI] / math.Max(1, rep.WCU)
	irShare := rep.RByCat[catQuery] / math.Max(1, rep.RCU)
	if c.Layout != LayoutGSI {
		irShare = 0 // the index's items are the table's
	}
	mean := sent / float64(len(series)) // URLs a second in the run
	perDay := c.PerDay / 86400
	d := dayDemand{}
	for t := 0; t < 86400; t++ {
		x := series[t%len(series)]
		k := curve.Factor(t/60) * perDay / mean
		w, r := float64(x.wcu)*k, float64(x.rcu)*k
		d.w = append(d.w, float32(w*(1-iwShare)))
		d.iw = append(d.iw, float32(w*iwShare))
		d.r = append(d.r, float32(r*(1-irShare)))
		d.ir = append(d.ir, float32(r*irShare))
	}
	return d
}

// provisioned is one auto-scaled capacity (the table's writes, say) over
// the day.
type provisioned struct {
	cap, min, max, target float64
	pending               []pendingCap
	credit                float64
	above, below          int
	decreases             []int // minutes of the day's decreases
	unitHours             float64
	throttled, demanded   float64
	throttledSecs         int
	consumedMin           float64
	peak                  float64
}

type pendingCap struct {
	at  int // second it takes effect
	cap float64
}

// run serves the same day twice, from the minimum, and keeps the second
// day's figures: what a deployment pays every day, its capacity where the
// day before left it.
func (p *provisioned) run(dem []float32) {
	p.cap = p.min
	p.credit = burstSeconds * p.cap
	p.day(dem)
	p.decreases, p.unitHours, p.throttled, p.demanded, p.throttledSecs, p.peak = nil, 0, 0, 0, 0, 0
	p.day(dem)
}

// day serves a day of per-second demand.
func (p *provisioned) day(dem []float32) {
	for t, x := range dem {
		for len(p.pending) > 0 && p.pending[0].at <= t {
			p.cap = p.pending[0].cap
			p.pending = p.pending[1:]
		}
		p.step(t, x)
	}
}

// step serves second t's demand and, at a minute's end, runs the policy.
func (p *provisioned) step(t int, x float32) {
	p.peak = math.Max(p.peak, p.cap)
	want := float64(x)
	p.demanded += want
	served := math.Min(want, p.cap)
	if want > p.cap {
		extra := math.Min(want-p.cap, p.credit)
		p.credit -= extra
		served += extra
		if miss := want - served; miss > 1e-9 {
			p.throttled += miss
			p.throttledSecs++
		}
	} else {
		p.credit = math.Min(p.credit+p.cap-want, burstSeconds*p.cap)
	}
	p.consumedMin += served
	p.unitHours += p.cap / 3600
	if t%60 == 59 {
		p.minute(t)
		p.consumedMin = 0
	}
}

// minute is the scaling policy's alarms at the end of a minute.
func (p *provisioned) minute(t int) {
	used := p.consumedMin / 60
	util := used / p.cap
	if util > p.target {
		p.above++
	} else {
		p.above = 0
	}
	if util < p.target-0.2 {
		p.below++
	} else {
		p.below = 0
	}
	next := p.cap
	if len(p.pending) > 0 {
		next = p.pending[len(p.pending)-1].cap
	}
	want := math.Min(p.max, math.Max(p.min, math.Ceil(used/p.target)))
	switch {
	case p.above >= scaleOutMinutes && want > next:
		p.pending = append(p.pending, pendingCap{at: t + 1 + int(updateLag/time.Second), cap: want})
		p.above = 0
	case p.below >= scaleInMinutes && want < next && p.mayDecrease(t/60):
		p.decreases = append(p.decreases, t/60)
		p.pending = append(p.pending, pendingCap{at: t + 1 + int(updateLag/time.Second), cap: want})
		p.below = 0
	}
}

// mayDecrease is DynamoDB's limit: four decreases a day at any time, then
// one more for each hour without a decrease.
func (p *provisioned) mayDecrease(minute int) bool {
	if len(p.decreases) < 4 {
		return true
	}
	return minute-p.decreases[len(p.decreases)-1] >= 60
}

// ModeResult is one capacity mode's day.
type ModeResult struct {
	Curve, Mode                string
	Dollars, PerMillion        float64
	ThrottledShare             float64 // of the demanded units
	ThrottledSeconds           int
	PeakW, MeanUtilW, Decrease int
	Layout                     string
}

// priceModes prices a steady run's units over each curve in each mode.
func priceModes(rep *Report, scalings []Scaling) []ModeResult {
	var out []ModeResult
	urls := rep.Cfg.PerDay
	for _, curve := range DayCurves() {
		d := demand(rep, curve)
		var w, r float64
		for i := range d.w {
			w += float64(d.w[i] + d.iw[i])
			r += float64(d.r[i] + d.ir[i])
		}
		od := w*priceWRU + r*priceRRU
		out = append(out, ModeResult{Curve: curve.Name, Mode: "on demand", Dollars: od, PerMillion: od / (urls / 1e6), Layout: layoutNames[rep.Cfg.Layout]})
		for _, sc := range scalings {
			parts := []struct {
				dem      []float32
				min, max float64
				price    float64
				write    bool
			}{
				{d.w, sc.MinW, sc.MaxW, pricePWCUHour, true}, {d.iw, sc.MinW, sc.MaxW, pricePWCUHour, true},
				{d.r, sc.MinR, sc.MaxR, pricePRCUHour, false}, {d.ir, sc.MinR, sc.MaxR, pricePRCUHour, false},
			}
			res := ModeResult{Curve: curve.Name, Mode: sc.Name, Layout: layoutNames[rep.Cfg.Layout]}
			var thr, dem float64
			for i, pt := range parts {
				if i == 1 && rep.Cfg.Layout != LayoutGSI {
					continue // no GSI: its capacity stays at the minimum of 1
				}
				lo := pt.min
				if sc.AtPeak {
					lo = math.Ceil(peakMinute(pt.dem) / sc.Target)
				}
				p := &provisioned{min: max(1, lo), max: math.Max(pt.max, lo), target: sc.Target}
				p.run(pt.dem)
				res.Dollars += p.unitHours * pt.price
				thr += p.throttled
				dem += p.demanded
				res.ThrottledSeconds = max(res.ThrottledSeconds, p.throttledSecs)
				if i == 0 {
					res.PeakW = int(p.peak)
					res.MeanUtilW = int(100 * p.demanded / math.Max(1, p.unitHours*3600))
					res.Decrease = len(p.decreases)
				}
			}
			res.ThrottledShare = thr / math.Max(1, dem)
			res.PerMillion = res.Dollars / (urls / 1e6)
			out = append(out, res)
		}
	}
	return out
}

// peakMinute is the busiest minute's mean demand a second.
func peakMinute(dem []float32) float64 {
	best, acc := 0.0, 0.0
	for t, x := range dem {
		acc += float64(x)
		if t%60 == 59 {
			best = math.Max(best, acc/60)
			acc = 0
		}
	}
	return best
}

// ModeTable renders priceModes' results.
func ModeTable(rs []ModeResult) string {
	var b strings.Builder
	b.WriteString("| day | layout | capacity mode | **DynamoDB $ a day** | **$ per million URLs** (DynamoDB) | table write capacity: peak, mean use, decreases | **throttled**: share of units, seconds (worst of table and index) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		capCol, thr := "-", "none (per-key limits aside)"
		if r.Mode != "on demand" {
			capCol = fmt.Sprintf("%d, %d%%, %d", r.PeakW, r.MeanUtilW, r.Decrease)
			thr = "**none**"
			if r.ThrottledSeconds > 0 {
				thr = fmt.Sprintf("**%.2f%%**, %d s", 100*r.ThrottledShare, r.ThrottledSeconds)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | **$%.0f** | **$%.2f** | %s | %s |\n", r.Curve, r.Layout, r.Mode, r.Dollars, r.PerMillion, capCol, thr)
	}
	return b.String()
}
