package main

import (
	"math"
	"math/rand/v2"
	"time"
)

// The virtual clock: simulated time is nanoseconds since epoch, advanced
// only by the event queue. Events at the same instant run in the order
// they were scheduled, so a run is a function of its seed.

// epoch is time zero of every run (a Monday; the real NextHostCheck works
// on wall-clock milliseconds, so the date only shifts the stagger phase).
var epoch = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

type event struct {
	t   int64
	seq uint64
	fn  func()
}

func (a *event) before(b *event) bool {
	return a.t < b.t || a.t == b.t && a.seq < b.seq
}

// clock is the event queue: a binary heap by (time, sequence), typed to
// keep the millions of events a run makes free of boxing.
type clock struct {
	now    int64
	seq    uint64
	q      []event
	events uint64
}

// at schedules fn at simulated time t (never in the past).
func (c *clock) at(t int64, fn func()) {
	if t < c.now {
		t = c.now
	}
	c.seq++
	c.q = append(c.q, event{t: t, seq: c.seq, fn: fn})
	i := len(c.q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !c.q[i].before(&c.q[p]) {
			break
		}
		c.q[i], c.q[p] = c.q[p], c.q[i]
		i = p
	}
}

// after schedules fn d from now.
func (c *clock) after(d int64, fn func()) { c.at(c.now+d, fn) }

// step runs the next event; false when none is left or the next is past
// limit.
func (c *clock) step(limit int64) bool {
	if len(c.q) == 0 || c.q[0].t > limit {
		return false
	}
	e := c.q[0]
	n := len(c.q) - 1
	c.q[0] = c.q[n]
	c.q[n] = event{}
	c.q = c.q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && c.q[r].before(&c.q[l]) {
			m = r
		}
		if !c.q[m].before(&c.q[i]) {
			break
		}
		c.q[i], c.q[m] = c.q[m], c.q[i]
		i = m
	}
	c.now = e.t
	c.events++
	e.fn()
	return true
}

// wall is the simulated time as a time.Time, for the product's own
// functions (NextHostCheck works on wall-clock milliseconds).
func wall(t int64) time.Time { return epoch.Add(time.Duration(t)) }

func fromWall(t time.Time) int64 { return int64(t.Sub(epoch)) }

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
)

// Dist is a latency distribution given by its median and 99th percentile:
// a log-normal through both.
type Dist struct{ P50, P99 time.Duration }

// sample draws from d; fixed returns the median.
func (d Dist) sample(r *rand.Rand, fixed bool) int64 {
	if fixed || d.P99 <= d.P50 {
		return int64(d.P50)
	}
	sigma := math.Log(float64(d.P99)/float64(d.P50)) / 2.3263
	return int64(float64(d.P50) * math.Exp(sigma*r.NormFloat64()))
}

// lognormal draws a value with median m and log-spread sigma.
func lognormal(r *rand.Rand, m, sigma float64) float64 {
	return m * math.Exp(sigma*r.NormFloat64())
}
