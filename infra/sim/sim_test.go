package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// small is a steady scenario small enough for a smoke test: 20,000 hosts,
// 5 million URLs a day for three minutes, failing hosts given up after
// two minutes so the drain is short. A tenth of the hosts rate-limit (a
// hundredth by default): few hosts get two URLs within RateLimitEvery in
// three minutes, and at 1% whether any did turned on the run's timing.
func small() Config {
	c := Defaults()
	c.Name = "smoke"
	c.Hosts = 20_000
	c.HeadCap = 0.002
	c.PerDay = 5e6
	c.Window = 3 * time.Minute
	c.P.GiveUpAfter = 2 * time.Minute
	c.MaxTime = 30 * time.Minute
	c.Web.RateLimit = 0.1
	return c
}

// TestSmoke runs a small deployment end to end and checks the invariants:
// every URL ends, no two requests to one host closer than the delay the
// politeness core decided, rate-limiting hosts slowed after one 429, one
// worker per host at a time, billed units equal the units charged to keys,
// and the same seed gives the same run.
func TestSmoke(t *testing.T) {
	c := small()
	r := New(c).Run()
	for _, v := range r.Check() {
		t.Error(v)
	}
	if r.Ended != r.URLs || r.URLs < 5000 {
		t.Errorf("%d of %d URLs ended", r.Ended, r.URLs)
	}
	if r.Gaps == 0 || r.MinGapRel < 1 {
		t.Errorf("politeness: %d gaps, smallest %.3f of the delay", r.Gaps, r.MinGapRel)
	}
	if r.GivenUp == 0 || r.ByStatus[stFetched] == 0 || r.ByStatus[stDenied] == 0 {
		t.Errorf("the web model's kinds of hosts did not all show: %+v, %d given up", r.ByStatus, r.GivenUp)
	}
	// A rate-limiting host refuses once: the 429 teaches the core a delay
	// it keeps in the store (issue 22: at most 2 a host).
	if r.LimitedHosts == 0 || r.LimitedMax > 2 {
		t.Errorf("rate limits: %d hosts refused %d requests, at most %d a host; want some, at most 2 a host", r.LimitedHosts, r.Limited, r.LimitedMax)
	}
	again := New(c).Run()
	if again.Events != r.Events || again.WCU != r.WCU || again.P99 != r.P99 {
		t.Errorf("not deterministic: events %d/%d, write units %.1f/%.1f, p99 %s/%s", r.Events, again.Events, r.WCU, again.WCU, r.P99, again.P99)
	}
	t.Logf("\n%s\n%s", Table([]*Report{r}), Details([]*Report{r}))
}

// TestMigration changes the number of virtual shards (16 -> 64) and the
// ShardCount (4 -> 8) while traffic flows, with old and new instances side
// by side for a minute: no host may be stranded (every URL ends) or
// worked twice at once, and politeness holds across the change.
func TestMigration(t *testing.T) {
	c := small()
	c.Name = "migration"
	c.Migrate = &Migration{At: time.Minute, Overlap: time.Minute, VirtualShards: 64, ShardCount: 8}
	r := New(c).Run()
	for _, v := range r.Check() {
		t.Error(v)
	}
	if r.Ended != r.URLs {
		t.Errorf("%d of %d URLs ended", r.Ended, r.URLs)
	}
	if r.MinGapRel < 1 {
		t.Errorf("smallest gap %.3f of the delay", r.MinGapRel)
	}
}

// TestDueIndexHotKey shows the due index's known bottleneck at a traffic
// level computed by hand. With fixed latencies an append is a GetItem and
// a PutItem of 5 ms each, so one ingest lane appends 100 hosts a second and
// an invocation (16 lanes) 1,600; every append of a new host puts its
// due-index entry on the GSI key of its virtual shard, so C invocations at
// once write 1,600·C/16 = 100·C units a second to each of the 16 keys.
// At C = 20 that is 2,000 a second, twice a key's 1,000: throttled. At C = 5
// it is 500 (the busiest key of 16 a few dozen above): no throttling. With
// the proposal's 64 virtual shards, C = 20 gives 500 a key again (plus the
// index deletes of the check workers that start on those hosts).
func TestDueIndexHotKey(t *testing.T) {
	run := func(conc, vshards int) *Report {
		c := Defaults()
		c.Layout = LayoutGSI // the GSI's partition keys, as the store had them
		c.Name = "hot key"
		c.FixedLatency = true
		c.Hosts = 4_000_000
		c.ZipfS, c.HeadCap = 0, 0
		c.Burst = conc * 10_000
		c.IngestPollers, c.IngestMaxConc = conc, conc
		c.VirtualShards, c.ShardCount = vshards, 16
		c.WarmWrite, c.WarmRead = 1e9, 1e9 // the table's level never binds here
		c.MaxTime = 8 * time.Second        // the ingest burst is what matters
		return New(c).Run()
	}
	hot := run(20, 16)
	if hot.Throttled["due-index key"] == 0 || hot.HotGSI < 1000 || !strings.HasPrefix(hot.HotGSIKey, "due-index") {
		t.Errorf("20 ingest invocations at 16 virtual shards: hottest due-index key %.0f units/s (%s), %d throttled; want the 1,000 limit reached and throttling",
			hot.HotGSI, hot.HotGSIKey, hot.Throttled["due-index key"])
	}
	for _, tc := range []struct {
		conc, vshards int
	}{{5, 16}, {20, 64}} {
		r := run(tc.conc, tc.vshards)
		if n := r.DynamoThrottles(); n != 0 || r.HotGSI > 800 || r.HotGSI < 400 {
			t.Errorf("%d ingest invocations at %d virtual shards: hottest due-index key %.0f units/s, %d throttled; want about 500 and none",
				tc.conc, tc.vshards, r.HotGSI, n)
		}
	}
}

// TestTemplate checks that the deployment simulated is template.yaml's.
func TestTemplate(t *testing.T) {
	c := builtin()
	if err := fromTemplate(&c); err != nil {
		t.Fatal(err)
	}
	if c.TableTarget < 20 || c.TableTarget > 90 || c.TableMinW < 1 || c.TableMaxW < c.TableMinW || c.TableMaxR < c.TableMinR {
		t.Errorf("implausible capacity defaults from the template: target %d%%, writes %d-%d, reads %d-%d", c.TableTarget, c.TableMinW, c.TableMaxW, c.TableMinR, c.TableMaxR)
	}
	if c.ShardCount < 1 || c.CheckRun <= 0 || c.CheckTimeout <= c.CheckRun || c.IngestMaxConc < 2 || c.WakeBatchSize < 1 || c.CheckMemoryMB < 128 {
		t.Errorf("implausible settings from the template: %+v", c)
	}
	if c.WakeMaxConc != max(2, c.ShardCount) {
		t.Errorf("wake concurrency %d at ShardCount %d, want the template's max(2, ShardCount)", c.WakeMaxConc, c.ShardCount)
	}
}

// TestInvocationRPS: an invocation held to a few requests a second makes
// its requests later, never sooner (politeness holds), and still ends
// every URL.
func TestInvocationRPS(t *testing.T) {
	c := small()
	c.Name = "slow invocations"
	c.InvocationRPS = 20
	r := New(c).Run()
	for _, v := range r.Check() {
		t.Error(v)
	}
	if r.RateWait == 0 {
		t.Errorf("no request waited for a rate of %.0f a second", c.InvocationRPS)
	}
	if r.Ended != r.URLs || r.MinGapRel < 1 {
		t.Errorf("%d of %d URLs ended, smallest gap %.3f of the delay", r.Ended, r.URLs, r.MinGapRel)
	}
}

// TestMeasuredRates: the default per-invocation rate is the benchmark's
// figure at a measured MemorySize, on the line between two measured
// sizes, the largest's above them (no gain that was not measured) and at
// most the smallest's below them.
func TestMeasuredRates(t *testing.T) {
	rs := measuredRates
	if len(rs) < 2 {
		t.Fatalf("%d measured sizes, want at least two", len(rs))
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].MemoryMB <= rs[i-1].MemoryMB || rs[i].RPS <= 0 {
			t.Fatalf("measuredRates not sorted by size with positive rates: %+v", rs)
		}
	}
	d := Defaults()
	at := func(mb int) float64 {
		d.CheckMemoryMB = mb
		return invocationRPS(d)
	}
	for _, r := range rs {
		if got := at(r.MemoryMB); got != r.RPS {
			t.Errorf("default rate %.1f at %d MB, want the measured %.0f", got, r.MemoryMB, r.RPS)
		}
	}
	a, b := rs[0], rs[1]
	mid := (a.MemoryMB + b.MemoryMB) / 2
	if got, want := at(mid), (a.RPS+b.RPS)/2; math.Abs(got-want) > 1e-9 {
		t.Errorf("default rate %.2f at %d MB, want %.2f, halfway between %d and %d MB", got, mid, want, a.MemoryMB, b.MemoryMB)
	}
	last := rs[len(rs)-1]
	if got := at(2 * last.MemoryMB); got != last.RPS {
		t.Errorf("default rate %.1f at %d MB, want the largest measured size's %.0f", got, 2*last.MemoryMB, last.RPS)
	}
	if got := at(a.MemoryMB / 2); got <= 0 || got > a.RPS {
		t.Errorf("default rate %.1f at %d MB, want above 0 and at most the %.0f measured at %d MB", got, a.MemoryMB/2, a.RPS, a.MemoryMB)
	}
	d.InvocationRPS = 20
	if got := invocationRPS(d); got != 20 {
		t.Errorf("a set InvocationRPS gave %.1f, want 20", got)
	}
}

// TestShapes runs the benchmark's cost shapes through the model and holds
// them to what internal/billing's meter measured on moto for the same
// shapes on the store's due lists and buckets (docs/benchmarks.md, section
// 2): a lone URL costs three writes and a little (its append, its bucket
// add and its share of the bucket's delete, its last commit), wide about
// 0.86-0.87 a URL; and the Zipf list's sizes are the stated law.
func TestShapes(t *testing.T) {
	byName := map[string]*Report{}
	for _, sh := range Shapes() {
		r := New(shapeConfig(sh)).Run()
		for _, v := range r.Check() {
			t.Errorf("%s: %s", sh.Name, v)
		}
		if r.Ended != r.URLs {
			t.Errorf("%s: %d of %d URLs ended", sh.Name, r.Ended, r.URLs)
		}
		byName[sh.Name] = r
	}
	perURL := func(r *Report, cats ...cat) float64 {
		var u float64
		for _, c := range cats {
			u += r.WByCat[c]
		}
		return u / float64(r.URLs)
	}
	tr := byName["trickle"]
	if h, g := perURL(tr, catAppend, catCommit), perURL(tr, catGSI, catIndex); h != 2 || g < 0.95 || g > 1.1 {
		t.Errorf("trickle: %.2f host-item and %.2f index write units a URL, want 2 and about 1 (the meter measured 2.00 and 1.01)", h, g)
	}
	if w := byName["wide"].WCU / float64(byName["wide"].URLs); w < 0.7 || w > 1.0 {
		t.Errorf("wide: %.2f write units a URL, the meter measured 0.86-0.87", w)
	}
	z := zipfSizes(zipfHosts, zipfTop, 1)
	if z[0] != zipfTop || z[1] != zipfTop/2 || z[len(z)-1] != 1 || byName["Zipf"].URLs < 15000 {
		t.Errorf("Zipf sizes %d, %d ... %d, %d URLs", z[0], z[1], z[len(z)-1], byName["Zipf"].URLs)
	}
}

// TestLayouts prices the due-index designs on wide and trickle: every
// layout keeps the run's invariants (it changes what is billed, not who
// works a host or when), a due list per batch and shard removes nearly all
// of wide's index writes, and a lone URL's index costs about one write
// with buckets instead of two with the GSI.
func TestLayouts(t *testing.T) {
	w := map[string]map[Layout]*Report{}
	for _, sh := range Shapes() {
		if sh.Name != "wide" && sh.Name != "trickle" {
			continue
		}
		w[sh.Name] = map[Layout]*Report{}
		for l := range nLayouts {
			c := shapeConfig(sh)
			c.Layout = l
			r := New(c).Run()
			for _, v := range r.Check() {
				t.Errorf("%s, %s: %s", sh.Name, layoutName(c), v)
			}
			w[sh.Name][l] = r
		}
	}
	perURL := func(r *Report) float64 { return r.WCU / float64(r.URLs) }
	index := func(r *Report) float64 { return (r.WByCat[catGSI] + r.WByCat[catIndex]) / float64(r.URLs) }
	if a, b := perURL(w["wide"][LayoutListsBuckets]), perURL(w["wide"][LayoutGSI]); a > 0.7*b {
		t.Errorf("wide: %.2f write units a URL with due lists, %.2f today; want at least 30%% fewer", a, b)
	}
	if g, b := index(w["trickle"][LayoutGSI]), index(w["trickle"][LayoutBucketsTTL]); g != 2 || b < 1 || b > 1.15 {
		t.Errorf("trickle: index write units a URL %.2f today, %.2f with buckets; want 2 and about 1", g, b)
	}
}

// TestCapacityModes prices a hand-computable load: 300 write and 200 read
// units a second, steady. On demand that is 300 x 86,400 x $0.625 + 200 x
// 86,400 x $0.125 per million, $18.36 a day; provisioned at 70% it is
// 429 write and 286 read units all day (the idle index at its minimum of
// 100 each beside them) with no throttling. The bursty day (10x at 09:00)
// throttles while auto scaling catches up from the night's capacity, and
// not when the minimum is held at the peak.
func TestCapacityModes(t *testing.T) {
	c := builtin()
	c.Layout = LayoutGSI // with its index's capacity beside the table's
	c.PerDay, c.Window = 100*86400, 3*time.Minute
	rep := &Report{Cfg: c}
	for range 180 {
		rep.Series = append(rep.Series, second{sent: 100, wcu: 300, rcu: 200})
	}
	rs := priceModes(rep, Scalings(c))
	find := func(curve, mode string) ModeResult {
		for _, r := range rs {
			if strings.HasPrefix(r.Curve, curve) && strings.HasPrefix(r.Mode, mode) {
				return r
			}
		}
		t.Fatalf("no result for %s, %s", curve, mode)
		return ModeResult{}
	}
	if od := find("steady", "on demand"); math.Abs(od.Dollars-18.36) > 0.01 {
		t.Errorf("steady on demand $%.2f a day, want $18.36", od.Dollars)
	}
	want := 24 * (429*pricePWCUHour + 286*pricePRCUHour + 100*(pricePWCUHour+pricePRCUHour))
	if p := find("steady", "provisioned, auto"); p.ThrottledSeconds != 0 || math.Abs(p.Dollars-want) > 0.05 {
		t.Errorf("steady provisioned $%.2f a day (want $%.2f), %d seconds throttled (want none)", p.Dollars, want, p.ThrottledSeconds)
	}
	if p := find("bursty", "provisioned, auto"); p.ThrottledSeconds == 0 || p.Decrease == 0 {
		t.Errorf("bursty day with auto scaling from the night: %d seconds throttled, %d decreases; want some of each", p.ThrottledSeconds, p.Decrease)
	}
	if p := find("bursty", "provisioned, min at"); p.ThrottledSeconds != 0 {
		t.Errorf("bursty day with the minimum at the peak: %d seconds throttled, want none", p.ThrottledSeconds)
	}
}

// TestPolitenessIsTheCore scripts one host's answers (a 500, a timeout, a
// 429 without Retry-After, then answers taking 1.5 s and 0.2 s) and holds
// the simulation's request times to what the product's politeness core
// computes from them, transition by transition, and to the figures worked
// out by hand with the defaults (FetchDelay 1 s, DelayFactor 2): back-off
// 2, 4 and 8 s after the three failures (the 429 also teaches a delay of
// 2 s), then 3 s after the slow answer (2 x 1.5 s) and 2 s after the quick
// one (the learned delay, above 2 x 0.2 s and FetchDelay).
func TestPolitenessIsTheCore(t *testing.T) {
	c := Defaults()
	c.Name = "scripted host"
	c.FixedLatency = true
	// A list of four URLs to one host: the run settles once the host's
	// last commit has landed and its worker is gone.
	c.Sizes = []int{4}
	c.P.RespectRobots = false
	c.CheckRun, c.CheckTimeout = 10*time.Minute, 15*time.Minute
	c.MaxTime = 30 * time.Minute
	script := []scripted{
		{respServerError, 100 * time.Millisecond},
		{respTimeout, c.P.FetchTimeout},
		{respRateLimited, 5 * time.Millisecond},
		{respOK, 1500 * time.Millisecond},
		{respOK, 200 * time.Millisecond},
	}
	s := New(c)
	s.script = append([]scripted(nil), script...)
	s.starts = []int64{}
	r := s.Run()
	for _, v := range r.Check() {
		t.Error(v)
	}
	if r.Ended != r.URLs || len(s.starts) < len(script)+1 {
		t.Fatalf("%d of %d URLs ended, %d requests; want all and at least %d", r.Ended, r.URLs, len(s.starts), len(script)+1)
	}
	pol := politeness.NewPolicy(c.P)
	var st politeness.State
	want := s.starts[0]
	var gaps []time.Duration
	for i, sc := range script {
		if got := s.starts[i]; got != want {
			t.Errorf("request %d started at %s, the core says %s", i+1, time.Duration(got), time.Duration(want))
		}
		end := wall(s.starts[i] + int64(sc.dur))
		st.Fetched(end)
		switch code := sc.resp.code(); {
		case code != 0:
			pol.Refused(&st, end, sc.resp.String(), code, 0, false)
		case sc.resp.transient():
			pol.Failed(&st, end, sc.resp.String())
		default:
			pol.Answered(&st, end, sc.dur)
		}
		want = fromWall(st.Next(pol.Delay(st, 0)))
		gaps = append(gaps, st.Next(pol.Delay(st, 0)).Sub(end))
	}
	if got := s.starts[len(script)]; got != want {
		t.Errorf("request %d started at %s, the core says %s", len(script)+1, time.Duration(got), time.Duration(want))
	}
	hand := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 3 * time.Second, 2 * time.Second}
	if !slices.Equal(gaps, hand) {
		t.Errorf("gaps after each answer %v, want %v", gaps, hand)
	}
	if h := s.hosts[0]; h.pol.RateDelay != 2*time.Second || h.pol.Errors != 0 || !h.pol.FailingSince.IsZero() {
		t.Errorf("stored state %+v, want the learned 2s delay kept and the failure run ended", h.pol)
	}
	if r.ByStatus[stFetchError] != 1 || r.ByStatus[stFetched] != 3 {
		t.Errorf("results %+v, want the first URL failed after MaxAttempts and three fetched", r.ByStatus)
	}
}

// TestLongCrawlDelay: a host whose robots.txt asks for 45 s, longer than a
// worker waits in place (check.WaitsInPlace), is released after each
// request and found again by the due index when its delay has passed: its
// requests come 45 s apart or more, in sessions of one request each.
func TestLongCrawlDelay(t *testing.T) {
	c := Defaults()
	c.Name = "long Crawl-delay"
	c.FixedLatency = true
	c.Sizes = []int{3}
	w := &c.Web
	w.Robots404, w.RobotsSmall = 0, 1
	w.CrawlDelayP, w.CrawlDelayFrom, w.CrawlDelays = 1, 0, []time.Duration{45 * time.Second}
	w.DisallowP, w.NotFoundP, w.ServerErrorP = 0, 0, 0
	c.MaxTime = time.Hour
	s := New(c)
	s.starts = []int64{}
	r := s.Run()
	for _, v := range r.Check() {
		t.Error(v)
	}
	if r.Ended != r.URLs || r.ByStatus[stFetched] != 3 || len(s.starts) != 4 {
		t.Fatalf("%d of %d URLs ended (%+v), %d requests; want 3 fetched with robots.txt and 3 page requests", r.Ended, r.URLs, r.ByStatus, len(s.starts))
	}
	for i := 1; i < len(s.starts); i++ {
		if gap := time.Duration(s.starts[i] - s.starts[i-1]); gap < 45*time.Second || gap > 50*time.Second {
			t.Errorf("request %d came %s after the one before, want 45 s and a little (a response, a due-index tick)", i+1, gap)
		}
	}
	if r.LongDelays < 3 || r.Sessions < 4 || r.MinGapRel < 1 {
		t.Errorf("%d releases for the long delay in %d sessions, smallest gap %.3f of the delay; want a release before each page", r.LongDelays, r.Sessions, r.MinGapRel)
	}
}

// TestAWSLimits holds the model to AWS's account limits: Lambda
// invocations past the account's concurrency are throttled and retried
// (never run), and every URL still ends; Parameter Store takes 40 calls a
// second, the rest throttled.
func TestAWSLimits(t *testing.T) {
	c := small()
	c.Name = "tight account"
	c.AccountConc = 4
	r := New(c).Run()
	for _, v := range r.Check() {
		t.Error(v)
	}
	if r.Ended != r.URLs {
		t.Errorf("%d of %d URLs ended", r.Ended, r.URLs)
	}
	if r.PeakTotal > c.AccountConc || r.Throttled[lambdaThrottle] == 0 {
		t.Errorf("account concurrency %d: peak %d invocations at once, %d throttled; want at most %d and some throttled",
			c.AccountConc, r.PeakTotal, r.Throttled[lambdaThrottle], c.AccountConc)
	}

	s := New(small())
	s.ssm.sec = -1
	loads := 50/paramCalls + 1 // over 50 calls in the first second
	for range loads {
		s.loadParams(0)
	}
	if s.ssm.throttled == 0 || s.ssm.calls != int64(loads*paramCalls) {
		t.Errorf("%d Parameter Store calls in one second: %d throttled; want some past 40", s.ssm.calls, s.ssm.throttled)
	}
}

// TestBucketPositions: each process remembers its own bucket position; a
// process whose bucket another filled pays one refused add and the
// queries for the newest bucket, once; a slot's buckets spread over the
// shard's keys.
func TestBucketPositions(t *testing.T) {
	s := New(small())
	var h host
	h.key, h.vs = "a.example", 3
	a, b := positions{}, positions{}
	for range 3 * bucketCap {
		s.spreadAdd(&h, false, 0, a)
	}
	if s.ddb.refusedAdds != 2 {
		t.Errorf("one process filling three buckets: %d adds refused, want 2 (one a full bucket)", s.ddb.refusedAdds)
	}
	s.spreadAdd(&h, false, 0, b)
	s.spreadAdd(&h, false, 0, b)
	if s.ddb.refusedAdds != 3 {
		t.Errorf("another process's two adds: %d refused in all, want 3 (its first only)", s.ddb.refusedAdds)
	}
	used := 0
	for sub := range dueSpread {
		if s.ddb.dueBins[3*dueSpread+sub].peek(0, true) > 0 {
			used++
		}
	}
	if used < 3 {
		t.Errorf("a slot's three buckets wrote to %d of shard 3's keys, want 3", used)
	}
}
