package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

var (
	colWhite = color.RGBA{255, 255, 255, 255}
	colBlack = color.RGBA{0, 0, 0, 255}
	colGrid  = color.RGBA{225, 225, 225, 255}
	colOurs  = color.RGBA{31, 119, 180, 255}
	colColly = color.RGBA{255, 127, 14, 255}
	colLocal = color.RGBA{44, 160, 44, 255}
	colBound = color.RGBA{214, 39, 40, 255}
)

// canvas is a tiny raster plotter: lines, boxes and 7x13 text.
type canvas struct{ img *image.RGBA }

func newCanvas(w, h int) *canvas {
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
	draw.Draw(c.img, c.img.Bounds(), &image.Uniform{colWhite}, image.Point{}, draw.Src)
	return c
}

func (c *canvas) text(x, y int, s string, col color.Color) {
	d := &font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func textWidth(s string) int { return 7 * len(s) }

func (c *canvas) rect(r image.Rectangle, col color.Color) {
	draw.Draw(c.img, r, &image.Uniform{col}, image.Point{}, draw.Src)
}

// line draws a line of the given width; dash > 0 draws dashes that long.
func (c *canvas) line(x0, y0, x1, y1 float64, width int, col color.Color, dash int) {
	dx, dy := x1-x0, y1-y0
	n := int(math.Max(math.Abs(dx), math.Abs(dy))) + 1
	for i := 0; i <= n; i++ {
		if dash > 0 && (i/dash)%2 == 1 {
			continue
		}
		t := float64(i) / float64(n)
		x, y := int(math.Round(x0+dx*t)), int(math.Round(y0+dy*t))
		for a := -width / 2; a <= (width-1)/2; a++ {
			for b := -width / 2; b <= (width-1)/2; b++ {
				c.img.Set(x+a, y+b, col)
			}
		}
	}
}

// panel maps data coordinates into a rectangle of the canvas.
type panel struct {
	c                      *canvas
	r                      image.Rectangle
	xmin, xmax, ymin, ymax float64
}

func (p panel) px(x float64) float64 {
	return float64(p.r.Min.X) + (x-p.xmin)/(p.xmax-p.xmin)*float64(p.r.Dx())
}

func (p panel) py(y float64) float64 {
	return float64(p.r.Max.Y) - (y-p.ymin)/(p.ymax-p.ymin)*float64(p.r.Dy())
}

// axes draws the frame, grid, ticks and labels (no x labels when xfmt is
// empty).
func (p panel) axes(title, xlabel, ylabel string, xstep, ystep float64, xfmt, yfmt string) {
	c := p.c
	for x := math.Ceil(p.xmin/xstep) * xstep; x <= p.xmax+1e-9; x += xstep {
		X := p.px(x)
		c.line(X, float64(p.r.Min.Y), X, float64(p.r.Max.Y), 1, colGrid, 0)
		if xfmt == "" {
			continue // the caller labels the ticks
		}
		s := fmt.Sprintf(xfmt, x)
		c.text(int(X)-textWidth(s)/2, p.r.Max.Y+16, s, colBlack)
	}
	for y := math.Ceil(p.ymin/ystep) * ystep; y <= p.ymax+1e-9; y += ystep {
		Y := p.py(y)
		c.line(float64(p.r.Min.X), Y, float64(p.r.Max.X), Y, 1, colGrid, 0)
		s := fmt.Sprintf(yfmt, y)
		c.text(p.r.Min.X-8-textWidth(s), int(Y)+4, s, colBlack)
	}
	x0, y0, x1, y1 := float64(p.r.Min.X), float64(p.r.Min.Y), float64(p.r.Max.X), float64(p.r.Max.Y)
	c.line(x0, y1, x1, y1, 1, colBlack, 0)
	c.line(x0, y0, x0, y1, 1, colBlack, 0)
	c.line(x0, y0, x1, y0, 1, colBlack, 0)
	c.line(x1, y0, x1, y1, 1, colBlack, 0)
	c.text(p.r.Min.X+(p.r.Dx()-textWidth(title))/2, p.r.Min.Y-10, title, colBlack)
	c.text(p.r.Min.X+(p.r.Dx()-textWidth(xlabel))/2, p.r.Max.Y+34, xlabel, colBlack)
	c.text(p.r.Min.X-60, p.r.Min.Y-10, ylabel, colBlack)
}

func (p panel) legend(x, y int, items []legendItem) {
	for i, it := range items {
		Y := float64(y + 16*i)
		p.c.line(float64(x), Y-4, float64(x+24), Y-4, 3, it.col, it.dash)
		p.c.text(x+30, int(Y), it.label, colBlack)
	}
}

type legendItem struct {
	label string
	col   color.Color
	dash  int
}

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
	c := newCanvas(1000, 820)
	var names []string
	for _, s := range ss {
		names = append(names, s.name)
	}
	c.text(20, 24, fmt.Sprintf("H = %d hosts, U = %d URLs each, d = %s, site response time fixed; %s", pr.Hosts, pr.PerHost, pr.Delay, strings.Join(names, " vs ")), colBlack)

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
	p1 := panel{c: c, r: image.Rect(90, 70, 960, 390), xmin: 0, xmax: math.Ceil(xmax/5) * 5, ymin: 0, ymax: ymax}
	p1.axes("requests per second at the site (1 s window), time since the URLs were submitted",
		"seconds", "req/s", niceStep(p1.xmax, 12), niceStep(ymax, 8), "%.0f", "%.0f")
	by := p1.py(pr.Bound)
	c.line(float64(p1.r.Min.X), by, float64(p1.r.Max.X), by, 2, colBound, 8)
	legend := []legendItem{{fmt.Sprintf("H/d bound = %.0f req/s", pr.Bound), colBound, 8}}
	for i, s := range ss {
		polyline(p1, xs[i], ys[i], s.col)
		legend = append(legend, legendItem{fmt.Sprintf("%s (wall %.1f s)", s.name, s.st.Wall.Seconds()), s.col, 0})
	}
	p1.legend(p1.r.Max.X-330, p1.r.Min.Y+20, legend)

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
	p2 := panel{c: c, r: image.Rect(90, 480, 960, 760), xmin: lo, xmax: hi + bin, ymin: 0, ymax: ymax2}
	p2.axes(fmt.Sprintf("per-host gaps (end of a response to the next request's start); last bin: > %.0f ms", hi),
		"gap, ms", "share", niceStep(hi-lo, 12), niceStep(ymax2, 6), "%.0f", "%.2f")
	w := (p2.px(lo+bin) - p2.px(lo)) / float64(len(ss))
	for k, s := range ss {
		for i := range hx[k] {
			x := p2.px(hx[k][i]) + float64(k)*w
			c.rect(image.Rect(int(x), int(p2.py(hy[k][i])), int(x+w), p2.r.Max.Y), s.col)
		}
	}
	dx := p2.px(d)
	c.line(dx, float64(p2.r.Min.Y), dx, float64(p2.r.Max.Y), 2, colBound, 6)
	legend = []legendItem{{fmt.Sprintf("d = %.0f ms", d), colBound, 6}}
	for _, s := range ss {
		legend = append(legend, legendItem{fmt.Sprintf("%s: min %s, p50 %s", s.name, ms(s.st.MinGap), ms(s.st.GapP50)), s.col, 0})
	}
	p2.legend(p2.r.Max.X-400, p2.r.Min.Y+20, legend)

	return c.save(path)
}

func polyline(p panel, xs, ys []float64, col color.Color) {
	for i := 1; i < len(xs); i++ {
		p.c.line(p.px(xs[i-1]), p.py(ys[i-1]), p.px(xs[i]), p.py(ys[i]), 2, col, 0)
	}
}

func last(xs []float64) float64 {
	if len(xs) == 0 {
		return 1
	}
	return xs[len(xs)-1]
}

// niceStep picks a 1, 2 or 5 times a power of ten step giving at most n
// ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
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
	c := newCanvas(1000, 620)
	c.text(20, 24, "Politeness efficiency (steady req/s over the H/d bound) against H, each row at its own U and d", colBlack)
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
	p := panel{c: c, r: image.Rect(90, 70, 960, 470), xmin: xmin, xmax: xmax, ymin: 0, ymax: 1.1}
	// The x axis is log10(H): a step of one decade, labelled with H; 2
	// and 5 of each decade get grid lines too.
	p.axes("steady / (H/d); 1.0 is the bound", "H, hosts (log scale)", "efficiency", 1, 0.1, "", "%.1f")
	for e := xmin; e <= xmax; e++ {
		for _, m := range []float64{1, 2, 5} {
			x := e + math.Log10(m)
			if x > xmax+1e-9 {
				break
			}
			X := p.px(x)
			if m != 1 {
				c.line(X, float64(p.r.Min.Y), X, float64(p.r.Max.Y), 1, colGrid, 0)
			}
			s := fmt.Sprintf("%.0f", math.Pow(10, x))
			c.text(int(X)-textWidth(s)/2, p.r.Max.Y+16, s, colBlack)
		}
	}
	by := p.py(1)
	c.line(float64(p.r.Min.X), by, float64(p.r.Max.X), by, 2, colBound, 8)
	legend := []legendItem{{"H/d bound", colBound, 8}}
	for k, s := range ss {
		var xs, ys []float64
		for i, h := range s.hosts {
			x, y := math.Log10(float64(h)), s.effs[i]
			xs, ys = append(xs, x), append(ys, y)
			X, Y := int(p.px(x)), int(p.py(y))
			c.rect(image.Rect(X-4, Y-4, X+5, Y+5), s.col)
			if s.overall[i] {
				c.rect(image.Rect(X-2, Y-2, X+3, Y+3), colWhite)
			}
			// Labels right of the point for the first system, left for
			// the second, so close values do not overprint.
			label := fmt.Sprintf("%.2f", y)
			lx := X + 8
			if k%2 == 1 {
				lx = X - 8 - textWidth(label)
			}
			c.text(lx, Y+4-14*(k/2), label, s.col)
		}
		polyline(p, xs, ys, s.col)
		legend = append(legend, legendItem{s.name, s.col, 0})
	}
	// Below the axes, where no point can fall.
	p.legend(p.r.Min.X, p.r.Max.Y+60, legend)
	var notes []string
	if len(ss) > 0 {
		notes = ss[0].labels
	}
	c.text(90, p.r.Max.Y+60+16*len(legend), "rows (H x U, d): "+strings.Join(notes, "; "), colBlack)
	c.text(90, p.r.Max.Y+76+16*len(legend), "hollow: the hosts were never all busy at once; the overall rate over H/d", colBlack)
	return c.save(path)
}

// save writes the canvas to path as a PNG.
func (c *canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
