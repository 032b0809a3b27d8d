package main

import (
	"fmt"
	"image/color"
	"math"

	"github.com/urldownloader/urldownloader/infra/plot"
)

// The page's plot: URLs per second (top) and the hottest due-index key's
// write units in its busiest second (bottom) over simulated time, drawn as
// a PNG with the same 7x13 font as the benchmark's plot.

// plotted names the runs drawn, with their colours.
var plotted = []struct {
	name string
	col  color.RGBA
}{
	{"100M/day, template defaults", color.RGBA{127, 127, 127, 255}},
	{"100M/day", color.RGBA{31, 119, 180, 255}},
	{"300M/day", color.RGBA{214, 39, 40, 255}},
	{"300M/day, engine changes", color.RGBA{255, 127, 14, 255}},
	{"300M/day, engine changes, 64 virtual shards", color.RGBA{44, 160, 44, 255}},
	{"dump of 500k URLs, ingest unbounded", color.RGBA{148, 103, 189, 255}},
}

const (
	plotMinutes = 15
	plotBucket  = 10 // seconds a point
)

// plotRuns draws the runs of plotted found in reps.
func plotRuns(reps []*Report) ([]byte, error) {
	const (
		W, H      = 1000, 720
		left, pw  = 80, 880
		ph        = 240
		top1      = 40
		top2      = top1 + ph + 70
		legendTop = top2 + ph + 50
	)
	c := plot.New(W, H)
	type series struct {
		name     string
		col      color.RGBA
		rate     []float64
		hot      []float64
		steady   bool
		drawRate bool
	}
	var all []series
	for _, p := range plotted {
		for _, r := range reps {
			if r.Name != p.name {
				continue
			}
			s := series{name: p.name, col: p.col, steady: r.Cfg.steady()}
			s.drawRate = s.steady
			for i := 0; i < len(r.Series) && i < plotMinutes*60; i += plotBucket {
				rate, hot := 0.0, 0.0
				for j := i; j < i+plotBucket && j < len(r.Series); j++ {
					rate += float64(r.Series[j].worked) / plotBucket
					hot = math.Max(hot, float64(r.Series[j].hotGSI))
				}
				s.rate = append(s.rate, rate)
				s.hot = append(s.hot, hot)
			}
			all = append(all, s)
		}
	}
	ymax1 := 1000.0
	for _, s := range all {
		if s.drawRate {
			for _, v := range s.rate {
				ymax1 = math.Max(ymax1, v)
			}
		}
	}
	ymax1 = plot.NiceCeil(ymax1 * 1.05)
	ymax2 := 1200.0
	panel := func(top int, title string, ymax float64, limit float64) func(pts []float64, col color.Color) {
		black, grid := color.RGBA{0, 0, 0, 255}, color.RGBA{225, 225, 225, 255}
		c.Text(left, top-12, title, black)
		for k := 0; k <= 5; k++ {
			y := float64(top+ph) - float64(ph)*float64(k)/5
			c.Line(left, y, left+pw, y, 1, grid, 0)
			lbl := num(ymax * float64(k) / 5)
			c.Text(left-8-7*len(lbl), int(y)+4, lbl, black)
		}
		for m := 0; m <= plotMinutes; m++ {
			x := float64(left) + float64(pw)*float64(m)/plotMinutes
			c.Line(x, float64(top), x, float64(top+ph), 1, grid, 0)
			lbl := fmt.Sprint(m)
			c.Text(int(x)-7*len(lbl)/2, top+ph+16, lbl, black)
		}
		c.Line(left, float64(top), left+pw, float64(top), 1, black, 0)
		c.Line(left, float64(top+ph), left+pw, float64(top+ph), 1, black, 0)
		c.Line(left, float64(top), left, float64(top+ph), 1, black, 0)
		c.Line(left+pw, float64(top), left+pw, float64(top+ph), 1, black, 0)
		if limit > 0 {
			red := color.RGBA{214, 39, 40, 255}
			y := float64(top+ph) - float64(ph)*limit/ymax
			c.Line(left, y, left+pw, y, 1, red, 6)
			lbl := "partition key limit: 1,000 write units/s"
			c.Text(left+pw-8-7*len(lbl), int(y)-6, lbl, red)
		}
		return func(pts []float64, col color.Color) {
			px, py := -1.0, -1.0
			for k, v := range pts {
				x := float64(left) + float64(pw)*float64(k*plotBucket)/60/plotMinutes
				y := float64(top+ph) - float64(ph)*math.Min(v, ymax)/ymax
				if px >= 0 {
					c.Line(px, py, x, y, 2, col, 0)
				}
				px, py = x, y
			}
		}
	}
	draw1 := panel(top1, "URLs ended per second (10 s means; steady scenarios)", ymax1, 0)
	for _, s := range all {
		if s.drawRate {
			draw1(s.rate, s.col)
		}
	}
	draw2 := panel(top2, "Hottest due-index partition key: write units in its busiest second (max over 10 s)", ymax2, 1000)
	for _, s := range all {
		draw2(s.hot, s.col)
	}
	c.Text(left+pw/2-60, top2+ph+34, "simulated minutes", color.Black)
	x, y := left, legendTop
	for _, s := range all {
		c.Line(float64(x), float64(y-4), float64(x+22), float64(y-4), 3, s.col, 0)
		c.Text(x+28, y, s.name, color.Black)
		x += 60 + 7*len(s.name)
		if x > W-320 {
			x, y = left, y+20
		}
	}
	return c.PNG()
}
