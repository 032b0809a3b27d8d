package main

// A million URLs over 100,000 hosts through local mode (`-only million`,
// issue 21): MillionHosts hosts of MillionPerHost URLs each at
// MillionDelay, the runner as a child (as localRun runs it), bounded by
// MillionTimeout (the runner's own --timeout, so a run that does not
// finish still ends cleanly and says how far it got). 100,000 listeners
// would pass the bench's descriptor limit, so the hosts are names served
// by listeners on 4,096 loopback addresses (demosite.StartVHosts), and the
// names are answered by a DNS server on loopback inside the bench
// (demosite.StartDNSBy, each name its address of the 256) that local mode
// asks through --dns-server: every name costs the fetcher a real lookup
// through its resolver path, which the server counts.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
)

// MillionResult is the million-URL job's row.
type MillionResult struct {
	Hosts, PerHost int
	Delay, Limit   time.Duration
	URLs           int
	// Finished is whether every URL had its result before Limit.
	Finished bool
	Process  childRun
	Outcome  outcome
	// StateBytes is the state file's size at the end (with its WAL).
	StateBytes int64
	Site       demosite.VHostStats
	// DNSQueries is what the bench's DNS server answered, DNSNames the
	// distinct names it was asked.
	DNSQueries int64
	DNSNames   int
}

// Results is the number of URLs with a result.
func (m *MillionResult) Results() int {
	n := 0
	for _, c := range m.Outcome.ByStatus {
		n += c
	}
	return n
}

// URLsPerSecond is results over the run's wall time.
func (m *MillionResult) URLsPerSecond() float64 {
	if m.Process.Wall <= 0 {
		return 0
	}
	return float64(m.Results()) / m.Process.Wall.Seconds()
}

// millionAddrs is how many server addresses the million job's names are on.
const millionAddrs = 4096

// million runs the job.
func (e *benchEnv) million(ctx context.Context) (*MillionResult, error) {
	h, u, d := e.cfg.MillionHosts, e.cfg.MillionPerHost, e.cfg.MillionDelay
	r, err := e.runner(ctx)
	if err != nil {
		return nil, err
	}
	// The names are spread over 4,096 addresses, as a real list's hosts are
	// over their servers' (see VHostOptions.Addrs): about 24 names an
	// address, whose 240 requests the server gate (ServerDelay 250 ms)
	// spreads over a minute, well inside the job's span. At 256 addresses,
	// 390 names each, the gate alone would take 16 minutes a server.
	site, err := demosite.StartVHosts(demosite.VHostOptions{IP: "127.5.0.1", Addrs: min(millionAddrs, h), Latency: e.cfg.Latency})
	if err != nil {
		return nil, err
	}
	defer site.Close()
	dns, err := demosite.StartDNSBy(site.AddrOf)
	if err != nil {
		return nil, err
	}
	defer dns.Close()
	urls := make([]string, 0, h*u)
	for i := range h {
		name := demosite.VHostName(i)
		for p := range u {
			urls = append(urls, site.URL(name, p))
		}
	}
	rng := rand.New(rand.NewPCG(uint64(h), 21))
	rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	name := fmt.Sprintf("million%d", len(urls))
	in, out, state, done, err := r.jobFiles(name, urls)
	if err != nil {
		return nil, err
	}
	defer done()
	args := append(e.localArgs(in, out, state, d, nil), "--dns-server", dns.Addr(), "--timeout", e.cfg.MillionTimeout.String())
	e.log.Info("local mode million", "hosts", h, "urls", len(urls), "delay", d, "limit", e.cfg.MillionTimeout, "dns", dns.Addr())
	// The runner's --timeout ends the run; this only bounds a hang.
	rctx, cancel := context.WithTimeout(ctx, e.cfg.MillionTimeout+2*time.Minute)
	defer cancel()
	// The site's listeners and its end of every connection share the
	// bench's descriptor limit, which the child would otherwise take whole
	// for its own connections: the site then ran out, refused accepts
	// and left connects waiting, so answers came seconds late and the
	// server gate read them as a struggling server.
	cr, err := r.runLimited(rctx, args, childFiles(len(site.Addrs())))
	if err != nil {
		return nil, err
	}
	res := &MillionResult{Hosts: h, PerHost: u, Delay: d, Limit: e.cfg.MillionTimeout, URLs: len(urls), Process: cr,
		StateBytes: stateSize(state), Site: site.Stats(d), DNSQueries: dns.Queries(), DNSNames: dns.Names()}
	res.Outcome, err = readOutcome(out, urls)
	if err != nil {
		return res, err
	}
	res.Finished = cr.ExitCode == 0 && len(res.Outcome.Missing) == 0
	// Exit 1 with URLs missing is the time bound (the row says how far it
	// got); any other exit, or wrong pages, is a failure of the run.
	if !res.Finished && cr.ExitCode != 1 || res.Outcome.Wrong > 0 {
		return res, fmt.Errorf("local mode million: exit %d, %d urls without a result, %d with the wrong page; its output ends:\n%s",
			cr.ExitCode, len(res.Outcome.Missing), res.Outcome.Wrong, lastLines(cr.Stderr, 15))
	}
	e.log.Info("local mode million done", "finished", res.Finished, "results", res.Results(), "wall", cr.Wall.Round(time.Second),
		"urlsPerSec", fmt.Sprintf("%.0f", res.URLsPerSecond()), "rssMB", cr.MaxRSS>>20, "stateMB", res.StateBytes>>20,
		"conns", res.Site.Conns, "dnsQueries", res.DNSQueries, "cpu", cr.CPU.Round(time.Second))
	return res, nil
}

// childFiles is the descriptor limit the million job's child gets: the
// bench's own, less the site's listeners and fdReserve, so the site has
// room for its end of every connection the child opens (the child keeps a
// share of its limit for other descriptors too).
func childFiles(listeners int) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 1024
	}
	return max(1024, int(lim.Cur)-listeners-fdReserve)
}

// removeState removes a SQLite state and its side files.
func removeState(path string) {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		os.Remove(p)
	}
}

// millionTable is the job's section.
func millionTable(m *MillionResult) string {
	var b strings.Builder
	s := m.Site
	fmt.Fprintf(&b, "%d URLs over %d hosts (%d each, shuffled), d = %s, through local mode (the runner as a child, a new state, `--allow-private`), bounded by `--timeout %s`. The hosts are names served on %d loopback addresses, one port (the Host header picks the host; 100,000 listeners would pass the descriptor limit, and one address made every connection need its own local port: connect() searching the ephemeral range was a third of the child's CPU), each name answered with one of the addresses by a DNS server on loopback in the bench that local mode asks through `--dns-server`. Peak RSS is the child's VmHWM; connections are counted by the site (a connection counts for its first request's host); DNS lookups by the server (A and AAAA questions each count). The physical bound is %d x d = %s plus robots.txt, with every host at once.\n\n",
		m.URLs, m.Hosts, m.PerHost, m.Delay, shortDur(m.Limit), min(millionAddrs, m.Hosts), m.PerHost, time.Duration(m.PerHost)*m.Delay)
	b.WriteString("| URLs | finished | results | wall | **URLs/s** | CPU (mean / peak share of a core; machine busy) | **peak RSS** | state file | connections: per host / most for one host / open at once | requests in flight, most at once | **DNS lookups** (names asked) | min gap / d, hosts below d, overlaps | results by status |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	finished := "yes"
	if !m.Finished {
		finished = fmt.Sprintf("**no**: %d without a result at the bound", len(m.Outcome.Missing))
	}
	perHost := 0.0
	if s.Hosts > 0 {
		perHost = float64(s.Conns) / float64(s.Hosts)
	}
	gap := "-"
	if s.MinGap >= 0 {
		gap = fmt.Sprintf("%.3f", s.MinGap.Seconds()/m.Delay.Seconds())
	}
	fmt.Fprintf(&b, "| %d | %s | %d | %s | **%.0f** | %s (%.2f / %.2f; %.0f%%) | **%s** | %s | %.2f / %d / %d | %d | **%d** (%d) | %s, %d, %d | %s |\n",
		m.URLs, finished, m.Results(), secs(m.Process.Wall), m.URLsPerSecond(), secs(m.Process.CPU), m.Process.CPUMean(), m.Process.CPUPeak, 100*m.Process.Machine,
		sizeMiB(m.Process.MaxRSS), sizeMiB(m.StateBytes), perHost, s.MaxHostConns, s.OpenPeak, s.InflightPeak, m.DNSQueries, m.DNSNames,
		gap, s.BelowGap, s.Overlaps, statusList(m.Outcome.ByStatus))
	return b.String()
}

// shortDur drops a whole minute's "0s" (10m0s: 10m).
func shortDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// The job's section of docs/benchmarks.md, written on its own (as the big
// jobs' is): `-only million` leaves the rest as it was.
var millionSection = ownSection{part: "million", name: "million", heading: "Local mode: a million URLs over 100,000 hosts"}

// writeMillion replaces the job's section of path, or appends it.
func writeMillion(path string, res *MillionResult, m Machine) error {
	return millionSection.write(path, m.runLine(false), millionTable(res))
}
