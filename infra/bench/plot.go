package main

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/infra/plot"
)

var (
	colOurs  = color.RGBA{31, 119, 180, 255}
	colColly = color.RGBA{255, 127, 14, 255}
	colLocal = color.RGBA{44, 160, 44, 255}
	colBound = color.RGBA{214, 39, 40, 255}
)

// rateSeries is the request rate around each step: requests starting
// within half a second either side, per second.
func rateSeries(st RunStats, step time.Duration) (xs, ys []float64) {
	if len(st.reqs) == 0 {
		return nil, nil
	}
	var end time.Duration
	for _, r := range st.reqs {
		end = max(end, r.Start.Sub(st.start))
	}
	for t := time.Duration(0); t <= end+time.Second; t += step {
		n := 0
		for _, r := range st.reqs {
			if d := r.Start.Sub(st.start) - t; d >= -500*time.Millisecond && d < 500*time.Millisecond {
				n++
			}
		}
		xs, ys = append(xs, t.Seconds()), append(ys, float64(n))
	}
	return xs, ys
}

// writePlot draws the H run: requests per second over time for each system
// with the H/d bound, and the distribution of per-host gaps.
func writePlot(path string, pr *PolitenessResult) error {
	type series struct {
		name string
		st   RunStats
		col  color.Color
	}
	var ss []series
	if pr.Moto != nil {
		ss = append(ss, series{"urldownloader on moto", *pr.Moto, colOurs})
	}
	if pr.Local != nil {
		ss = append(ss, series{"urldownloader, local mode", *pr.Local, colLocal})
	}
	ss = append(ss, series{"Colly", pr.Colly, colColly})
	c := plot.New(1000, 820)
	var names []string
	for _, s := range ss {
		names = append(names, s.name)
	}
	c.Text(20, 24, fmt.Sprintf("H = %d hosts, U = %d URLs each, d = %s, site response time fixed; %s", pr.Hosts, pr.PerHost, pr.Delay, strings.Join(names, " vs ")), plot.Black)

	// Panel 1: rate over time.
	xs, ys := make([][]float64, len(ss)), make([][]float64, len(ss))
	xmax, ymax := 0.0, pr.Bound*1.25
	for i, s := range ss {
		xs[i], ys[i] = rateSeries(s.st, 100*time.Millisecond)
		xmax = math.Max(xmax, last(xs[i]))
		for _, y := range ys[i] {
			ymax = math.Max(ymax, y*1.1)
		}
	}
	p1 := plot.Panel{C: c, R: image.Rect(90, 70, 960, 390), Xmin: 0, Xmax: math.Ceil(xmax/5) * 5, Ymin: 0, Ymax: ymax}
	p1.Axes("requests per second at the site (1 s window), time since the URLs were submitted",
		"seconds", "req/s", plot.NiceStep(p1.Xmax, 12), plot.NiceStep(ymax, 8), "%.0f", "%.0f")
	by := p1.Py(pr.Bound)
	c.Line(float64(p1.R.Min.X), by, float64(p1.R.Max.X), by, 2, colBound, 8)
	legend := []plot.LegendItem{{Label: fmt.Sprintf("H/d bound = %.0f req/s", pr.Bound), Col: colBound, Dash: 8}}
	for i, s := range ss {
		p1.Polyline(xs[i], ys[i], s.col)
		legend = append(legend, plot.LegendItem{Label: fmt.Sprintf("%s (wall %.1f s)", s.name, s.st.Wall.Seconds()), Col: s.col})
	}
	p1.Legend(p1.R.Max.X-330, p1.R.Min.Y+20, legend)

	// Panel 2: gap distribution, in ms, as the share of gaps per bin.
	d := float64(pr.Delay.Milliseconds())
	lo, hi := d*0.96, d*1.3
	bin := math.Max(1, math.Round((hi-lo)/80))
	hist := func(gs []time.Duration) (xs, ys []float64) {
		nb := int(math.Ceil((hi - lo) / bin))
		counts := make([]float64, nb+1)
		for _, g := range gs {
			ms := float64(g) / float64(time.Millisecond)
			i := int((ms - lo) / bin)
			i = max(0, min(i, nb)) // the last bin holds everything above hi
			counts[i]++
		}
		for i := range counts {
			xs = append(xs, lo+float64(i)*bin)
			ys = append(ys, counts[i]/math.Max(1, float64(len(gs))))
		}
		return xs, ys
	}
	hx := make([][]float64, len(ss))
	hy := make([][]float64, len(ss))
	ymax2 := 0.0
	for i, s := range ss {
		hx[i], hy[i] = hist(s.st.gaps)
		for _, y := range hy[i] {
			ymax2 = math.Max(ymax2, y)
		}
	}
	ymax2 = math.Max(0.05, ymax2*1.15)
	p2 := plot.Panel{C: c, R: image.Rect(90, 480, 960, 760), Xmin: lo, Xmax: hi + bin, Ymin: 0, Ymax: ymax2}
	p2.Axes(fmt.Sprintf("per-host gaps (end of a response to the next request's start); last bin: > %.0f ms", hi),
		"gap, ms", "share", plot.NiceStep(hi-lo, 12), plot.NiceStep(ymax2, 6), "%.0f", "%.2f")
	w := (p2.Px(lo+bin) - p2.Px(lo)) / float64(len(ss))
	for k, s := range ss {
		for i := range hx[k] {
			x := p2.Px(hx[k][i]) + float64(k)*w
			c.Rect(image.Rect(int(x), int(p2.Py(hy[k][i])), int(x+w), p2.R.Max.Y), s.col)
		}
	}
	dx := p2.Px(d)
	c.Line(dx, float64(p2.R.Min.Y), dx, float64(p2.R.Max.Y), 2, colBound, 6)
	legend = []plot.LegendItem{{Label: fmt.Sprintf("d = %.0f ms", d), Col: colBound, Dash: 6}}
	for _, s := range ss {
		legend = append(legend, plot.LegendItem{Label: fmt.Sprintf("%s: min %s, p50 %s", s.name, ms(s.st.MinGap), ms(s.st.GapP50)), Col: s.col})
	}
	p2.Legend(p2.R.Max.X-400, p2.R.Min.Y+20, legend)

	return c.Save(path)
}

func last(xs []float64) float64 {
	if len(xs) == 0 {
		return 1
	}
	return xs[len(xs)-1]
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// effSeries is one system's efficiency (steady rate over H/d) by H.
type effSeries struct {
	name   string
	col    color.Color
	hosts  []int
	effs   []float64
	labels []string
	// overall marks the points whose hosts were never all busy at once:
	// their efficiency is the overall rate's, drawn hollow.
	overall []bool
}

// efficiencySeries gathers, over the HTTP rows in order of H, local mode's
// and Colly's efficiency (moto's too when it ran at two H or more): the
// steady rate's, or the overall rate's where the hosts were never all busy
// at once; empty without a local mode row.
func efficiencySeries(rows []*PolitenessResult) []effSeries {
	local := effSeries{name: "urldownloader, local mode", col: colLocal}
	colly := effSeries{name: "Colly", col: colColly}
	moto := effSeries{name: "urldownloader on moto", col: colOurs}
	add := func(s *effSeries, p *PolitenessResult, st *RunStats) {
		if st == nil {
			return
		}
		e, steady := p.plotEfficiency(*st)
		if e <= 0 {
			return
		}
		label := fmt.Sprintf("%d x %d, %s", p.Hosts, p.PerHost, p.Delay)
		if !steady {
			label += " (overall: never all busy)"
		}
		s.hosts, s.effs = append(s.hosts, p.Hosts), append(s.effs, e)
		s.overall = append(s.overall, !steady)
		s.labels = append(s.labels, label)
	}
	for _, p := range rows {
		if p.TLS {
			continue
		}
		add(&moto, p, p.Moto)
		add(&local, p, p.Local)
		if p.Local != nil {
			add(&colly, p, &p.Colly)
		}
	}
	if len(local.hosts) == 0 {
		return nil
	}
	out := []effSeries{local, colly}
	if len(moto.hosts) > 1 {
		out = append(out, moto)
	}
	return out
}

// writeEfficiencyPlot draws efficiency against H on a log scale, one line
// per system, each point labelled with its row's U and d.
func writeEfficiencyPlot(path string, rows []*PolitenessResult) error {
	ss := efficiencySeries(rows)
	c := plot.New(1000, 620)
	c.Text(20, 24, "Politeness efficiency (steady req/s over the H/d bound) against H, each row at its own U and d", plot.Black)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, h := range s.hosts {
			lo, hi = math.Min(lo, float64(h)), math.Max(hi, float64(h))
		}
	}
	xmin, xmax := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if xmax <= xmin {
		xmax = xmin + 1
	}
	p := plot.Panel{C: c, R: image.Rect(90, 70, 960, 470), Xmin: xmin, Xmax: xmax, Ymin: 0, Ymax: 1.1}
	// The x axis is log10(H): a step of one decade, labelled with H; 2
	// and 5 of each decade get grid lines too.
	p.Axes("steady / (H/d); 1.0 is the bound", "H, hosts (log scale)", "efficiency", 1, 0.1, "", "%.1f")
	for e := xmin; e <= xmax; e++ {
		for _, m := range []float64{1, 2, 5} {
			x := e + math.Log10(m)
			if x > xmax+1e-9 {
				break
			}
			X := p.Px(x)
			if m != 1 {
				c.Line(X, float64(p.R.Min.Y), X, float64(p.R.Max.Y), 1, plot.Grid, 0)
			}
			s := fmt.Sprintf("%.0f", math.Pow(10, x))
			c.Text(int(X)-plot.TextWidth(s)/2, p.R.Max.Y+16, s, plot.Black)
		}
	}
	by := p.Py(1)
	c.Line(float64(p.R.Min.X), by, float64(p.R.Max.X), by, 2, colBound, 8)
	legend := []plot.LegendItem{{Label: "H/d bound", Col: colBound, Dash: 8}}
	for k, s := range ss {
		var xs, ys []float64
		for i, h := range s.hosts {
			x, y := math.Log10(float64(h)), s.effs[i]
			xs, ys = append(xs, x), append(ys, y)
			X, Y := int(p.Px(x)), int(p.Py(y))
			c.Rect(image.Rect(X-4, Y-4, X+5, Y+5), s.col)
			if s.overall[i] {
				c.Rect(image.Rect(X-2, Y-2, X+3, Y+3), plot.White)
			}
			// Labels right of the point for the first system, left for
			// the second, so close values do not overprint.
			label := fmt.Sprintf("%.2f", y)
			lx := X + 8
			if k%2 == 1 {
				lx = X - 8 - plot.TextWidth(label)
			}
			c.Text(lx, Y+4-14*(k/2), label, s.col)
		}
		p.Polyline(xs, ys, s.col)
		legend = append(legend, plot.LegendItem{Label: s.name, Col: s.col})
	}
	// Below the axes, where no point can fall.
	p.Legend(p.R.Min.X, p.R.Max.Y+60, legend)
	var notes []string
	if len(ss) > 0 {
		notes = ss[0].labels
	}
	c.Text(90, p.R.Max.Y+60+16*len(legend), "rows (H x U, d): "+strings.Join(notes, "; "), plot.Black)
	c.Text(90, p.R.Max.Y+76+16*len(legend), "hollow: the hosts were never all busy at once; the overall rate over H/d", plot.Black)
	return c.Save(path)
}
