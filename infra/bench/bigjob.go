package main

// Local mode on jobs whose size is the point (`-only memory,bigsite`):
//
//   - memory: N lines that all end at ingest (every URL's host is a private
//     address, refused without --allow-private: a denied result, no
//     request), so the run is all input, bookkeeping and output. The
//     figure is the child's peak resident set (VmHWM) against N: it must
//     not grow with the job (issue 20: at most 300 MiB at 2 and 20 million
//     lines). 20 million lines take many minutes, so that row is opt-in
//     (-memory-20m).
//   - bigsite: one host with BigSitePerHost URLs among small ones, with
//     the default PersistLimit (1,000) below it: nothing may be dropped,
//     and the big host's span is held against its bound (URLs x d).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// MemoryResult is one run of the memory rows.
type MemoryResult struct {
	Lines      int
	Wall       time.Duration
	CPU        time.Duration
	MaxRSS     int64
	StateBytes int64
	Results    int
	ExitCode   int
}

// memory runs the memory rows, one per size in cfg.MemoryLines.
func (e *benchEnv) memory(ctx context.Context) ([]MemoryResult, error) {
	r, err := e.runner(ctx)
	if err != nil {
		return nil, err
	}
	var out []MemoryResult
	for _, n := range e.cfg.MemoryLines {
		e.log.Info("local mode memory", "lines", n)
		mr, err := e.memoryRun(ctx, r, n)
		if err != nil {
			return out, fmt.Errorf("local mode memory, %d lines: %w", n, err)
		}
		e.log.Info("local mode memory done", "lines", n, "wall", mr.Wall.Round(time.Millisecond), "rssMB", mr.MaxRSS>>20, "stateMB", mr.StateBytes>>20)
		out = append(out, mr)
	}
	return out, nil
}

func (e *benchEnv) memoryRun(ctx context.Context, r *localRunner, n int) (MemoryResult, error) {
	name := fmt.Sprintf("memory%d", n)
	in := filepath.Join(r.dir, name+".txt")
	if err := writePrivateURLs(in, n); err != nil {
		return MemoryResult{}, err
	}
	defer os.Remove(in)
	out, state := filepath.Join(r.dir, name+".out.jsonl"), filepath.Join(r.dir, name+".db")
	defer os.Remove(out)
	// About 25 µs of CPU per line on this class of machine, and a margin.
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout+time.Duration(n)*200*time.Microsecond)
	defer cancel()
	args := []string{"--urls", in, "--out", out, "--state", state, "--timeout", "10h"}
	cr, err := r.run(rctx, args, nil)
	if err != nil {
		return MemoryResult{}, err
	}
	mr := MemoryResult{Lines: n, Wall: cr.Wall, CPU: cr.CPU, MaxRSS: cr.MaxRSS, StateBytes: stateSize(state), ExitCode: cr.ExitCode}
	lc := &lineCounter{path: out}
	mr.Results = lc.count()
	// Every line ends denied at ingest (private addresses, by design of
	// the row): the command's exit for a job whose URLs failed is 1.
	if cr.ExitCode != 1 || mr.Results != n {
		return mr, fmt.Errorf("local mode exited %d with %d results for %d lines; its output ends:\n%s", cr.ExitCode, mr.Results, n, lastLines(cr.Stderr, 15))
	}
	return mr, nil
}

// writePrivateURLs writes n bare URLs, each on a host of its own in
// 10.0.0.0/8 (so the job's bookkeeping is per URL and per host).
func writePrivateURLs(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range n {
		fmt.Fprintf(w, "http://10.%d.%d.%d/p/%d\n", (i>>16)&255, (i>>8)&255, i&255, i)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// BigSiteResult is the big-site row.
type BigSiteResult struct {
	BigURLs, SmallHosts, SmallPerHost int
	Delay                             time.Duration
	// Bound is BigURLs x Delay; Span the big host's first request start
	// to its last request's end, as the site saw them. Latency is the
	// site's time per answer, which the delay comes after (so the span
	// cannot be below BigURLs x (Delay + Latency)).
	Bound, Span, Latency time.Duration
	// SmallLast is when the last small host's last request ended, from
	// the run's start: they must not wait for the big host.
	SmallLast time.Duration
	Stats     RunStats
	Dropped   int
}

// bigSite runs one host with BigSitePerHost URLs first in the file, then
// BigSiteSmallHosts hosts of 20 URLs each, at BigSiteDelay, with the
// default PersistLimit.
func (e *benchEnv) bigSite(ctx context.Context) (*BigSiteResult, error) {
	const small = 20
	hosts := e.cfg.BigSiteSmallHosts + 1
	d := e.cfg.BigSiteDelay
	site, err := e.site(hosts, "")
	if err != nil {
		return nil, err
	}
	defer site.Close()
	hs := site.Hosts()
	var urls []string
	for i := range e.cfg.BigSitePerHost {
		urls = append(urls, site.URL(hs[0], i))
	}
	for _, h := range hs[1:] {
		for i := range small {
			urls = append(urls, site.URL(h, i))
		}
	}
	e.log.Info("local mode big site", "bigHostURLs", e.cfg.BigSitePerHost, "hosts", hosts, "delay", d)
	st, err := e.localRun(ctx, site, urls, hosts, d, fmt.Sprintf("bigsite%d", len(urls)))
	if err != nil {
		return nil, fmt.Errorf("local mode big site: %w", err)
	}
	res := &BigSiteResult{BigURLs: e.cfg.BigSitePerHost, SmallHosts: hosts - 1, SmallPerHost: small, Delay: d,
		Bound: time.Duration(e.cfg.BigSitePerHost) * d, Latency: e.cfg.Latency, Stats: st, Dropped: st.Results["dropped"]}
	var first, last time.Time
	for _, rq := range site.Requests() {
		if rq.Host == hs[0] {
			if first.IsZero() || rq.Start.Before(first) {
				first = rq.Start
			}
			if rq.End.After(last) {
				last = rq.End
			}
		} else if slices.Contains(hs[1:], rq.Host) {
			res.SmallLast = max(res.SmallLast, rq.End.Sub(st.Process.Start))
		}
	}
	res.Span = last.Sub(first)
	e.log.Info("local mode big site done", "span", res.Span.Round(time.Millisecond), "bound", res.Bound, "dropped", res.Dropped)
	return res, nil
}

// bigJobsTable is section 4's part for these rows.
func bigJobsTable(mem []MemoryResult, big *BigSiteResult) string {
	var b []byte
	w := func(format string, args ...any) { b = fmt.Appendf(b, format, args...) }
	if len(mem) > 0 {
		w("Memory against the job's length: a file of bare URLs, each on a host of its own in 10.0.0.0/8, so that every URL ends at ingest (denied without `--allow-private`, no request): the run is reading, bookkeeping and writing results. Peak RSS is the child's VmHWM. Target: at most 300 MiB whatever the length (the reader holds at most 16 MiB of lines; the ids owed a result are in memory for the first 131,072, then in a scratch SQLite database on disk). The state file keeps the queues (none here: nothing is queued) and the input's progress.\n\n")
		w("| lines | wall | CPU | CPU / line | **peak RSS** | state file | results |\n|---|---|---|---|---|---|---|\n")
		for _, m := range mem {
			w("| %d | %s | %s | %.1f µs | **%s** | %s | %d |\n", m.Lines, secs(m.Wall), secs(m.CPU), float64(m.CPU.Microseconds())/float64(m.Lines), sizeMiB(m.MaxRSS), sizeMiB(m.StateBytes), m.Results)
		}
		w("\n")
	}
	if big != nil {
		s := big.Stats
		w("A big site: one host with %d URLs first in the file, then %d hosts of %d, d = %s, the default PersistLimit (1,000): the host's queue takes 1,000 and the rest wait in the input's overflow (back-pressure), queued as the host drains. Target: nothing dropped, the big host's span near its bound (URLs x d; the site answers in %s and the delay runs from the answer's end, so URLs x (d + %s) is the least it can take), the small hosts done long before it.\n\n", big.BigURLs, big.SmallHosts, big.SmallPerHost, big.Delay, big.Latency, big.Latency)
		with := time.Duration(big.BigURLs) * (big.Delay + big.Latency)
		w("| URLs | d | **dropped** | big host: bound / with the answers' time / **span** | span / bound | span / bound with the answers | small hosts' last response | min gap / d | peak RSS | state file | results |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		w("| %d | %s | **%d** | %s / %s / **%s** | %.3f | %.3f | %s | %.3f | %s | %s | %s |\n\n",
			big.BigURLs+big.SmallHosts*big.SmallPerHost, big.Delay, big.Dropped, secs(big.Bound), secs(with), secs(big.Span), big.Span.Seconds()/big.Bound.Seconds(), big.Span.Seconds()/with.Seconds(),
			secs(big.SmallLast), s.MinGap.Seconds()/big.Delay.Seconds(), sizeMiB(s.Process.MaxRSS), sizeMiB(s.StateBytes), statusList(s.Results))
	}
	return string(b)
}

// The big jobs' section of docs/benchmarks.md, written on its own (as the
// bodies' is): a run of these parts alone leaves the rest as it was.
var bigJobsSection = ownSection{part: "memory,bigsite", name: "big jobs", heading: "Local mode: long jobs and a big site"}

// writeBigJobs replaces the big jobs' section of path, or appends it.
func writeBigJobs(path string, mem []MemoryResult, big *BigSiteResult, m Machine) error {
	return bigJobsSection.write(path, m.runLine(false)+" The runner as in section 4, a new state each.", bigJobsTable(mem, big))
}
