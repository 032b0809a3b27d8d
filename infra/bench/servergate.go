package main

// The server gate (`-only servergate`, issue 40): GateNames host names
// that all resolve to one loopback address, GatePerHost pages each, through
// local mode with ServerDelay GateDelay and ServerConnections 1 (FetchDelay
// the template's 1 s). The names are served by one listener
// (demosite.StartVHosts) and answered by a DNS server on loopback that
// local mode asks through --dns-server. The row sets the job's span
// against its bound at the gate: every request (robots.txt included)
// GateDelay apart.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
)

// GateResult is the server gate's row.
type GateResult struct {
	Names, PerHost int
	Delay          time.Duration
	URLs           int
	Process        childRun
	Outcome        outcome
	Site           demosite.VHostStats
}

// Bound is the least span the gate allows: one ServerDelay before each
// request after the first, robots.txt included.
func (g *GateResult) Bound() time.Duration {
	return time.Duration(max(0, g.Site.Requests-1)) * g.Delay
}

// serverGate runs the row.
func (e *benchEnv) serverGate(ctx context.Context) (*GateResult, error) {
	n, u, d := e.cfg.GateNames, e.cfg.GatePerHost, e.cfg.GateDelay
	r, err := e.runner(ctx)
	if err != nil {
		return nil, err
	}
	site, err := demosite.StartVHosts(demosite.VHostOptions{IP: "127.6.0.1", Latency: e.cfg.Latency})
	if err != nil {
		return nil, err
	}
	defer site.Close()
	dns, err := demosite.StartDNS(site.Addr())
	if err != nil {
		return nil, err
	}
	defer dns.Close()
	var urls []string
	for p := range u {
		for i := range n {
			urls = append(urls, site.URL(demosite.VHostName(i), p))
		}
	}
	name := fmt.Sprintf("gate%d", len(urls))
	in, out, state, done, err := r.jobFiles(name, urls)
	if err != nil {
		return nil, err
	}
	defer done()
	args := append(e.localArgs(in, out, state, time.Second, map[string]string{"ServerDelay": d.String(), "ServerConnections": "1"}),
		"--dns-server", dns.Addr())
	e.log.Info("server gate", "names", n, "urls", len(urls), "serverDelay", d, "addr", site.Addr())
	rctx, cancel := context.WithTimeout(ctx, time.Duration(n*(u+1))*d+5*time.Minute)
	defer cancel()
	cr, err := r.run(rctx, args, nil)
	if err != nil {
		return nil, err
	}
	res := &GateResult{Names: n, PerHost: u, Delay: d, URLs: len(urls), Process: cr, Site: site.Stats(time.Second)}
	if res.Outcome, err = readOutcome(out, urls); err != nil {
		return res, err
	}
	if cr.ExitCode != 0 || len(res.Outcome.Missing) > 0 || res.Outcome.Wrong > 0 {
		return res, fmt.Errorf("server gate: exit %d, %d urls without a result, %d with the wrong page; its output ends:\n%s",
			cr.ExitCode, len(res.Outcome.Missing), res.Outcome.Wrong, lastLines(cr.Stderr, 15))
	}
	e.log.Info("server gate done", "wall", cr.Wall.Round(time.Millisecond), "requests", res.Site.Requests,
		"bound", res.Bound(), "minStartGap", res.Site.MinStartGap, "inflightPeak", res.Site.InflightPeak)
	return res, nil
}

// gateTable is the row's section.
func gateTable(g *GateResult) string {
	var b strings.Builder
	s := g.Site
	fmt.Fprintf(&b, "%d host names resolving to one loopback address (one listener; a DNS server on loopback answers them, asked through `--dns-server`), %d pages each, through local mode (the runner as a child, a new state, `--allow-private`) with `ServerDelay=%s`, `ServerConnections=1` and the template's other defaults (FetchDelay 1s). *Span* is the child's wall time, process start to exit; *bound* is (requests − 1) × ServerDelay, the least the gate allows, robots.txt requests included. The start gap and the requests in flight are the server's view (demosite.VHostStats).\n\n",
		g.Names, g.PerHost, g.Delay)
	b.WriteString("| names | URLs | requests (robots.txt) | **span** | bound | span / bound | least gap between two starts | requests in flight, most at once | results by status |\n|---|---|---|---|---|---|---|---|---|\n")
	ratio := 0.0
	if g.Bound() > 0 {
		ratio = g.Process.Wall.Seconds() / g.Bound().Seconds()
	}
	fmt.Fprintf(&b, "| %d | %d | %d (%d) | **%s** | %s | %.2f | %s | %d | %s |\n",
		g.Names, g.URLs, s.Requests, s.Robots, secs(g.Process.Wall), secs(g.Bound()), ratio,
		s.MinStartGap.Round(time.Millisecond), s.InflightPeak, statusList(g.Outcome.ByStatus))
	return b.String()
}

// The row's section of docs/benchmarks.md, written on its own: `-only
// servergate` leaves the rest as it was.
var gateSection = ownSection{part: "servergate", name: "servergate", heading: "Local mode: many host names on one server address"}

// writeGate replaces the row's section of path, or appends it.
func writeGate(path string, res *GateResult, m Machine) error {
	return gateSection.write(path, m.runLine(false), gateTable(res))
}
