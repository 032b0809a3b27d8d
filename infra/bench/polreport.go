package main

import (
	"fmt"
	"strings"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// rowLabel names a politeness row in the tables: its H, and HTTPS when so.
func (p *PolitenessResult) rowLabel() string {
	if p.TLS {
		return fmt.Sprintf("%d (HTTPS)", p.Hosts)
	}
	return fmt.Sprintf("%d", p.Hosts)
}

// efficiency is a run's steady rate over H/d; ok is false when the hosts
// were never all busy at once.
func (p *PolitenessResult) efficiency(s RunStats) (float64, bool) {
	if s.SteadyWindow <= 0 || p.Bound <= 0 {
		return 0, false
	}
	return s.SteadyRate / p.Bound, true
}

// overallEfficiency is a run's overall rate (every request over the span
// from the first to the last) over H/d: what a row with few URLs per host,
// whose hosts are never all busy at once, is judged by.
func (p *PolitenessResult) overallEfficiency(s RunStats) float64 {
	if p.Bound <= 0 {
		return 0
	}
	return s.OverallRate / p.Bound
}

// plotEfficiency is the steady efficiency, or the overall one when the
// hosts were never all busy; steady says which.
func (p *PolitenessResult) plotEfficiency(s RunStats) (e float64, steady bool) {
	if e, ok := p.efficiency(s); ok {
		return e, true
	}
	return p.overallEfficiency(s), false
}

// cpuPerKURL is a child's CPU seconds per 1,000 pages of the row (H x U,
// the pages both systems fetch); ok is false without a child process.
func (p *PolitenessResult) cpuPerKURL(s RunStats) (float64, bool) {
	if s.Process == nil || p.Hosts*p.PerHost == 0 {
		return 0, false
	}
	return s.Process.CPU.Seconds() / float64(p.Hosts*p.PerHost) * 1000, true
}

// politenessSection renders section 1: the rows, what limits them, the
// connections and the kernel's counters, and issue 21's targets.
func (r *Results) politenessSection() string {
	if len(r.Politeness) == 0 {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p0 := r.Politeness[0]
	for _, p := range r.Politeness {
		if p.Moto != nil {
			p0 = p
			break
		}
	}
	w("### 1. Politeness efficiency, side by side with Colly v2\n\n")
	w("Each row has its own H (hosts), U (URLs per host) and d (the fetch delay); the site answers every page after a fixed %s and serves a robots.txt that disallows `%s`. Ours get, beside the U pages per host, one URL per host under `%s`, which must end `denied` without a request; Colly gets the pages only (it ignores robots.txt by default). Every host is a loopback address of its own (127.0.x.y); HTTPS rows serve a certificate per host, for its IP address, signed by a test CA made at the site's start.\n\n", r.Config.Latency, privatePath, privatePath)
	w("- *local mode*: `make run` as users run it: the runner (`go build ./cmd/urldownloader`, built once) in its own process with `--urls FILE --out FILE --state NEW_FILE --allow-private --param FetchDelay=d`, its defaults otherwise (SQLite state, %d check loops, template parameter defaults); on HTTPS it trusts the test CA through `SSL_CERT_FILE` (which Go reads on Linux). Wall time runs from starting the process to its exit, every result written and synced.\n", standaloneShards)
	if p0.Moto != nil {
		w("- *on moto*: the real check engine and DynamoDB store on moto (with internal/moto's patches), the URLs handed over through `POST /urls` (the real ingest handler, %d URLs per request, 8 requests at once: the synchronous entry, stored when it answers; through the SQS input queue the event source mapping's batching window, `IngestBatchingWindowSeconds`, comes first), template defaults otherwise (%d shards, CheckHostPeriod %s, MaxConcurrentHosts %d), results sent to a loopback SQS sink. The deployment is idle when the URLs arrive (each shard's scheduled invocation has run, found nothing and ended; the next is a minute away), so ingest's wake-ups start the work. Wall time runs from handing over the URLs to the last result.\n",
			urlmsg.MaxItems, p0.ShardCount, p0.CheckHostPeriod, p0.MaxConcurrentHosts)
	}
	w("- *Colly*: async, one `LimitRule{DomainGlob: host, Delay: d, Parallelism: 1}` per host, its defaults otherwise, in a process of its own (the bench binary started again), the same site and pages in the same shuffled order, run right after ours; on HTTPS its transport (a clone of Go's default) trusts the test CA. Wall time runs from starting the process to its exit, as for local mode.\n\n")
	w("| H | U | d | H/d req/s | system | wall | steady req/s | **steady / (H/d)** | overall req/s | **min gap / d** | gaps < d | robots.txt requests / disallowed URLs requested (denied) | **wall / Colly** |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Politeness {
		for _, s := range p.runs() {
			steady, eff := "never all busy", fmt.Sprintf("%.2f (overall)", p.overallEfficiency(s))
			if e, ok := p.efficiency(s); ok {
				steady = fmt.Sprintf("%.0f (over %s)", s.SteadyRate, secs(s.SteadyWindow))
				eff = fmt.Sprintf("**%.2f**", e)
			}
			rat, rob := "", fmt.Sprintf("%d / -", s.Robots)
			if s.System != "colly" {
				rat = fmt.Sprintf("**%s**", ratio(s.Wall.Seconds(), p.Colly.Wall.Seconds()))
				rob = fmt.Sprintf("%d / %d of %d (%d)", s.Robots, s.DisallowedRequested, s.Disallowed, s.Denied)
			}
			w("| %s | %d | %s | %.0f | %s | %s | %s | %s | %.0f | **%.3f** | %d | %s | %s |\n",
				p.rowLabel(), p.PerHost, p.Delay, p.Bound, s.System, secs(s.Wall), steady, eff, s.OverallRate, s.MinGap.Seconds()/p.Delay.Seconds(), s.GapsBelow, rob, rat)
		}
	}
	w("\nConnections, the kernel's TCP counters, CPU and memory:\n\n| H | system | **new connections / host** (hosts with > 1) | full / resumed TLS handshakes / host | TCP active opens | **SYN retransmissions** | listen overflows / drops | **CPU s / 1,000 URLs** | **peak memory** | descriptors: process / bench (hosts per listener) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Politeness {
		for _, s := range p.runs() {
			hs, cpu, mem, fds := "-", "-", "-", fmt.Sprintf("- (%d)", p.HostsPerListener)
			if p.TLS {
				hs = fmt.Sprintf("%.2f / %.2f", s.FullTLS, s.ResumedTLS)
			}
			if c, ok := p.cpuPerKURL(s); ok {
				cpu = fmt.Sprintf("**%.3f**", c)
				mem = fmt.Sprintf("**%s**", sizeMiB(s.Process.MaxRSS))
				fds = fmt.Sprintf("%d / %d (%d)", s.Process.ChildFDs, s.Process.BenchFDs, p.HostsPerListener)
			}
			w("| %s | %s | **%.2f** (%.0f%%) | %s | %d | **%d** | %d / %d | %s | %s | %s |\n",
				p.rowLabel(), s.System, s.ConnsPerHost, 100*s.ConnsMulti, hs, s.Kernel.ActiveOpens, s.Kernel.SynRetrans, s.Kernel.ListenOverflows, s.Kernel.ListenDrops, cpu, mem, fds)
		}
	}
	w("\nNew connections: TCP connections each host accepted during the system's run, robots.txt's included, counted by the site (`http.Server.ConnState`, `StateNew`); the share in brackets is of hosts that accepted more than one. TLS handshakes: counted by the site's `VerifyConnection`, resumed when the client presented a session ticket. Kernel counters: the change over the system's run of `TcpExt` `TCPSynRetrans`, `ListenOverflows`, `ListenDrops` (/proc/net/netstat) and `Tcp` `ActiveOpens` (/proc/net/snmp); they are the machine's, so whatever else ran at the same time counts into them. CPU: the child's user + system time (wait4's rusage) over the row's H x U pages; peak memory: the child's VmHWM, read every 0.2 s. Descriptors: the most the child and the bench process (the site's listeners and connections) held, read every second; a site's hosts share listening sockets only when one per host would not fit RLIMIT_NOFILE (hosts per listener in brackets; shared ones are bound to every loopback address, each host keeping its own).\n\n")
	w("%s", r.targets())
	w("\nWhat limits each run:\n\n| H | system | URLs in the store after | first request per host p50 / max | peak 1 s req/s | pacing | gap p50 / p99 | DynamoDB requests / URL, latency mean / p99 | moto (or the system's process) CPU mean / peak | peak RSS | machine CPU | hosts per shard (most) / MaxConcurrentHosts |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range r.Politeness {
		for _, s := range p.runs() {
			ing, ddb, cpu, rss, shard := "-", "-", "-", "-", "-"
			switch {
			case s.Process != nil:
				cpu = fmt.Sprintf("%.0f%% / %.0f%%", 100*s.Process.CPUMean(), 100*s.Process.CPUPeak)
				rss = sizeMiB(s.Process.MaxRSS)
			case s.System != "colly":
				ing = secs(s.Ingested)
				ddb = fmt.Sprintf("%.2f, %s / %s", float64(s.Dynamo.Requests)/float64(p.Hosts*p.PerHost), ms(s.Dynamo.Mean), ms(s.Dynamo.P99))
				cpu = fmt.Sprintf("%.0f%% / %.0f%%", 100*s.CPU.Moto, 100*s.CPU.MotoPeak)
				shard = fmt.Sprintf("%d / %d", p.MaxHostsPerShard, p.MaxConcurrentHosts)
			}
			machine := s.CPU.Machine
			if s.Process != nil {
				machine = s.Process.Machine
			}
			w("| %s | %s | %s | %s / %s | %.0f | %.2f | %s / %s | %s | %s | %s | %.0f%% | %s |\n",
				p.rowLabel(), s.System, ing, secs(s.FirstStartP50), secs(s.FirstStartMax), s.PeakRate, s.Pacing, ms(s.GapP50), ms(s.GapP99), ddb, cpu, rss, 100*machine, shard)
		}
	}
	w("\nRequests include robots.txt (ours fetch one per host first, Colly ignores robots by default). Steady: requests per second while every host is between its first and last request (\"never all busy\" when the last host started after the first had finished). Overall: all requests over the span from the first request to the last response. Pacing: d over the mean interval between consecutive request starts on one host (1.0 = every request as early as the delay allows). Gaps: from a response's end to the next request's start on the same host, from the site's own timestamps. First request: from the hand-over (moto) or the process's start. CPU: moto or the system's process as a share of one core (mean over the run, peak over 0.5 s for moto, 0.2 s for a process); machine: share of all %d cores, the site and the bench included.\n\n", r.Machine.Cores)
	for _, p := range r.Politeness {
		for _, s := range p.runs() {
			if s.System != "colly" && (s.Errors > 0 || s.Duplicates > 0) {
				w("H=%s, %s: results by status %v, %d duplicates.\n\n", p.rowLabel(), s.System, s.Results, s.Duplicates)
			}
		}
	}
	return b.String()
}

// targetCheck is one of issue 21's targets at one row.
type targetCheck struct {
	Target, Row, Ours, Colly string
	Met                      bool
}

// targetChecks judges issue 21's targets: at H >= 5,000 (over HTTP, local
// mode against Colly) span at most Colly's, efficiency at least Colly's, at
// most 1.05 new connections per host, no SYN retransmission, CPU per URL at
// most Colly's, and peak memory at most 500 MiB at H >= 10,000; in every
// row of ours, no gap below the delay.
func (r *Results) targetChecks() []targetCheck {
	var out []targetCheck
	for _, p := range r.Politeness {
		row := fmt.Sprintf("H=%s, U=%d, d=%s", p.rowLabel(), p.PerHost, p.Delay)
		if l, c := p.Local, p.Colly; l != nil && !p.TLS && p.Hosts >= 5000 {
			// Both steady, or both overall when either run's hosts were
			// never all busy at once.
			le, lok := p.efficiency(*l)
			ce, cok := p.efficiency(c)
			kind := ""
			if !lok || !cok {
				le, ce, kind = p.overallEfficiency(*l), p.overallEfficiency(c), " (overall)"
			}
			lc, _ := p.cpuPerKURL(*l)
			cc, _ := p.cpuPerKURL(c)
			out = append(out,
				targetCheck{"span at most 1.0x Colly's", row, secs(l.Wall), secs(c.Wall), l.Wall <= c.Wall},
				targetCheck{"efficiency at least Colly's", row, fmt.Sprintf("%.2f%s", le, kind), fmt.Sprintf("%.2f%s", ce, kind), le >= ce},
				targetCheck{"at most 1.05 new connections per host", row, fmt.Sprintf("%.2f", l.ConnsPerHost), fmt.Sprintf("%.2f", c.ConnsPerHost), l.ConnsPerHost <= 1.05},
				targetCheck{"0 SYN retransmissions on loopback", row, fmt.Sprintf("%d", l.Kernel.SynRetrans), fmt.Sprintf("%d", c.Kernel.SynRetrans), l.Kernel.SynRetrans == 0},
				targetCheck{"CPU per URL at most Colly's", row, fmt.Sprintf("%.3f s / 1,000", lc), fmt.Sprintf("%.3f s / 1,000", cc), l.Process != nil && c.Process != nil && lc <= cc},
			)
			if p.Hosts >= 10000 && l.Process != nil {
				cm := "-"
				if c.Process != nil {
					cm = sizeMiB(c.Process.MaxRSS)
				}
				out = append(out, targetCheck{"peak memory at most 500 MiB", row, sizeMiB(l.Process.MaxRSS), cm, l.Process.MaxRSS <= 500<<20})
			}
		}
		for _, s := range p.runs() {
			if s.System == "colly" {
				continue
			}
			out = append(out, targetCheck{"0 gaps below the delay", row + ", " + s.System, fmt.Sprintf("%d (min gap / d %.3f)", s.GapsBelow, s.MinGap.Seconds()/p.Delay.Seconds()),
				fmt.Sprintf("%d", p.Colly.GapsBelow), s.GapsBelow == 0 && s.MinGap >= p.Delay})
		}
	}
	return out
}

// targets renders targetChecks as a table.
func (r *Results) targets() string {
	cs := r.targetChecks()
	if len(cs) == 0 {
		return ""
	}
	var b strings.Builder
	met := 0
	for _, c := range cs {
		if c.Met {
			met++
		}
	}
	fmt.Fprintf(&b, "Issue 21's targets, judged on this run (%d of %d met): at H=5,000 and H=10,000, local mode's span at most 1.0x Colly's and its efficiency at least Colly's, at most 1.05 new connections per host (every row has several URLs per host), 0 SYN retransmissions on loopback, CPU per URL at most Colly's, peak memory at most 500 MiB at H=10,000; every row of ours keeps 0 gaps below the delay.\n\n", met, len(cs))
	b.WriteString("| target | row | ours | Colly | |\n|---|---|---|---|---|\n")
	for _, c := range cs {
		verdict := "**missed**"
		if c.Met {
			verdict = "met"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.Target, c.Row, c.Ours, c.Colly, verdict)
	}
	return b.String()
}
