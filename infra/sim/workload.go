package main

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"
)

// WebModel says how hosts behave. Every fraction is an assumption of this
// simulation (stated on the benchmark page), not a measurement.
type WebModel struct {
	// Failure kinds, as fractions of hosts below the top HealthyTop ranks
	// (the busiest sites answer): a name that does not resolve, a
	// connection refused at once, a connection that hangs until
	// FetchTimeout, and a flaky host whose requests fail with 5xx at
	// FlakyP.
	NXDomain, Refused, Blackhole, Flaky float64
	FlakyP                              float64
	HealthyTop                          int
	// RateLimit is the fraction of those hosts that limit our rate as
	// nginx's limit_req does: a request sooner than RateLimitEvery after
	// the last one they accepted is answered 429 without Retry-After.
	RateLimit      float64
	RateLimitEvery time.Duration
	// robots.txt: 404 (allow all), a small file kept in the host item, a
	// larger one in an item of its own; the rest of 200s ask for a
	// Crawl-delay with CrawlDelayP (ranks above CrawlDelayFrom only), one
	// of CrawlDelays.
	Robots404, RobotsSmall float64
	CrawlDelayP            float64
	CrawlDelayFrom         int
	CrawlDelays            []time.Duration
	// Pages: disallowed by robots.txt (hosts with a 200 robots.txt), 404,
	// and 5xx on a healthy host.
	DisallowP, NotFoundP, ServerErrorP float64
	// Response time: each host has a median drawn from a log-normal around
	// HostMedian; each request is log-normal around its host's median.
	HostMedian              time.Duration
	HostSigma, RequestSigma float64
	// Bodies: log-normal around BodyMedian bytes, BinaryP of them binary
	// (base64 in the result, 4/3 larger).
	BodyMedian float64
	BodySigma  float64
	BinaryP    float64
	// EntryBytes is one queued URL's stored size (layout.go's entrySize:
	// 8 + a 24-character id + the URL).
	EntryBytes int
}

// DefaultWeb is the web every scenario runs against.
func DefaultWeb() WebModel {
	return WebModel{
		NXDomain: 0.01, Refused: 0.005, Blackhole: 0.005, Flaky: 0.01, FlakyP: 0.3, HealthyTop: 1000,
		RateLimit: 0.01, RateLimitEvery: 2 * time.Second,
		Robots404: 0.45, RobotsSmall: 0.35, CrawlDelayP: 0.03,
		CrawlDelayFrom: 10000, CrawlDelays: []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second},
		DisallowP: 0.02, NotFoundP: 0.04, ServerErrorP: 0.01,
		HostMedian: 200 * time.Millisecond, HostSigma: 0.6, RequestSigma: 0.5,
		BodyMedian: 30 << 10, BodySigma: 1.0, BinaryP: 0.2,
		EntryBytes: 100,
	}
}

// Host kinds.
const (
	kindHealthy uint8 = iota
	kindNXDomain
	kindRefused
	kindBlackhole
	kindFlaky
	kindRateLimit
)

// robots.txt kinds.
const (
	robots404 uint8 = iota
	robotsSmall
	robotsLarge
)

// weights returns the cumulative distribution of URLs over host ranks:
// Zipf w(r) = r^-s, with every host's share capped at capShare and the
// rest spread by the same law (water-filling), so the head is flat at the
// cap. With s = 1 over a million hosts and a cap of 0.05% this is "a few
// hosts with thousands of URLs, most with one or two" at 10 million a day
// (the busiest 5,000 a day, the median host 2) and at 100 million a day
// the busiest at 50,000, about 60% of what one polite connection at a 1 s
// delay can fetch in a day. Above 100 million a day the cap stays at
// 50,000 a host (Config.HeadCapPerDay): a host sent more than it can be
// fetched only fills its PersistLimit and has the rest dropped, which the
// single-host scenario shows on its own.
func weights(n int, s, capShare float64) []float64 {
	raw := make([]float64, n)
	for r := range raw {
		raw[r] = math.Pow(float64(r+1), -s)
	}
	share := func(c float64) float64 {
		t := 0.0
		for _, w := range raw {
			t += min(c*w, capShare)
		}
		return t
	}
	lo, hi := 0.0, 1.0
	for share(hi) < 1 && capShare*float64(n) >= 1 {
		hi *= 2
	}
	if capShare <= 0 || capShare*float64(n) < 1 {
		lo, hi = 0, 0
		t := 0.0
		for _, w := range raw {
			t += w
		}
		lo, hi = 1/t, 1/t
	}
	for i := 0; i < 60 && hi > lo; i++ {
		mid := (lo + hi) / 2
		if share(mid) < 1 {
			lo = mid
		} else {
			hi = mid
		}
	}
	cdf := make([]float64, n)
	acc := 0.0
	for r, w := range raw {
		p := w * hi
		if capShare > 0 {
			p = min(p, capShare)
		}
		acc += p
		cdf[r] = acc
	}
	for r := range cdf {
		cdf[r] /= acc
	}
	return cdf
}

// pick draws a host rank from the cumulative distribution.
func pick(cdf []float64, r *rand.Rand) int {
	u := r.Float64()
	i := sort.SearchFloat64s(cdf, u)
	if i >= len(cdf) {
		i = len(cdf) - 1
	}
	return i
}

// share returns rank r's share of all URLs.
func share(cdf []float64, r int) float64 {
	if r == 0 {
		return cdf[0]
	}
	return cdf[r] - cdf[r-1]
}

// hostName names rank r. Names are what the real hash places in virtual
// shards, so they look like real ones.
func hostName(r int) string { return "www.site-" + strconv.Itoa(r+1) + ".example" }

// mix is splitmix64: deterministic per-host draws from (seed, rank, salt)
// that do not depend on the order hosts are first met.
func mix(seed uint64, r int, salt uint64) float64 {
	z := seed ^ uint64(r)*0x9e3779b97f4a7c15 ^ salt*0xbf58476d1ce4e5b9
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// traits sets a host's fixed behaviour from its rank.
func (s *Sim) traits(h *host) {
	w, r, seed := s.cfg.Web, int(h.rank), s.cfg.Seed
	u := mix(seed, r, 1)
	if r >= w.HealthyTop {
		switch {
		case u < w.NXDomain:
			h.kind = kindNXDomain
		case u < w.NXDomain+w.Refused:
			h.kind = kindRefused
		case u < w.NXDomain+w.Refused+w.Blackhole:
			h.kind = kindBlackhole
		case u < w.NXDomain+w.Refused+w.Blackhole+w.Flaky:
			h.kind = kindFlaky
		case u < w.NXDomain+w.Refused+w.Blackhole+w.Flaky+w.RateLimit:
			h.kind = kindRateLimit
		}
	}
	u = mix(seed, r, 2)
	switch {
	case u < w.Robots404:
		h.robotsKind = robots404
	case u < w.Robots404+w.RobotsSmall:
		h.robotsKind = robotsSmall
	default:
		h.robotsKind = robotsLarge
	}
	if h.robotsKind != robots404 && r >= w.CrawlDelayFrom && mix(seed, r, 3) < w.CrawlDelayP && len(w.CrawlDelays) > 0 {
		h.crawlDelay = int64(w.CrawlDelays[int(mix(seed, r, 4)*float64(len(w.CrawlDelays)))])
	}
	z := math.Sqrt(-2*math.Log(max(mix(seed, r, 5), 1e-12))) * math.Cos(2*math.Pi*mix(seed, r, 6))
	h.medianMS = float32(max(20, float64(w.HostMedian.Milliseconds())*math.Exp(w.HostSigma*z)))
}

// robotsInlineBytes is what a robots.txt answer adds to the host item: a
// 404 or a small file rides in it (dynamo.maxInlineRobots is 200 bytes
// gzipped), a larger one only marks that its own item exists.
func robotsInlineBytes(k uint8) int {
	switch k {
	case robots404:
		return 30
	case robotsSmall:
		return 230
	default:
		return 30
	}
}

// robotsItemBytes is the size of a robots.txt item of its own (gzip).
const robotsItemBytes = 3 << 10
