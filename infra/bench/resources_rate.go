package main

// The resources scenario's requests-per-second row (issue 21, point 6):
// how many requests one check invocation makes a second with the
// function's budget (512 MiB, Lambda's 1,024 descriptors) when more hosts
// are due than it has workers: Hosts hosts of PerHost URLs each, all due at
// once, at FetchDelay d, on a loopback farm of virtual hosts (one listener,
// every name resolved to it by the child's resolver table), worked by one
// wake-up invocation of every shard for Run. The simulation's
// per-invocation rate (infra/sim, Config.InvocationRPS) is this row's
// figure.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// RateConfig sizes the requests-per-second row.
type RateConfig struct {
	Hosts, PerHost int
	Delay          time.Duration
	// Run is the invocation's CHECK_RUN_SECONDS.
	Run time.Duration
	// SQLite puts the queues in a SQLite store (shared/embedded/sqlite) in the
	// child instead of DynamoDB on moto: moto, one Python process, answers
	// a few dozen calls a second on this machine and would bind the row
	// (its p50 under this load is seconds), where DynamoDB answers in
	// milliseconds. The engine, its budget, the fetcher and the publisher
	// are the function's either way.
	SQLite bool
	// MemoryMB is the check function's MemorySize for the row (its worker
	// budget and GOMEMLIMIT follow); 0: the template's.
	MemoryMB int
}

// FullRate is `make bench`'s: 5,000 hosts of 3 URLs at d = 1 s over the
// template's 55 s run (more work than one run does: the invocation is
// never short of due hosts) on the SQLite store, and a bounded part of a
// run (20 s) on DynamoDB on moto, which shows what moto allows.
func FullRate() []RateConfig {
	return []RateConfig{
		{Hosts: 5000, PerHost: 3, Delay: time.Second, Run: 55 * time.Second, SQLite: true},
		{Hosts: 5000, PerHost: 3, Delay: time.Second, Run: 20 * time.Second},
	}
}

// SmokeRate is TestResourcesSmoke's.
func SmokeRate() []RateConfig {
	return []RateConfig{
		{Hosts: 40, PerHost: 3, Delay: 200 * time.Millisecond, Run: 4 * time.Second, SQLite: true},
		{Hosts: 40, PerHost: 3, Delay: 200 * time.Millisecond, Run: 4 * time.Second},
	}
}

// store names the row's store.
func (rc RateConfig) store() string {
	if rc.SQLite {
		return "SQLite store in place of DynamoDB"
	}
	return "DynamoDB on moto"
}

// RateResult is the row.
type RateResult struct {
	Config RateConfig
	Check  resChildReport
	// From the farm: requests it answered, connections it accepted, the
	// hosts it saw (HostsAsked) and what politeness it saw.
	Site VHostSummary
	// From the sink.
	ByStatus map[string]int
}

// VHostSummary is demosite.VHostStats, named here for the report.
type VHostSummary = demosite.VHostStats

// RPS is the invocation's requests a second, over its whole invocation
// (start, the run, the workers' last requests, the handler's end).
func (r *RateResult) RPS() float64 {
	if r.Check.Elapsed <= 0 {
		return 0
	}
	return float64(r.Site.Requests) / r.Check.Elapsed.Seconds()
}

// ConnsPerHost is the connections the farm accepted per host it saw.
func (r *RateResult) ConnsPerHost() float64 {
	if r.Site.Hosts == 0 {
		return 0
	}
	return float64(r.Site.Conns) / float64(r.Site.Hosts)
}

// Timeouts are the requests that ended in a network error (timeouts among
// them) or a local resource error: against a healthy loopback farm, none.
func (r *RateResult) Timeouts() int64 { return r.Check.Summary.Errors + r.Check.Summary.LocalErrors }

// Misses lists the row's targets missed: no request error, at most 800
// descriptors, no politeness breach.
func (r *RateResult) Misses() []string {
	var out []string
	if r.Check.Err != "" {
		out = append(out, "rate check failed: "+r.Check.Err)
	}
	if n := r.Timeouts(); n > 0 {
		out = append(out, fmt.Sprintf("rate check: %d requests ended in an error or timeout against a healthy farm", n))
	}
	if r.Check.PeakFDs > 800 {
		out = append(out, fmt.Sprintf("rate check had %d descriptors open, above 800", r.Check.PeakFDs))
	}
	if r.Site.Overlaps > 0 || r.Site.BelowGap > 0 {
		out = append(out, fmt.Sprintf("rate check: %d overlapping requests, %d hosts asked sooner than the delay", r.Site.Overlaps, r.Site.BelowGap))
	}
	if r.Site.Requests == 0 {
		out = append(out, "rate check made no request")
	}
	return out
}

// lambdaMBPerVCPU is the MemorySize at which Lambda gives a function one
// vCPU; below it, CPU is in proportion to memory (AWS, "Configuring
// Lambda function memory"). This machine does not impose it: the rows show
// the CPU the invocation used against that share.
const lambdaMBPerVCPU = 1769

// OutOfWork reports whether the invocation made every request its hosts
// had (robots.txt and every URL): it ran short of due hosts before its
// end, so its rate is a lower bound.
func (r *RateResult) OutOfWork() bool {
	return r.Site.Requests >= r.Config.Hosts*(r.Config.PerHost+1)
}

// Cores is the CPU the invocation used, in cores (CPU time over its time).
func (r *RateResult) Cores() float64 {
	if r.Check.Elapsed <= 0 {
		return 0
	}
	return r.Check.CPU.Seconds() / r.Check.Elapsed.Seconds()
}

// GBSecondsPerKURL is what Lambda bills for the invocation (MemorySize in
// GB times its duration) per 1,000 URLs fetched: the check function's cost
// per URL when it is never short of due hosts.
func (r *RateResult) GBSecondsPerKURL() float64 {
	n := r.ByStatus["fetched"]
	if n == 0 {
		return 0
	}
	return float64(r.Check.MemoryMiB) / 1024 * r.Check.Elapsed.Seconds() / float64(n) * 1000
}

// memoryTable is the check function's memory by measurement: the SQLite
// rate rows, one per MemorySize, side by side (the simulation's
// measuredRates, infra/sim/config.go, are their figures). Empty below two.
func memoryTable(rows []*RateResult) string {
	var sq []*RateResult
	for _, r := range rows {
		if r.Config.SQLite {
			sq = append(sq, r)
		}
	}
	if len(sq) < 2 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe check function's memory, by measurement: the SQLite row above at each MemorySize (`-check-memory`; the template is not edited). Lambda bills MemorySize x duration; a busy invocation's GB-seconds per URL is the check function's cost per URL. Lambda gives CPU in proportion to memory (1 vCPU at 1,769 MB), which this machine does not impose: compare the cores used with Lambda's share. The simulation's per-invocation rates (`measuredRates`, infra/sim/config.go) are this table's requests/s.\n\n")
	b.WriteString("| check MemorySize | worker budget | **requests/s per invocation** | peak RSS (of MemorySize) | CPU: cores used / Lambda's share | URLs fetched in | **billed GB-s per 1,000 URLs** | Lambda $ per million URLs |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range sq {
		c := r.Check
		gbs := r.GBSecondsPerKURL()
		bound := ""
		if r.OutOfWork() {
			bound = " (ran out of due hosts: at least)"
		}
		fmt.Fprintf(&b, "| %d MB | %d | **%.0f**%s | %s (%.0f%%) | %.2f / %.2f | %d in %s | **%.2f** | $%.2f |\n",
			c.MemoryMiB, c.Workers, r.RPS(), bound, mib(c.PeakRSS), pct(c.PeakRSS, c.MemoryMiB), r.Cores(), float64(c.MemoryMiB)/lambdaMBPerVCPU,
			r.ByStatus["fetched"], c.Elapsed.Round(100*time.Millisecond), gbs, gbs/1000*priceLambdaGBs*1e6)
	}
	return b.String()
}

// row is the row in the resources table.
func (r *RateResult) row(timeout time.Duration, shards int) string {
	c, rc := r.Check, r.Config
	memMiB := c.MemoryMiB
	return fmt.Sprintf("| check (%d MiB, %s), requests a second, %s | %d hosts of %d URLs, d = %s, all due at once on a loopback farm (one listener, virtual hosts); one wake-up invocation of all %d shards, %s run | %s | %d / %d | %s (%.0f%%) | %s | %d / %d | %d | **%.0f requests/s per invocation** (%d requests to %d hosts in %s; %d fetched); %.2f new connections per host; **%d timeouts or errors**; min gap %s; CPU %s (%.1f ms a request); %d DynamoDB calls, p50 %s, p99 %s |\n",
		memMiB, timeout, rc.store(), rc.Hosts, rc.PerHost, rc.Delay, shards, rc.Run,
		mib(c.GOMEMLIMIT), c.Workers, c.PeakWorkers, mib(c.PeakRSS), pct(c.PeakRSS, memMiB), mib(c.PeakHeap), c.BaseFDs, c.PeakFDs, c.PeakConns,
		r.RPS(), r.Site.Requests, r.Site.Hosts, c.Elapsed.Round(100*time.Millisecond), r.ByStatus["fetched"], r.ConnsPerHost(), r.Timeouts(), r.Site.MinGap.Round(time.Millisecond),
		c.CPU.Round(100*time.Millisecond), float64(c.CPU.Microseconds())/1000/float64(max(1, r.Site.Requests)), c.DynamoDB.Requests, c.DynamoDB.P50.Round(time.Millisecond), c.DynamoDB.P99.Round(time.Millisecond))
}

// rate runs the row on a stack of its own.
func (e *benchEnv) rate(ctx context.Context, rc RateConfig) (*RateResult, error) {
	res := &RateResult{Config: rc, ByStatus: map[string]int{}}
	site, err := demosite.StartVHosts(demosite.VHostOptions{IP: "127.0.0.4", Latency: e.cfg.Latency})
	if err != nil {
		return nil, err
	}
	defer site.Close()
	// The row measures one invocation over distinct servers, which the
	// farm serves from one address: the server gate, which would pace
	// them as one shared server, is off (ServerDelay 0).
	params := map[string]string{"AllowedPorts": fmt.Sprint(site.Port()), "ServerDelay": "0"}
	b, err := e.start(ctx, "rate", rc.Delay, params, 0, false)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	st := b.p.Stack
	table := map[string][]netip.Addr{}
	msgs := make([]urlmsg.Message, 0, rc.Hosts*rc.PerHost)
	for h := range rc.Hosts {
		name := demosite.VHostName(h)
		table[name] = []netip.Addr{site.Addr()}
		for i := range rc.PerHost {
			m, err := urlmsg.Validate(urlmsg.Input{URL: site.URL(name, i)})
			if err != nil {
				return nil, err
			}
			m.ID = urlmsg.MakeID("rate", len(msgs), m.URL)
			msgs = append(msgs, m)
		}
	}
	in := resChildInput{Timeout: st.Functions[stack.CheckFunction].Timeout, SinkURL: b.sink.url.String(), Resolve: table}
	if rc.SQLite {
		dir, err := os.MkdirTemp("", "bench-rate-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		in.SQLite, in.Queue = filepath.Join(dir, "queues.db"), msgs
	} else {
		e.log.Info("resources rate: queueing", "hosts", rc.Hosts, "urls", len(msgs))
		// Placed as the ingest function places them (by the address the
		// table gives), so the check does not first move every host.
		shards := map[string]int{}
		for _, m := range msgs {
			name, _, err := net.SplitHostPort(m.Host)
			if err != nil {
				name = m.Host
			}
			shards[m.Host] = hostqueue.Place(m.Host, table[name], nil)
		}
		ir := b.p.IngestServices().Ingester.Ingest(ctx, hostqueue.IngestParams{PersistLimit: 1000, Shards: shards}, msgs)
		if len(ir.Failed) > 0 {
			return nil, fmt.Errorf("queue the rate row's urls: %d failed", len(ir.Failed))
		}
	}
	env, shards := checkChildEnv(st, rc.Run, rc.MemoryMB, false)
	in.Shards = shards
	e.log.Info("resources rate: check invocation", "store", rc.store(), "memoryMB", env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"], "shards", shards, "run", rc.Run)
	res.Check, err = e.resChild(ctx, "check", env, in)
	if err != nil {
		return res, err
	}
	res.Site = site.Stats(rc.Delay)
	b.sink.mu.Lock()
	for k, v := range b.sink.byStatus {
		res.ByStatus[k] = v
	}
	b.sink.mu.Unlock()
	e.log.Info("resources rate done", "store", rc.store(), "memoryMB", res.Check.MemoryMiB, "workers", res.Check.Workers, "rps", fmt.Sprintf("%.0f", res.RPS()), "requests", res.Site.Requests, "hosts", res.Site.Hosts,
		"connsPerHost", fmt.Sprintf("%.2f", res.ConnsPerHost()), "peakWorkers", res.Check.PeakWorkers, "peakFDs", res.Check.PeakFDs,
		"rssMB", res.Check.PeakRSS>>20, "errors", res.Timeouts(), "cpu", res.Check.CPU.Round(100*time.Millisecond),
		"dynamoCalls", res.Check.DynamoDB.Requests, "dynamoP50", res.Check.DynamoDB.P50, "dynamoP99", res.Check.DynamoDB.P99, "status", strings.TrimSpace(fmt.Sprint(res.ByStatus)))
	return res, nil
}
