package main

// Local mode, measured as users run it: `make run` (the runner's default
// backend, package standalone) as a child process, built once per bench run,
// on a URL file with --out and --state, against a demo site served by the
// bench process, whose request log judges politeness from the site's side.
// The child's peak RSS is its VmHWM, read from /proc while it runs (not
// wait4's ru_maxrss: Linux counts into it the parent's resident set at the
// fork, as the child shares the parent's memory until exec); its CPU time
// is wait4's.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// localRunner runs the local runner binary; dir is its scratch directory
// (inputs, states, results), removed by Close.
type localRunner struct {
	bin, dir string
}

// runner builds the runner once per bench run (`go build ./cmd/urldownloader`
// into a scratch directory removed at the end of the run), unless one was
// built before (prebuilt).
func (e *benchEnv) runner(ctx context.Context) (*localRunner, error) {
	e.runnerOnce.Do(func() {
		// The scratch directory also holds each run's input, state and
		// results.
		dir, err := os.MkdirTemp("", "bench-local-")
		if err != nil {
			e.runnerErr = err
			return
		}
		if prebuilt.runner != "" {
			e.local = &localRunner{bin: prebuilt.runner, dir: dir}
			return
		}
		bin, err := buildRunner(ctx, e.root, dir)
		if err != nil {
			os.RemoveAll(dir)
			e.runnerErr = err
			return
		}
		e.local = &localRunner{bin: bin, dir: dir}
	})
	return e.local, e.runnerErr
}

// prebuilt are binaries built before the benchmark's clock starts (the
// tests' TestMain): a build competes for the CPU with whatever else runs,
// and no timed part should include it. Empty: each run builds its own.
var prebuilt struct {
	runner     string
	bootstraps map[string]string // function name -> bootstrap
}

// buildRunner builds the urldownloader command into dir.
func buildRunner(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "urldownloader")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/urldownloader")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/urldownloader: %w\n%s", err, out)
	}
	return bin, nil
}

func (r *localRunner) Close() {
	if r != nil {
		os.RemoveAll(r.dir)
	}
}

// childRun is one run of the runner, seen from outside.
type childRun struct {
	Start    time.Time
	Wall     time.Duration
	ExitCode int
	// Stopped is when the run was sent SIGINT, from its start (zero: never).
	Stopped time.Duration
	// MaxRSS is the child's peak resident set (bytes, its VmHWM); CPU its
	// user and system time.
	MaxRSS int64
	CPU    time.Duration
	// CPUPeak is the highest share of one core over a sampling interval;
	// Machine the share of all cores busy while it ran.
	CPUPeak, Machine float64
	// ChildFDs and BenchFDs are the most descriptors the child and the
	// bench process (the site's listeners and connections) held open, read
	// every second while it ran.
	ChildFDs, BenchFDs int
	Stderr             string
}

// CPUMean is the child's CPU time over its wall time, as a share of one
// core.
func (c childRun) CPUMean() float64 {
	if c.Wall <= 0 {
		return 0
	}
	return c.CPU.Seconds() / c.Wall.Seconds()
}

// run runs the runner with args until it exits. stop, when set, is asked
// every 20 ms while it runs, and the first time it says so the runner gets
// SIGINT (Ctrl-C); ctx ending kills it.
func (r *localRunner) run(ctx context.Context, args []string, stop func() bool) (childRun, error) {
	return r.runEnv(ctx, args, nil, stop)
}

// runEnv is run with env (NAME=value) added to the runner's environment.
func (r *localRunner) runEnv(ctx context.Context, args, env []string, stop func() bool) (childRun, error) {
	cmd := exec.CommandContext(ctx, r.bin, args...)
	if extra := strings.Fields(os.Getenv(childEnv)); len(extra) > 0 {
		env = append(slices.Clone(env), extra...)
	}
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	return runChild(ctx, cmd, stop)
}

// runLimited is run with the child's descriptor limit (RLIMIT_NOFILE)
// lowered to nofile, set by a shell that then execs the runner (the same
// process, so it is measured as any child): its budget of connections
// follows from that limit, and a site in the bench process with listeners
// of its own must keep room for the child's connections.
func (r *localRunner) runLimited(ctx context.Context, args []string, nofile int) (childRun, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", `ulimit -n "$0" && exec "$@"`, strconv.Itoa(nofile), r.bin}, args...)...)
	if extra := strings.Fields(os.Getenv(childEnv)); len(extra) > 0 {
		cmd.Env = append(os.Environ(), extra...)
	}
	return runChild(ctx, cmd, nil)
}

// runChild runs cmd until it exits, measured from outside: wall, rusage,
// VmHWM, CPU peaks and descriptors (see run for stop).
func runChild(ctx context.Context, cmd *exec.Cmd, stop func() bool) (childRun, error) {
	bin := cmd.Path
	tail := &proc.Tail{Max: 32 << 10}
	cmd.Stderr = tail
	cmd.Stdout = tail
	cmd.WaitDelay = 5 * time.Second
	var cr childRun
	cr.Start = time.Now()
	if err := cmd.Start(); err != nil {
		return cr, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	var stopped sync.WaitGroup
	if stop != nil {
		stopped.Go(func() {
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-exited:
					return
				case <-t.C:
				}
				if stop() {
					cr.Stopped = time.Since(cr.Start)
					_ = cmd.Process.Signal(os.Interrupt)
					return
				}
			}
		})
	}
	smp := startChildSampler(cmd.Process.Pid, 200*time.Millisecond)
	err := cmd.Wait()
	cr.Wall = time.Since(cr.Start)
	close(exited)
	stopped.Wait()
	cr.CPUPeak, cr.Machine, cr.MaxRSS = smp.stop()
	cr.ChildFDs, cr.BenchFDs = smp.childFDs, smp.selfFDs
	cr.Stderr = tail.String()
	if cmd.ProcessState == nil {
		return cr, fmt.Errorf("run %s: %w", bin, err)
	}
	cr.ExitCode = cmd.ProcessState.ExitCode()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cr.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		// A run shorter than a sampling interval has its mean as its peak.
		cr.CPUPeak = max(cr.CPUPeak, cr.CPUMean())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return cr, fmt.Errorf("run %s: %w", bin, err)
	}
	if ctx.Err() != nil {
		return cr, fmt.Errorf("%s run: %w; its output ends:\n%s", filepath.Base(bin), ctx.Err(), lastLines(cr.Stderr, 15))
	}
	return cr, nil
}

// childSampler reads a process's CPU time and the machine's every interval.
type childSampler struct {
	pid  int
	done chan struct{}
	wg   sync.WaitGroup

	peak              float64
	hwm               int64
	childFDs, selfFDs int
	busy0, tick0      time.Duration
	busy1, tick1      time.Duration
}

func startChildSampler(pid int, every time.Duration) *childSampler {
	s := &childSampler{pid: pid, done: make(chan struct{})}
	s.busy0, s.tick0 = machineCPU()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		lastAt := time.Now()
		last, err := procCPU(pid)
		for tick := 0; ; tick++ {
			select {
			case <-s.done:
				return
			case <-t.C:
			}
			// The time is the CPU reading's, so that nothing read before
			// it (a slow /proc on a loaded machine) skews the interval.
			c, cerr := procCPU(pid)
			now := time.Now()
			if n, err := procHWM(pid); err == nil {
				s.hwm = n
			}
			if err == nil && cerr == nil {
				s.peak = max(s.peak, (c-last).Seconds()/now.Sub(lastAt).Seconds())
			}
			last, lastAt, err = c, now, cerr
			// Listing thousands of descriptors costs a few milliseconds:
			// once a second, after the CPU sample so that its time is
			// not counted into the next one's interval.
			if tick%int(max(1, time.Second/every)) == 0 {
				s.childFDs = max(s.childFDs, procFDs(strconv.Itoa(pid)))
				s.selfFDs = max(s.selfFDs, procFDs("self"))
			}
		}
	}()
	return s
}

// stop ends sampling and returns the peak share of one core, the
// machine's busy share since the start and the process's peak resident
// set (its last VmHWM read: a rise in the last interval before it exited
// is missed).
func (s *childSampler) stop() (peak, machine float64, hwm int64) {
	close(s.done)
	s.wg.Wait()
	s.busy1, s.tick1 = machineCPU()
	if dt := (s.tick1 - s.tick0).Seconds(); dt > 0 {
		machine = (s.busy1 - s.busy0).Seconds() / dt
	}
	return s.peak, machine, s.hwm
}

// procFDs counts the open descriptors of /proc/<pid> (0 when it cannot).
func procFDs(pid string) int {
	des, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		return 0
	}
	return len(des)
}

// procHWM reads a process's peak resident set size (bytes) from
// /proc/PID/status.
func procHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/PID/status")
}

// localArgs are the runner flags of a local mode run over urls with the
// bench's parameters and delay d.
func (e *benchEnv) localArgs(urls, out, state string, d time.Duration, extra map[string]string) []string {
	args := []string{"--urls", urls, "--out", out, "--state", state, "--allow-private", "--param", "FetchDelay=" + d.String()}
	params := map[string]string{}
	for k, v := range e.cfg.Params {
		params[k] = v
	}
	for k, v := range extra {
		params[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		args = append(args, "--param", k+"="+params[k])
	}
	return args
}

// jobFiles writes urls for a job of its own (writeURLs) and names its
// output and state beside them; done removes all three.
func (r *localRunner) jobFiles(name string, urls []string) (in, out, state string, done func(), err error) {
	if in, err = r.writeURLs(name, urls); err != nil {
		return "", "", "", nil, err
	}
	out, state = filepath.Join(r.dir, name+".out.jsonl"), filepath.Join(r.dir, name+".db")
	return in, out, state, func() {
		os.Remove(in)
		os.Remove(out)
		removeState(state)
	}, nil
}

// writeURLs writes urls as JSON lines into the runner's scratch directory.
func (r *localRunner) writeURLs(name string, urls []string) (string, error) {
	path := filepath.Join(r.dir, name+".jsonl")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(f)
	for _, u := range urls {
		b, _ := json.Marshal(map[string]string{"url": u})
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// outcome is what a run's output file holds.
type outcome struct {
	ByStatus map[string]int
	// Results counts lines; Duplicates the lines beyond one per URL.
	Results, Duplicates int
	// Missing lists the wanted URLs without a result.
	Missing []string
	// Wrong counts fetched results whose body is not the page's.
	Wrong int
}

// readOutcome reads a results file against the URLs that want a result.
func readOutcome(path string, want []string) (outcome, error) {
	o := outcome{ByStatus: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return o, err
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return o, fmt.Errorf("%s: not a result: %w", path, err)
		}
		o.Results++
		seen[r.URL]++
		if seen[r.URL] > 1 {
			o.Duplicates++
			continue
		}
		o.ByStatus[string(r.Status)]++
		if r.Status == result.StatusFetched {
			_, rest, _ := strings.Cut(r.URL, "://")
			path := strings.TrimPrefix(rest, r.Host)
			if r.Data != demosite.Body(r.Host, path) {
				o.Wrong++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return o, err
	}
	for _, u := range want {
		if seen[u] == 0 {
			o.Missing = append(o.Missing, u)
		}
	}
	return o, nil
}

// stateSize is the size of a SQLite state with its WAL and shared-memory
// files.
func stateSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

// localRun is one politeness run of local mode over the site: the URLs in
// the given order, in a file, downloaded by the runner with a new state.
func (e *benchEnv) localRun(ctx context.Context, site *demosite.Site, urls []string, hosts int, d time.Duration, name string) (RunStats, error) {
	return e.localRunEnv(ctx, site, urls, hosts, d, name, nil)
}

// localRunEnv is localRun with env added to the runner's environment and
// flags added to its command line.
func (e *benchEnv) localRunEnv(ctx context.Context, site *demosite.Site, urls []string, hosts int, d time.Duration, name string, env []string, flags ...string) (RunStats, error) {
	r, err := e.runner(ctx)
	if err != nil {
		return RunStats{}, err
	}
	in, err := r.writeURLs(name, urls)
	if err != nil {
		return RunStats{}, err
	}
	out, state := filepath.Join(r.dir, name+".out.jsonl"), filepath.Join(r.dir, name+".db")
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	cr, err := r.runEnv(rctx, append(e.localArgs(in, out, state, d, nil), flags...), env, nil)
	if err != nil {
		return RunStats{}, err
	}
	if cr.ExitCode != 0 {
		return RunStats{}, fmt.Errorf("local mode exited %d; its output ends:\n%s", cr.ExitCode, lastLines(cr.Stderr, 15))
	}
	o, err := readOutcome(out, urls)
	if err != nil {
		return RunStats{}, err
	}
	if len(o.Missing) > 0 || o.Wrong > 0 {
		return RunStats{}, fmt.Errorf("local mode: %d urls without a result (first %v), %d with the wrong page", len(o.Missing), o.Missing[:min(3, len(o.Missing))], o.Wrong)
	}
	reqs := site.Requests()
	if err := dumpArrivals(name, cr.Start, reqs, cr.Stderr); err != nil {
		return RunStats{}, err
	}
	st := analyze("urldownloader, local mode", reqs, cr.Start, time.Now(), d, hosts)
	st.Wall = cr.Wall
	st.Results, st.Duplicates = o.ByStatus, o.Duplicates
	st.Process = &cr
	st.StateBytes = stateSize(state)
	return st, nil
}

// ScaleResult is local mode on a large job: many URLs over many hosts.
type ScaleResult struct {
	Hosts, PerHost int
	Delay          time.Duration
	// Bound is the physical bound: every host asked U times, d apart.
	Bound      time.Duration
	Stats      RunStats
	StateBytes int64
}

// scale runs local mode on Hosts x PerHost URLs at ScaleDelay.
func (e *benchEnv) scale(ctx context.Context) (*ScaleResult, error) {
	h, u, d := e.cfg.ScaleHosts, e.cfg.ScalePerHost, e.cfg.ScaleDelay
	site, err := e.site(h, robotsRules)
	if err != nil {
		return nil, err
	}
	defer site.Close()
	urls := site.URLs(u)
	rng := rand.New(rand.NewPCG(uint64(h), 17))
	rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	e.log.Info("local mode at scale", "hosts", h, "urls", len(urls), "delay", d)
	st, err := e.localRun(ctx, site, urls, h, d, fmt.Sprintf("scale%d", len(urls)))
	if err != nil {
		return nil, fmt.Errorf("local mode, %d urls: %w", len(urls), err)
	}
	res := &ScaleResult{Hosts: h, PerHost: u, Delay: d, Bound: time.Duration(u) * d, Stats: st, StateBytes: st.StateBytes}
	e.log.Info("local mode at scale done", "wall", st.Wall.Round(time.Millisecond), "bound", res.Bound, "rssMB", st.Process.MaxRSS>>20)
	return res, nil
}

// ResumeResult is one job stopped (SIGINT, as Ctrl-C) at random moments
// and run again on the same state and output until it finished.
type ResumeResult struct {
	Hosts, PerHost int
	Delay          time.Duration
	Seed           uint64
	// StopAt are the numbers of results written (over all runs) at which
	// the runs were stopped, StopAfter when each stop came from its run's
	// start, and Exits the runs' exit codes (130 for a clean stop, -1 for a
	// signal that came before the runner listened, 0 at the end).
	StopAt    []int
	StopAfter []time.Duration
	Exits     []int
	Walls     []time.Duration
	// Total is the sum of the runs' walls.
	Total time.Duration
	// Requests is what the site saw in all: pages, robots.txt (Robots),
	// and the rest, re-fetches.
	Requests, Robots, Refetches int
	URLs                        int
	Outcome                     outcome
	MinGap                      time.Duration
	StateBytes                  int64
}

// resume runs one job over ResumeHosts x ResumePerHost URLs, stopping it
// ResumeStops times at random moments.
func (e *benchEnv) resume(ctx context.Context) (*ResumeResult, error) {
	h, u, d := e.cfg.ResumeHosts, e.cfg.ResumePerHost, e.cfg.Delay
	r, err := e.runner(ctx)
	if err != nil {
		return nil, err
	}
	site, err := e.site(h, robotsRules)
	if err != nil {
		return nil, err
	}
	defer site.Close()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 3))
	urls := site.URLs(u)
	rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	in, err := r.writeURLs("resume", urls)
	if err != nil {
		return nil, err
	}
	out, state := filepath.Join(r.dir, "resume.out.jsonl"), filepath.Join(r.dir, "resume.db")
	res := &ResumeResult{Hosts: h, PerHost: u, Delay: d, Seed: seed, URLs: len(urls)}
	args := e.localArgs(in, out, state, d, nil)
	// The stops come at random points of the job's progress: when the
	// site has served a random number of requests (robots.txt included),
	// so each lands in a run, while rounds are in flight. They fall in the
	// first three quarters of the job's page requests. Counting results
	// instead let a stop miss: results come out a round at a time, and a
	// job's last rounds wrote the count past the stop in one burst when
	// the run had already finished (exit 0, on a loaded machine).
	var stopAt []int
	for range e.cfg.ResumeStops {
		stopAt = append(stopAt, 1+rng.IntN(max(1, len(urls)*3/4-1)))
	}
	slices.Sort(stopAt)
	res.StopAt = stopAt
	e.log.Info("local mode resume", "hosts", h, "urls", len(urls), "stops", stopAt, "seed", seed)
	for i := 0; i <= len(stopAt); i++ {
		var stop func() bool
		if i < len(stopAt) {
			at := stopAt[i]
			stop = func() bool { return site.RequestCount() >= at }
		}
		rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
		cr, err := r.run(rctx, args, stop)
		cancel()
		if err != nil {
			return nil, err
		}
		res.StopAfter = append(res.StopAfter, cr.Stopped)
		res.Exits = append(res.Exits, cr.ExitCode)
		res.Walls = append(res.Walls, cr.Wall)
		res.Total += cr.Wall
		// 130: stopped cleanly; -1: the signal came before the runner
		// listened for it and killed it, as a hard kill would.
		if cr.ExitCode != 0 && cr.ExitCode != 130 && cr.ExitCode != -1 {
			return nil, fmt.Errorf("local mode run %d exited %d; its output ends:\n%s", i+1, cr.ExitCode, lastLines(cr.Stderr, 15))
		}
		if cr.ExitCode == 0 {
			// It finished before its stop came: the job is done.
			break
		}
	}
	if last := res.Exits[len(res.Exits)-1]; last != 0 {
		return nil, fmt.Errorf("the last local mode run exited %d", last)
	}
	o, err := readOutcome(out, urls)
	if err != nil {
		return nil, err
	}
	res.Outcome = o
	reqs := site.Requests()
	res.Requests = len(reqs)
	for _, q := range reqs {
		if q.Path == "/robots.txt" {
			res.Robots++
		}
	}
	res.Refetches = res.Requests - res.Robots - len(urls)
	res.MinGap, _ = demosite.MinGap(reqs)
	res.StateBytes = stateSize(state)
	e.log.Info("local mode resume done", "runs", len(res.Exits), "requests", res.Requests, "refetches", res.Refetches, "missing", len(o.Missing))
	return res, nil
}

// localJobs runs the local mode job at scale and the resume job, unless
// skipped.
func (e *benchEnv) localJobs(ctx context.Context, res *Results) error {
	if !e.cfg.SkipScale {
		sr, err := e.scale(ctx)
		if err != nil {
			return err
		}
		res.Scale = sr
	}
	if !e.cfg.SkipResume {
		rr, err := e.resume(ctx)
		if err != nil {
			return fmt.Errorf("local mode resume: %w", err)
		}
		res.Resume = rr
	}
	if !e.cfg.SkipMemory {
		mr, err := e.memory(ctx)
		if err != nil {
			return err
		}
		res.Memory = mr
	}
	if !e.cfg.SkipBigSite {
		br, err := e.bigSite(ctx)
		if err != nil {
			return err
		}
		res.BigSite = br
	}
	return nil
}

// lineCounter counts the lines of a growing file, reading only what was
// added since it last looked.
type lineCounter struct {
	path string
	off  int64
	n    int
}

func (l *lineCounter) count() int {
	f, err := os.Open(l.path)
	if err != nil {
		return l.n
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		k, err := f.ReadAt(buf, l.off)
		for _, c := range buf[:k] {
			if c == '\n' {
				l.n++
			}
		}
		l.off += int64(k)
		if err != nil || k == 0 {
			return l.n
		}
	}
}

// RefetchLimit is the resume target's allowance: 1% of the URLs.
func (r *ResumeResult) RefetchLimit() int { return (r.URLs + 99) / 100 }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// childEnv adds NAME=value pairs (space separated) to the environment of
// local mode's processes only, not the bench's own (its site and Colly):
// a developer trying GOGC or GODEBUG settings on the process users run.
const childEnv = "BENCH_CHILD_ENV"

// arrivalsEnv names a folder where each local-mode run leaves the site's
// arrivals (host, path, start and end in ms from the process's start) and
// the process's stderr, so
// a developer can see where a row's time went: a host's late first request,
// a gap far above the delay.
const arrivalsEnv = "BENCH_ARRIVALS"

func dumpArrivals(name string, start time.Time, reqs []demosite.Request, stderr string) error {
	dir := os.Getenv(arrivalsEnv)
	if dir == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString("host,path,start_ms,end_ms\n")
	for _, r := range reqs {
		fmt.Fprintf(&b, "%s,%s,%d,%d\n", r.Host, r.Path, r.Start.Sub(start).Milliseconds(), r.End.Sub(start).Milliseconds())
	}
	if err := os.WriteFile(filepath.Join(dir, name+".arrivals.csv"), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("%s: %w", arrivalsEnv, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".stderr"), []byte(stderr), 0o644); err != nil {
		return fmt.Errorf("%s: %w", arrivalsEnv, err)
	}
	return nil
}
