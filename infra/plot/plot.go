// Package plot draws the benchmark's and the simulation's PNG charts: a
// raster canvas with lines, boxes and 7x13 text, and panels that map data
// into it. It is small on purpose: the charts need lines, bars and labels
// in a fixed font, byte-for-byte the same on every machine, which a
// general plotting library (gonum/plot, with its vector back-ends and
// font loading) gives at the price of a large dependency tree.
package plot

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Colours the charts share.
var (
	White = color.RGBA{255, 255, 255, 255}
	Black = color.RGBA{0, 0, 0, 255}
	Grid  = color.RGBA{225, 225, 225, 255}
)

// Canvas is a tiny raster plotter: lines, boxes and 7x13 text.
type Canvas struct{ img *image.RGBA }

// New returns a white canvas w by h pixels.
func New(w, h int) *Canvas {
	c := &Canvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
	c.Rect(c.img.Bounds(), White)
	return c
}

// Bounds is the canvas's rectangle.
func (c *Canvas) Bounds() image.Rectangle { return c.img.Bounds() }

// Text writes s with its baseline's left end at (x, y).
func (c *Canvas) Text(x, y int, s string, col color.Color) {
	d := &font.Drawer{Dst: c.img, Src: image.NewUniform(col), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// TextWidth is the width of s in pixels (7 a character).
func TextWidth(s string) int { return 7 * len(s) }

// Rect fills r.
func (c *Canvas) Rect(r image.Rectangle, col color.Color) {
	draw.Draw(c.img, r, &image.Uniform{col}, image.Point{}, draw.Src)
}

// Line draws a line of the given width; dash > 0 draws dashes that long.
func (c *Canvas) Line(x0, y0, x1, y1 float64, width int, col color.Color, dash int) {
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

// PNG encodes the canvas.
func (c *Canvas) PNG() ([]byte, error) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, c.img); err != nil {
		return nil, fmt.Errorf("encode png: %w", err)
	}
	return buf.Bytes(), nil
}

// Save writes the canvas to path as a PNG.
func (c *Canvas) Save(path string) error {
	b, err := c.PNG()
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o666); err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	return nil
}

// Panel maps data coordinates into a rectangle of the canvas.
type Panel struct {
	C                      *Canvas
	R                      image.Rectangle
	Xmin, Xmax, Ymin, Ymax float64
}

// Px is x's pixel column.
func (p Panel) Px(x float64) float64 {
	return float64(p.R.Min.X) + (x-p.Xmin)/(p.Xmax-p.Xmin)*float64(p.R.Dx())
}

// Py is y's pixel row.
func (p Panel) Py(y float64) float64 {
	return float64(p.R.Max.Y) - (y-p.Ymin)/(p.Ymax-p.Ymin)*float64(p.R.Dy())
}

// Axes draws the frame, grid, ticks and labels (no x labels when xfmt is
// empty: the caller labels the ticks).
func (p Panel) Axes(title, xlabel, ylabel string, xstep, ystep float64, xfmt, yfmt string) {
	c := p.C
	for x := math.Ceil(p.Xmin/xstep) * xstep; x <= p.Xmax+1e-9; x += xstep {
		X := p.Px(x)
		c.Line(X, float64(p.R.Min.Y), X, float64(p.R.Max.Y), 1, Grid, 0)
		if xfmt == "" {
			continue
		}
		s := fmt.Sprintf(xfmt, x)
		c.Text(int(X)-TextWidth(s)/2, p.R.Max.Y+16, s, Black)
	}
	for y := math.Ceil(p.Ymin/ystep) * ystep; y <= p.Ymax+1e-9; y += ystep {
		Y := p.Py(y)
		c.Line(float64(p.R.Min.X), Y, float64(p.R.Max.X), Y, 1, Grid, 0)
		s := fmt.Sprintf(yfmt, y)
		c.Text(p.R.Min.X-8-TextWidth(s), int(Y)+4, s, Black)
	}
	x0, y0, x1, y1 := float64(p.R.Min.X), float64(p.R.Min.Y), float64(p.R.Max.X), float64(p.R.Max.Y)
	c.Line(x0, y1, x1, y1, 1, Black, 0)
	c.Line(x0, y0, x0, y1, 1, Black, 0)
	c.Line(x0, y0, x1, y0, 1, Black, 0)
	c.Line(x1, y0, x1, y1, 1, Black, 0)
	c.Text(p.R.Min.X+(p.R.Dx()-TextWidth(title))/2, p.R.Min.Y-10, title, Black)
	c.Text(p.R.Min.X+(p.R.Dx()-TextWidth(xlabel))/2, p.R.Max.Y+34, xlabel, Black)
	c.Text(p.R.Min.X-60, p.R.Min.Y-10, ylabel, Black)
}

// LegendItem is one line of a legend: a stroke and its label.
type LegendItem struct {
	Label string
	Col   color.Color
	Dash  int
}

// Legend draws items one under the other from (x, y).
func (p Panel) Legend(x, y int, items []LegendItem) {
	for i, it := range items {
		Y := float64(y + 16*i)
		p.C.Line(float64(x), Y-4, float64(x+24), Y-4, 3, it.Col, it.Dash)
		p.C.Text(x+30, int(Y), it.Label, Black)
	}
}

// Polyline joins the points (xs[i], ys[i]) with 2-pixel lines.
func (p Panel) Polyline(xs, ys []float64, col color.Color) {
	for i := 1; i < len(xs); i++ {
		p.C.Line(p.Px(xs[i-1]), p.Py(ys[i-1]), p.Px(xs[i]), p.Py(ys[i]), 2, col, 0)
	}
}

// NiceStep picks a 1, 2 or 5 times a power of ten step giving at most n
// ticks over span.
func NiceStep(span float64, n int) float64 {
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

// NiceCeil rounds v up to a round axis maximum (1, 1.2, 1.5, 2, 2.5, 3,
// 4, 5, 6 or 8 times a power of ten).
func NiceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
