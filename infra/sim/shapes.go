package main

import (
	"time"

	"github.com/urldownloader/urldownloader/internal/zipf"
)

// The cost shapes: the benchmark's burst, wide and trickle (docs/
// benchmarks.md, section 2, measured on moto by internal/billing's meter),
// and a list whose host sizes follow a Zipf law, run through the same
// model so that the simulation's meter can be checked against the real one
// on the benchmark's shapes and then priced on a realistic list.
//
// Every shape runs against the benchmark's site (benchWeb: every host
// answers in a few milliseconds, robots.txt is a 404) at its fetch delay,
// 250 ms, with the template's deployment, so its units are comparable with
// the measured ones; its cost is the whole run's (background included)
// over its URLs, as the benchmark's is, until the deployment is idle again
// (every host's last commit and index removal counted). Unlike the
// benchmark's trickle, which calls ingest directly, every shape here comes
// through the input queue, whose receive and delete cost SQS requests.

// costDelay is the benchmark's CostDelay.
const costDelay = 250 * time.Millisecond

// benchWeb is the benchmark's site (infra/bench's loopback farm): healthy
// hosts, a fixed few milliseconds a page, robots.txt a 404, small pages.
func benchWeb() WebModel {
	w := DefaultWeb()
	w.NXDomain, w.Refused, w.Blackhole, w.Flaky = 0, 0, 0, 0
	w.Robots404, w.RobotsSmall, w.CrawlDelayP = 1, 0, 0
	w.DisallowP, w.NotFoundP, w.ServerErrorP = 0, 0, 0
	w.HostMedian, w.HostSigma, w.RequestSigma = 5*time.Millisecond, 0.1, 0.1
	w.BodyMedian, w.BodySigma, w.BinaryP = 2<<10, 0.3, 0
	return w
}

// Shape is one list of URLs to price.
type Shape struct {
	Name, What string
	cfg        func(*Config)
}

// zipfHosts and zipfTop: the Zipf list (internal/zipf, the benchmark's
// Zipf row's too) has 10,000 hosts, host r (from 1) max(1, round(zipfTop /
// r)) URLs: the busiest at PersistLimit (1,000), 9,334 hosts with one URL,
// 16,449 URLs in all, shuffled.
const (
	zipfHosts = zipf.Hosts
	zipfTop   = zipf.Top
)

// zipfSizes returns the Zipf list's host sizes: n hosts, host r (from 1)
// max(1, round(top / r^s)) URLs.
func zipfSizes(n int, top, s float64) []int { return zipf.Sizes(n, top, s) }

func repeat(n, each int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = each
	}
	return out
}

// Shapes are the lists `-cost` prices, the benchmark's three and the Zipf
// list.
func Shapes() []Shape {
	return []Shape{
		{"burst", "1000 URLs to 1 host, PersistLimit 1000, 50 URLs per message", func(c *Config) {
			c.Sizes, c.URLsPerMessage = []int{1000}, 50
			c.P.PersistLimit = 1000
		}},
		// The benchmark's run on moto took its 10,000 messages in two
		// ingest batches, the second after the first's hosts were done
		// (1.92 appends and 1.94 sessions a host); two waves a minute apart
		// through one poller do the same here. The Zipf list goes through
		// the template's mapping, whose five pollers share a dump.
		{"wide", "2000 hosts x 5 URLs shuffled, 1 URL per message, in two ingest batches a minute apart", func(c *Config) {
			c.Sizes = repeat(2000, 5)
			c.Waves, c.Spacing = 2, time.Minute
			c.IngestPollers, c.IngestMaxConc = 1, 1
		}},
		{"trickle", "500 hosts x 1 URL, one URL per ingest invocation (one every 20 ms)", func(c *Config) {
			c.Sizes, c.Spacing = repeat(500, 1), 20*time.Millisecond
			c.IngestBatchSize = 1
		}},
		{"Zipf", "10,000 hosts, host r has max(1, round(1000/r)) URLs (16,449 URLs), shuffled, 1 URL per message", func(c *Config) {
			c.Sizes = zipfSizes(zipfHosts, zipfTop, 1)
		}},
	}
}

// shapeConfig is the deployment a shape runs on: the template's, at the
// benchmark's delay and site.
func shapeConfig(sh Shape) Config {
	c := Defaults()
	c.Name = sh.Name
	c.Web = benchWeb()
	c.P.FetchDelay = costDelay
	c.MaxTime = 2 * time.Hour
	sh.cfg(&c)
	return c
}

// sizesCDF is the cumulative share of URLs over the list's host ranks.
func sizesCDF(sizes []int) []float64 {
	out := make([]float64, len(sizes))
	total, acc := 0.0, 0.0
	for _, n := range sizes {
		total += float64(n)
	}
	for r, n := range sizes {
		acc += float64(n)
		out[r] = acc / total
	}
	return out
}

// sendList puts the list's URLs on the input queue, shuffled, in messages
// of URLsPerMessage: all at time zero, or one message every Spacing.
func (s *Sim) sendList() {
	c := s.cfg
	var ranks []int32
	for r, n := range c.Sizes {
		for range n {
			ranks = append(ranks, int32(r))
		}
	}
	s.rng.Shuffle(len(ranks), func(i, j int) { ranks[i], ranks[j] = ranks[j], ranks[i] })
	per := max(1, c.URLsPerMessage)
	if c.Spacing == 0 || c.Waves > 0 {
		waves := max(1, c.Waves)
		defer func() {
			n := int32(len(s.in.msgs))
			for w := range int32(waves) {
				from, to := n*w/int32(waves), n*(w+1)/int32(waves)
				s.at(int64(w)*int64(c.Spacing), func() { s.arrive(from, to) })
			}
		}()
	}
	msgs := (len(ranks) + per - 1) / per
	for i := 0; i < len(ranks); i += per {
		k := min(per, len(ranks)-i)
		first := int32(len(s.urlSent))
		at := int64(0)
		switch id := len(s.in.msgs); {
		case c.Waves > 0:
			at = int64(id*c.Waves/msgs) * int64(c.Spacing)
		case c.Spacing > 0:
			at = int64(id) * int64(c.Spacing)
		}
		s.m.series(at).sent += int32(k)
		for _, r := range ranks[i : i+k] {
			s.urlSent = append(s.urlSent, at)
			s.urlHost = append(s.urlHost, r)
			s.urlState = append(s.urlState, urlSent)
			s.urlEnds = append(s.urlEnds, 0)
		}
		id := int32(len(s.in.msgs))
		s.in.msgs = append(s.in.msgs, msg{first: first, n: int32(k)})
		if c.Spacing > 0 && c.Waves == 0 {
			s.at(at, func() { s.arrive(id, id+1) })
		}
	}
	s.in.doneSending = true
}
