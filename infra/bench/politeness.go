package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
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
	return e.siteWith(demosite.Options{Hosts: hosts, Robots: robots})
}

// siteWith starts a demo site shaped by opts on addresses of its own, with
// the bench's latency.
func (e *benchEnv) siteWith(opts demosite.Options) (*demosite.Site, error) {
	first := e.firstIP.Add(int64(opts.Hosts)) - int64(opts.Hosts) + 2
	opts.FirstIP, opts.Latency = int(first), e.cfg.Latency
	return demosite.Start(opts)
}

// fdReserve is what the bench process keeps for other descriptors than the
// site's (moto's connections, files, the runtime's).
const fdReserve = 500

// hostsPerListener is how many hosts share a listening socket, so that the
// site fits the bench process's descriptor limit (RLIMIT_NOFILE, raised to
// its hard limit by the Go runtime): a listener per host, plus a
// connection per host (ours keeps one per host it works) and a fifth more
// for connections closing while their successors open, plus fdReserve.
// One per listener, as on the real web, whenever that fits.
func hostsPerListener(hosts int) (int, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("descriptor limit: %w", err)
	}
	room := int(lim.Cur) - hosts - hosts/5 - fdReserve
	if room < 1 {
		return 0, fmt.Errorf("%d hosts need more descriptors than RLIMIT_NOFILE's %d", hosts, lim.Cur)
	}
	return (hosts + room - 1) / room, nil
}

// pipelineConns is the pipeline's connection cap: a third of the
// descriptor limit after fdReserve (both ends of each connection, and the
// site's listeners); 0 (no cap) when the limit is unknown.
func pipelineConns() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur <= fdReserve {
		return 0
	}
	return int(lim.Cur-fdReserve) / 3
}

// pipeline starts a local downloader on the run's moto with the template's
// defaults, the given fetch delay and cfg.Params.
func (e *benchEnv) pipeline(ctx context.Context, name string, delay time.Duration, extra map[string]string, mod func(*emulated.Options)) (*emulated.Pipeline, error) {
	params := map[string]string{"FetchDelay": delay.String()}
	for k, v := range e.cfg.Params {
		params[k] = v
	}
	for k, v := range extra {
		params[k] = v
	}
	opts := emulated.Options{
		Endpoint:  e.moto.Endpoint,
		Prefix:    fmt.Sprintf("bench-%s-%d", name, e.seq.Add(1)),
		Params:    params,
		Addresses: fetch.PrivatePolicy(),
		// The template's CHECK_RUN_SECONDS: one invocation starts requests
		// for 55 s, then the next (locally at once) takes over.
		CheckRun: 55 * time.Second,
		Log:      slog.New(slog.NewJSONHandler(discardErrors{e.log}, &slog.HandlerOptions{Level: slog.LevelError})),
		// The site runs in this process too, so each connection costs
		// two descriptors here, beside the site's listeners: 10,000 Zipf
		// hosts kept 9,500 connections idle and ran out of 20,000.
		MaxConns: pipelineConns(),
	}
	if mod != nil {
		mod(&opts)
	}
	p, err := emulated.Start(ctx, opts)
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
	// GapsBelow counts the gaps shorter than d (the rule: none).
	GapsBelow int
	// Process is the system's child process (local mode and Colly; not
	// on moto), StateBytes local mode's state file's size at the end.
	Process    *childRun
	StateBytes int64
	// ConnsPerHost is the mean, over hosts, of the TCP connections the
	// site accepted (robots.txt's included); ConnsMulti the share of hosts
	// that accepted more than one.
	ConnsPerHost, ConnsMulti float64
	// FullTLS and ResumedTLS are the TLS handshakes per host, full and
	// resumed (HTTPS rows only).
	FullTLS, ResumedTLS float64
	// Kernel is the change of the kernel's TCP counters over the run.
	Kernel TCPCounters

	reqs  []demosite.Request
	start time.Time
	gaps  []time.Duration
}

// PolitenessResult is one row of the politeness benchmark: H hosts of U
// URLs each at delay d, over HTTP or HTTPS.
type PolitenessResult struct {
	Hosts, PerHost int
	Delay          time.Duration
	TLS            bool
	// HostsPerListener is how many hosts shared a listening socket
	// (hostsPerListener).
	HostsPerListener int
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

// RowShape is a politeness row's U (URLs per host) and d (the delay).
type RowShape struct {
	PerHost int
	Delay   time.Duration
}

// rowShape is H's U and d: its row in cfg.Rows, else the row of the largest
// H below it (of the smallest above it when none is below), then -u and
// -d, which apply to every row.
func (cfg Config) rowShape(h int) RowShape {
	keys := slices.Sorted(maps.Keys(cfg.Rows))
	shape := RowShape{PerHost: 40, Delay: 250 * time.Millisecond}
	if len(keys) > 0 {
		shape = cfg.Rows[keys[0]]
	}
	for _, k := range keys {
		if k <= h {
			shape = cfg.Rows[k]
		}
	}
	if cfg.PerHost > 0 {
		shape.PerHost = cfg.PerHost
	}
	if cfg.RowDelay > 0 {
		shape.Delay = cfg.RowDelay
	}
	return shape
}

// polRow is one politeness row to run: its H, the systems, the scheme.
type polRow struct {
	Hosts       int
	Moto, Local bool
	TLS         bool
}

// politenessRows are a run's rows: every H of cfg.Hosts (on moto) and
// cfg.LocalHosts (local mode) over HTTP, in order, then cfg.TLSHosts'
// over HTTPS (local mode); Colly in each.
func politenessRows(cfg Config) []polRow {
	var rows []polRow
	for _, h := range politenessHosts(cfg) {
		rows = append(rows, polRow{Hosts: h, Moto: slices.Contains(cfg.Hosts, h), Local: slices.Contains(cfg.LocalHosts, h)})
	}
	for _, h := range cfg.TLSHosts {
		rows = append(rows, polRow{Hosts: h, Local: true, TLS: true})
	}
	return rows
}

// politeness runs one row: on moto when row.Moto, through local mode when
// row.Local, and Colly, each in turn on the same site and URLs. Ours also
// get one URL per host that robots.txt disallows.
func (e *benchEnv) politeness(ctx context.Context, row polRow) (*PolitenessResult, error) {
	hosts := row.Hosts
	shape := e.cfg.rowShape(hosts)
	u, d := shape.PerHost, shape.Delay
	per, err := hostsPerListener(hosts)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	site, err := e.siteWith(demosite.Options{Hosts: hosts, Robots: robotsRules, TLS: row.TLS, HostsPerListener: per})
	if err != nil {
		return nil, err
	}
	defer site.Close()
	e.log.Info("politeness: site up", "hosts", hosts, "tls", row.TLS, "hostsPerListener", per, "took", time.Since(t0).Round(time.Millisecond))
	urls := site.URLs(u)
	rng := rand.New(rand.NewPCG(uint64(hosts), 5))
	rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	// Ours: the same URLs with a disallowed one per host among them.
	ourURLs := slices.Clone(urls)
	scheme, _, _ := strings.Cut(urls[0], "://")
	for _, h := range site.Hosts() {
		ourURLs = append(ourURLs, scheme+"://"+h+privatePath+"0")
	}
	rng.Shuffle(len(ourURLs), func(i, j int) { ourURLs[i], ourURLs[j] = ourURLs[j], ourURLs[i] })
	res := &PolitenessResult{Hosts: hosts, PerHost: u, Delay: d, TLS: row.TLS, HostsPerListener: per, Bound: float64(hosts) / d.Seconds()}
	name := "pol" + strconv.Itoa(hosts)
	var ca string
	if row.TLS {
		name += "tls"
		dir, err := os.MkdirTemp("", "bench-ca-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		ca = filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, site.CAPEM(), 0o644); err != nil {
			return nil, err
		}
	}
	if row.Moto {
		if err := e.moto.Reset(ctx); err != nil {
			return nil, err
		}
		e.log.Info("politeness: ours on moto", "hosts", hosts, "urls", len(ourURLs))
		st, err := measured(site, func() (RunStats, error) { return e.oursRun(ctx, site, ourURLs, hosts, d) })
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
			// Placed by the address it resolves to, as ingest places it.
			vs := hostqueue.VirtualShard(h)
			if ap, err := netip.ParseAddrPort(h); err == nil {
				vs = hostqueue.PlaceShard(h, ap.Addr(), true)
			}
			perShard[vs%max(1, res.ShardCount)]++
		}
		for _, n := range perShard {
			res.MaxHostsPerShard = max(res.MaxHostsPerShard, n)
		}
		e.log.Info("politeness: ours on moto done", "wall", st.Wall.Round(time.Millisecond), "steady", st.SteadyRate, "bound", res.Bound, "motoCPU", st.CPU.Moto)
		// Let the pipeline's connections close before the next system starts.
		time.Sleep(500 * time.Millisecond)
	}
	if row.Local {
		e.log.Info("politeness: ours in local mode", "hosts", hosts, "urls", len(ourURLs), "delay", d, "tls", row.TLS)
		var env []string
		if ca != "" {
			// Go's crypto/x509 reads the system roots from SSL_CERT_FILE
			// on Linux: the runner trusts the site as it would any CA.
			env = []string{"SSL_CERT_FILE=" + ca}
		}
		st, err := measured(site, func() (RunStats, error) { return e.localRunEnv(ctx, site, ourURLs, hosts, d, name, env) })
		if err != nil {
			return nil, err
		}
		st.obeyed(hosts)
		res.Local = &st
		e.log.Info("politeness: ours in local mode done", "wall", st.Wall.Round(time.Millisecond), "steady", st.SteadyRate, "bound", res.Bound, "connsPerHost", st.ConnsPerHost, "synRetrans", st.Kernel.SynRetrans)
		time.Sleep(500 * time.Millisecond)
	}
	e.log.Info("politeness: colly", "hosts", hosts)
	cr, err := measured(site, func() (RunStats, error) { return e.collyRun(ctx, site, urls, hosts, d, ca) })
	if err != nil {
		return nil, err
	}
	res.Colly = cr
	e.log.Info("politeness: colly done", "wall", cr.Wall.Round(time.Millisecond), "steady", cr.SteadyRate, "connsPerHost", cr.ConnsPerHost, "synRetrans", cr.Kernel.SynRetrans)
	return res, nil
}

// measured runs one system over site and adds what the site and the
// kernel counted while it ran: connections and TLS handshakes per host,
// and the TCP counters' change.
func measured(site *demosite.Site, run func() (RunStats, error)) (RunStats, error) {
	k0, err := readTCPCounters()
	if err != nil {
		return RunStats{}, err
	}
	c0, h0 := site.Conns(), site.Handshakes()
	st, err := run()
	if err != nil {
		return st, err
	}
	k1, err := readTCPCounters()
	if err != nil {
		return st, err
	}
	st.Kernel = k1.Sub(k0)
	c1, h1 := site.Conns(), site.Handshakes()
	hosts := site.Hosts()
	var conns, multi, full, resumed int
	for _, h := range hosts {
		n := c1[h] - c0[h]
		conns += n
		if n > 1 {
			multi++
		}
		full += h1[h].Full - h0[h].Full
		resumed += h1[h].Resumed - h0[h].Resumed
	}
	n := float64(len(hosts))
	st.ConnsPerHost, st.ConnsMulti = float64(conns)/n, float64(multi)/n
	st.FullTLS, st.ResumedTLS = float64(full)/n, float64(resumed)/n
	return st, nil
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

func (e *benchEnv) oursRun(ctx context.Context, site *demosite.Site, urls []string, hosts int, d time.Duration) (RunStats, error) {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	b, err := e.start(ctx, "pol"+strconv.Itoa(hosts), d, nil, 0, false)
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
	st := analyze("urldownloader", site.Requests(), start, time.Now(), d, hosts)
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

// collyRun runs Colly in a process of its own (collychild.go) over urls in
// their order, trusting ca (a PEM file) when set.
func (e *benchEnv) collyRun(ctx context.Context, site *demosite.Site, urls []string, hosts int, d time.Duration, ca string) (RunStats, error) {
	dir, err := os.MkdirTemp("", "bench-colly-")
	if err != nil {
		return RunStats{}, err
	}
	defer os.RemoveAll(dir)
	in := collyInput{URLs: filepath.Join(dir, "urls"), Hosts: site.Hosts(), Delay: d, CA: ca, Report: filepath.Join(dir, "report.json")}
	if err := os.WriteFile(in.URLs, []byte(strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		return RunStats{}, err
	}
	b, _ := json.Marshal(in)
	input := filepath.Join(dir, "input.json")
	if err := os.WriteFile(input, b, 0o644); err != nil {
		return RunStats{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return RunStats{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, exe)
	cmd.Env = append(os.Environ(), collyChildEnv+"="+input)
	cr, err := runChild(rctx, cmd, nil)
	if err != nil {
		return RunStats{}, fmt.Errorf("colly: %w", err)
	}
	if cr.ExitCode != 0 {
		return RunStats{}, fmt.Errorf("colly's process exited %d; its output ends:\n%s", cr.ExitCode, lastLines(cr.Stderr, 15))
	}
	var rep collyReport
	b, err = os.ReadFile(in.Report)
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		return RunStats{}, fmt.Errorf("colly's report: %w", err)
	}
	st := analyze("colly", site.Requests(), cr.Start, time.Now(), d, hosts)
	st.Wall = cr.Wall
	st.Process = &cr
	st.Results = map[string]int{"fetched": int(rep.OK)}
	st.Errors = int(rep.Failed)
	if rep.OK != int64(len(urls)) {
		return st, fmt.Errorf("colly: %d of %d pages fetched", rep.OK, len(urls))
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
			if g < d {
				st.GapsBelow++
			}
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
	_, rest, _ := strings.Cut(u, "://")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}
