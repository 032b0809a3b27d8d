package main

import (
	"fmt"
	"math"
	"strings"
)

// plot draws, as SVG, the results per second (top) and the hottest
// due-index key's write units per second against the 1,000 limit (bottom)
// over simulated time, for the 100M/day and 200M/day runs and the dump.
func plot(reps []*Report) string {
	want := []string{"100M/day, template defaults", "100M/day", "200M/day (100M at a 2x peak)", "200M/day, proposal", "dump of 2M URLs", "dump of 2M URLs, proposal"}
	colors := []string{"#7f7f7f", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"}
	var sel []*Report
	var col []string
	for i, name := range want {
		for _, r := range reps {
			if r.Name == name {
				sel = append(sel, r)
				col = append(col, colors[i])
			}
		}
	}
	const (
		W, H       = 960, 640
		left, top  = 70, 40
		pw, ph     = 860, 230
		gap        = 70
		bucket     = 10 // seconds per point
		maxMinutes = 40
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	xmax := 0.0
	ymaxR, ymaxG := 0.0, 1200.0
	series := func(r *Report, f func(second) float64, agg func(a, b float64) float64) []float64 {
		var pts []float64
		for i := 0; i < len(r.Series); i += bucket {
			v := 0.0
			for j := i; j < i+bucket && j < len(r.Series); j++ {
				v = agg(v, f(r.Series[j]))
			}
			pts = append(pts, v)
		}
		return pts
	}
	res := make([][]float64, len(sel))
	hot := make([][]float64, len(sel))
	for i, r := range sel {
		res[i] = series(r, func(x second) float64 { return float64(x.results) }, func(a, b float64) float64 { return a + b/bucket })
		hot[i] = series(r, func(x second) float64 { return float64(x.hotGSI) }, math.Max)
		xmax = math.Max(xmax, float64(len(res[i])*bucket)/60)
		for _, v := range res[i] {
			ymaxR = math.Max(ymaxR, v)
		}
		for _, v := range hot[i] {
			ymaxG = math.Max(ymaxG, v)
		}
	}
	xmax = math.Min(math.Max(xmax, 1), maxMinutes)
	ymaxR = niceCeil(ymaxR * 1.05)
	ymaxG = niceCeil(ymaxG * 1.05)
	panel := func(y0 int, title, ylabel string, ymax float64, data [][]float64, limit float64) {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", left, y0-12, title)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", left, y0, pw, ph)
		for k := 0; k <= 5; k++ {
			v := ymax * float64(k) / 5
			y := float64(y0+ph) - float64(ph)*float64(k)/5
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, y, left+pw, y)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, num(v))
		}
		for m := 0.0; m <= xmax+1e-9; m += tickStep(xmax) {
			x := float64(left) + float64(pw)*m/xmax
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>`+"\n", x, y0, x, y0+ph)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", x, y0+ph+16, m)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n", 18, y0+ph/2, 18, y0+ph/2, ylabel)
		if limit > 0 {
			y := float64(y0+ph) - float64(ph)*limit/ymax
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#d62728" stroke-dasharray="6 4"/>`+"\n", left, y, left+pw, y)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#d62728" text-anchor="end">partition key limit 1,000</text>`+"\n", left+pw-6, y-5)
		}
		for i, pts := range data {
			var d strings.Builder
			for k, v := range pts {
				m := float64(k*bucket) / 60
				if m > xmax {
					break
				}
				x := float64(left) + float64(pw)*m/xmax
				y := float64(y0+ph) - float64(ph)*math.Min(v, ymax)/ymax
				if k == 0 {
					fmt.Fprintf(&d, "M%.1f %.1f", x, y)
				} else {
					fmt.Fprintf(&d, " L%.1f %.1f", x, y)
				}
			}
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.6"/>`+"\n", d.String(), col[i])
		}
	}
	panel(top, "Results per second (10 s means)", "URLs/s", ymaxR, res, 0)
	panel(top+ph+gap, "Hottest due-index partition key: write units in its busiest second (10 s max)", "write units/s", ymaxG, hot, 1000)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">simulated minutes</text>`+"\n", left+pw/2, top+2*ph+gap+34)
	ly := top + 2*ph + gap + 52
	lx := left
	for i, r := range sel {
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", lx, ly, lx+18, ly, col[i])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+22, ly+4, r.Name)
		lx += 30 + 7*len(r.Name)
		if lx > W-200 {
			lx, ly = left, ly+18
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func tickStep(xmax float64) float64 {
	switch {
	case xmax <= 10:
		return 1
	case xmax <= 30:
		return 5
	default:
		return 10
	}
}
