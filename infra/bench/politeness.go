package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/urldownloader/urldownloader/infra/local"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/fetch"
	"github.com/urldownloader/urldownloader/shared/hostqueue"
	"github.com/urldownloader/urldownloader/shared/result"
	"github.com/urldownloader/urldownloader/shared/urlmsg"
)

// benchEnv is what the parts of a run share.
type benchEnv struct {
	cfg     Config
	moto    *moto.Server
	motoPID int
	log     *slog.Logger
	root    string
	seq     atomic.Int64
	// firstIP hands out disjoint loopback ranges to the sites of a run.
	firstIP atomic.Int64
	// shape is what the last pipeline started with.
	shapeMu sync.Mutex
	shape   struct {
		shards, maxConc int
		period          string
	}
	// The local mode runner, built on first use.
	runnerOnce sync.Once
	local      *localRunner
	runnerErr  error
}

// robotsRules is the politeness sites' robots.txt: every path allowed but
// /private/, whose URLs (one per host) must end denied without a request.
const robotsRules = "User-agent: *\nDisallow: /private/\n"

// privatePath is a path robotsRules disallows.
const privatePath = "/private/"

// site starts a demo site on loopback addresses no other site of this run
// uses, serving robots (404 when empty) as robots.txt.
func (e *benchEnv) site(hosts int, robots string) (*demosite.Site, error) {
	first := e.firstIP.Add(int64(hosts)) - int64(hosts) + 2
	return demosite.Start(demosite.Options{Hosts: hosts, FirstIP: int(first), Latency: e.cfg.Latency, Robots: robots})
}

// pipeline starts a local downloader on the run's moto with the template's
// defaults, the given fetch delay and cfg.Params.
func (e *benchEnv) pipeline(ctx context.Context, name string, delay time.Duration, extra map[string]string, mod func(*local.Options)) (*local.Pipeline, error) {
	params := map[string]string{"FetchDelay": delay.String()}
	for k, v := range e.cfg.Params {
		params[k] = v
	}
	for k, v := range extra {
		params[k] = v
	}
	opts := local.Options{
		Endpoint:  e.moto.Endpoint,
		Prefix:    fmt.Sprintf("bench-%s-%d", name, e.seq.Add(1)),
		Params:    params,
		Addresses: fetch.PrivatePolicy(),
		// The template's CHECK_RUN_SECONDS: one invocation starts requests
		// for 55 s, then the next (locally at once) takes over.
		CheckRun: 55 * time.Second,
		Log:      slog.New(slog.NewJSONHandler(discardErrors{e.log}, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	if mod != nil {
		mod(&opts)
	}
	p, err := local.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	e.shapeMu.Lock()
	defer e.shapeMu.Unlock()
	e.shape.shards = p.Stack.ShardCount
	e.shape.maxConc, _ = strconv.Atoi(p.Stack.Params["MaxConcurrentHosts"])
	e.shape.period = p.Stack.Params["CheckHostPeriod"]
	return p, nil
}

// discardErrors forwards the pipeline's error logs to the bench's log, so
// a run that goes wrong says why.
type discardErrors struct{ log *slog.Logger }

func (d discardErrors) Write(p []byte) (int, error) {
	d.log.Warn("pipeline", "log", string(p))
	return len(p), nil
}

// RunStats describe one system's run over the site, from the site's own
// request log.
type RunStats struct {
	System string
	// Requests counts every request the site served (robots.txt included).
	Requests int
	Robots   int
	// Disallowed counts the URLs under a path robots.txt disallows that the
	// system was given (ours only; one per host), DisallowedRequested the
	// requests for such paths that the site saw, Denied the denied
	// results.
	Disallowed, DisallowedRequested, Denied int
	Wall                                    time.Duration
	// FirstStart is the p50 and max, over hosts, of the time from the run's
	// start to the host's first request.
	FirstStartP50, FirstStartMax time.Duration
	// OverallRate is Requests over the span from the first request's start
	// to the last one's end.
	OverallRate float64
	// SteadyRate is the request rate while every host is between its first
	// and last request; SteadyWindow is that window (zero when the hosts
	// were never all busy at once for two delays).
	SteadyRate   float64
	SteadyWindow time.Duration
	// PeakRate is the highest rate over any one-second window.
	PeakRate float64
	// Pacing is d divided by the mean time between the starts of two
	// consecutive requests to one host: 1.0 when a host is asked again as
	// soon as its delay allows, lower when the system is late.
	Pacing float64
	// Gaps, between a response's end and the next request's start on one
	// host.
	MinGap         time.Duration
	MinGapHost     string
	GapP50, GapP99 time.Duration
	CPU            CPUShare
	// Ingested is when the last URL was in the store (ours only).
	Ingested time.Duration
	// Dynamo is the store's requests to moto and their latency (ours only).
	Dynamo             Latency
	Results            map[string]int
	Duplicates, Errors int
	// Process is local mode's child process (local mode only), StateBytes
	// its state file's size at the end.
	Process    *childRun
	StateBytes int64

	reqs  []demosite.Request
	start time.Time
	gaps  []time.Duration
}

// PolitenessResult is one H of the politeness benchmark.
type PolitenessResult struct {
	Hosts, PerHost int
	Delay          time.Duration
	// Bound is H/d in requests per second.
	Bound float64
	// Moto is the run on the emulated AWS stack, Local the run through
	// local mode (`make run`); either may be missing.
	Moto, Local *RunStats
	Colly       RunStats
	// MaxHostsPerShard is the most hosts one check invocation owns, against
	// MaxConcurrentHosts, the most it works at once.
	MaxHostsPerShard, MaxConcurrentHosts, ShardCount int
	CheckHostPeriod                                  string
}

// politeness runs one H: on moto when withMoto, through local mode when
// withLocal, and Colly, each in turn on the same site and URLs. Ours also
// get one URL per host that robots.txt disallows.
func (e *benchEnv) politeness(ctx context.Context, hosts int, withMoto, withLocal bool) (*PolitenessResult, error) {
	cfg := e.cfg
	u := cfg.PerHost
	if n, ok := cfg.PerHostAt[hosts]; ok {
		u = n
	}
	site, err := e.site(hosts, robotsRules)
	if err != nil {
		return nil, err
	}
	defer site.Close()
	urls := site.URLs(u)
	rng := rand.New(rand.NewPCG(uint64(hosts), 5))
	rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	// Ours: the same URLs with a disallowed one per host among them.
	ourURLs := slices.Clone(urls)
	for _, h := range site.Hosts() {
		ourURLs = append(ourURLs, "http://"+h+privatePath+"0")
	}
	rng.Shuffle(len(ourURLs), func(i, j int) { ourURLs[i], ourURLs[j] = ourURLs[j], ourURLs[i] })
	res := &PolitenessResult{Hosts: hosts, PerHost: u, Delay: cfg.Delay, Bound: float64(hosts) / cfg.Delay.Seconds()}
	if withMoto {
		if err := e.moto.Reset(ctx); err != nil {
			return nil, err
		}
		e.log.Info("politeness: ours on moto", "hosts", hosts, "urls", len(ourURLs))
		st, err := e.oursRun(ctx, site, ourURLs, hosts)
		if err != nil {
			return nil, err
		}
		st.obeyed(hosts)
		res.Moto = &st
		e.shapeMu.Lock()
		res.ShardCount, res.MaxConcurrentHosts, res.CheckHostPeriod = e.shape.shards, e.shape.maxConc, e.shape.period
		e.shapeMu.Unlock()
		perShard := map[int]int{}
		for _, h := range site.Hosts() {
			perShard[hostqueue.VirtualShard(h)%max(1, res.ShardCount)]++
		}
		for _, n := range perShard {
			res.MaxHostsPerShard = max(res.MaxHostsPerShard, n)
		}
		e.log.Info("politeness: ours on moto done", "wall", st.Wall.Round(time.Millisecond), "steady", st.SteadyRate, "bound", res.Bound, "motoCPU", st.CPU.Moto)
		// Let the pipeline's connections close before the next system starts.
		time.Sleep(500 * time.Millisecond)
	}
	if withLocal {
		e.log.Info("politeness: ours in local mode", "hosts", hosts, "urls", len(ourURLs))
		st, err := e.localRun(ctx, site, ourURLs, hosts, cfg.Delay, "pol"+strconv.Itoa(hosts))
		if err != nil {
			return nil, err
		}
		st.obeyed(hosts)
		res.Local = &st
		e.log.Info("politeness: ours in local mode done", "wall", st.Wall.Round(time.Millisecond), "steady", st.SteadyRate, "bound", res.Bound)
		time.Sleep(500 * time.Millisecond)
	}
	e.log.Info("politeness: colly", "hosts", hosts)
	cr, err := e.collyRun(ctx, site, urls, hosts)
	if err != nil {
		return nil, err
	}
	res.Colly = cr
	e.log.Info("politeness: colly done", "wall", cr.Wall.Round(time.Millisecond), "steady", cr.SteadyRate)
	return res, nil
}

// obeyed fills in the robots.txt figures of one of our runs, which had one
// disallowed URL per host: those should all be denied, none requested, and
// do not count as errors.
func (st *RunStats) obeyed(hosts int) {
	st.Disallowed = hosts
	st.Denied = st.Results[string(result.StatusDenied)]
	st.Errors = 0
	for s, n := range st.Results {
		if s != string(result.StatusFetched) && s != string(result.StatusDenied) {
			st.Errors += n
		}
	}
	st.Errors += max(0, st.Denied-hosts)
}

func (e *benchEnv) oursRun(ctx context.Context, site *demosite.Site, urls []string, hosts int) (RunStats, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	b, err := e.start(ctx, "pol"+strconv.Itoa(hosts), e.cfg.Delay, nil, 0, false)
	if err != nil {
		return RunStats{}, err
	}
	defer b.Close()
	sampler := startSampler(e.motoPID, 500*time.Millisecond)
	// As the README advises a producer: a host's URLs travel together, so
	// each request writes each of its hosts once and no two requests race
	// on one host (the shuffled order within each host is kept).
	byHost := slices.Clone(urls)
	slices.SortStableFunc(byHost, func(a, b string) int { return strings.Compare(hostOf(a), hostOf(b)) })
	var posted time.Time
	rep, err := b.driveIdle(ctx, func(ctx context.Context) (map[string]urlmsg.Message, error) {
		defer func() { posted = time.Now() }()
		return b.post(ctx, byHost)
	})
	sampler.Stop()
	if err != nil {
		return RunStats{}, fmt.Errorf("run: %w", err)
	}
	start := rep.HandedAt
	wall := rep.DoneAt.Sub(start)
	st := analyze("urldownloader", site.Requests(), start, time.Now(), e.cfg.Delay, hosts)
	st.Wall = wall
	st.CPU = sampler.share(start, start.Add(wall))
	st.Results = rep.ByStatus
	for s, n := range rep.ByStatus {
		if s != string(result.StatusFetched) {
			st.Errors += n
		}
	}
	st.Duplicates = rep.Duplicates
	st.Dynamo = b.ddbLat.summary()
	st.Ingested = posted.Sub(start)
	return st, nil
}

func (e *benchEnv) collyRun(ctx context.Context, site *demosite.Site, urls []string, hosts int) (RunStats, error) {
	c := colly.NewCollector(colly.Async(true))
	rules := make([]*colly.LimitRule, 0, hosts)
	for _, h := range site.Hosts() {
		rules = append(rules, &colly.LimitRule{DomainGlob: h, Delay: e.cfg.Delay, Parallelism: 1})
	}
	if err := c.Limits(rules); err != nil {
		return RunStats{}, fmt.Errorf("colly limits: %w", err)
	}
	var ok, failed atomic.Int64
	c.OnResponse(func(*colly.Response) { ok.Add(1) })
	c.OnError(func(*colly.Response, error) { failed.Add(1) })
	sampler := startSampler(e.motoPID, 500*time.Millisecond)
	start := time.Now()
	for _, u := range urls {
		if err := c.Visit(u); err != nil {
			failed.Add(1)
		}
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		sampler.Stop()
		return RunStats{}, ctx.Err()
	}
	wall := time.Since(start)
	sampler.Stop()
	st := analyze("colly", site.Requests(), start, time.Now(), e.cfg.Delay, hosts)
	st.Wall = wall
	st.CPU = sampler.share(start, start.Add(wall))
	st.Results = map[string]int{"fetched": int(ok.Load())}
	st.Errors = int(failed.Load())
	if st.Errors > 0 {
		return st, fmt.Errorf("colly: %d requests failed", st.Errors)
	}
	return st, nil
}

// analyze computes a run's figures from the site's log, taking the
// requests that started between from and to.
func analyze(system string, all []demosite.Request, from, to time.Time, d time.Duration, hosts int) RunStats {
	st := RunStats{System: system, start: from}
	by := map[string][]demosite.Request{}
	for _, r := range all {
		if r.Start.Before(from) || r.Start.After(to) {
			continue
		}
		st.reqs = append(st.reqs, r)
		by[r.Host] = append(by[r.Host], r)
		if r.Path == "/robots.txt" {
			st.Robots++
		}
		if strings.HasPrefix(r.Path, privatePath) {
			st.DisallowedRequested++
		}
	}
	st.Requests = len(st.reqs)
	if st.Requests == 0 {
		return st
	}
	var firsts []time.Duration
	var busyFrom, busyTo time.Time
	var pairs int
	var span time.Duration
	first, last := st.reqs[0].Start, st.reqs[0].End
	st.MinGap = -1
	for h, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
		firsts = append(firsts, rs[0].Start.Sub(from))
		if rs[0].Start.Before(first) {
			first = rs[0].Start
		}
		if l := rs[len(rs)-1]; l.End.After(last) {
			last = l.End
		}
		if busyFrom.IsZero() || rs[0].Start.After(busyFrom) {
			busyFrom = rs[0].Start
		}
		if busyTo.IsZero() || rs[len(rs)-1].Start.Before(busyTo) {
			busyTo = rs[len(rs)-1].Start
		}
		for i := 1; i < len(rs); i++ {
			g := rs[i].Start.Sub(rs[i-1].End)
			st.gaps = append(st.gaps, g)
			if st.MinGap < 0 || g < st.MinGap {
				st.MinGap, st.MinGapHost = g, h
			}
		}
		pairs += len(rs) - 1
		span += rs[len(rs)-1].Start.Sub(rs[0].Start)
	}
	slices.Sort(firsts)
	st.FirstStartP50, st.FirstStartMax = firsts[len(firsts)/2], firsts[len(firsts)-1]
	if len(by) < hosts {
		// A host never asked: the steady state never had every host busy.
		busyTo = busyFrom
	}
	st.OverallRate = float64(st.Requests) / last.Sub(first).Seconds()
	if w := busyTo.Sub(busyFrom); w >= 2*d {
		n := 0
		for _, r := range st.reqs {
			if !r.Start.Before(busyFrom) && r.Start.Before(busyTo) {
				n++
			}
		}
		st.SteadyWindow, st.SteadyRate = w, float64(n)/w.Seconds()
	}
	if span > 0 {
		st.Pacing = d.Seconds() * float64(pairs) / span.Seconds()
	}
	slices.Sort(st.gaps)
	if len(st.gaps) > 0 {
		st.GapP50 = st.gaps[len(st.gaps)/2]
		st.GapP99 = st.gaps[min(len(st.gaps)-1, len(st.gaps)*99/100)]
	}
	// The peak over one-second windows, sliding by request.
	starts := make([]time.Time, len(st.reqs))
	for i, r := range st.reqs {
		starts[i] = r.Start
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	j := 0
	for i := range starts {
		for starts[i].Sub(starts[j]) >= time.Second {
			j++
		}
		st.PeakRate = max(st.PeakRate, float64(i-j+1))
	}
	return st
}

// hostOf is the host:port of a demo site URL.
func hostOf(u string) string {
	rest := strings.TrimPrefix(u, "http://")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}
