package main

// The resources scenario (issue 11): does one invocation stay within its
// function's memory and Lambda's 1,024 descriptors when the web is slow
// and hostile, and does ingest answer before its timeout?
//
// Check: 1,000 hosts whose pages are 200 KB and slow (1 s to the first
// byte, 2 s to the last) and 1,000 hosts that accept connections and never
// answer, all due at once, worked by ONE check invocation of every shard
// (a wake-up batch: the most one process ever works) in a process of its
// own (resources_child.go) with the template's MemorySize and Lambda's
// descriptor limit. Ingest: one SQS batch of 6 MB carrying 50,000 distinct
// hosts, in a process with ingest's MemorySize and timeout. Both run the
// functions' real code (handler, services, SDK clients) on moto; the
// output queue is the bench's sink (driver.go), which takes 200 KB results
// at any rate (moto's queues are not under test).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// ResourcesConfig sizes the resources scenario.
type ResourcesConfig struct {
	SlowHosts, HangHosts, URLsPerHost int
	// PageBytes is a slow page's size; FirstByte and LastByte when its
	// first and last bytes leave the server.
	PageBytes           int
	FirstByte, LastByte time.Duration
	// CheckRun is the check invocation's CHECK_RUN_SECONDS.
	CheckRun time.Duration
	// Params are runtime parameters over the template's defaults.
	Params map[string]string
	// IngestHosts distinct hosts, one URL each, in IngestRecords records;
	// IngestTimeout replaces the template's timeout (0: the template's).
	IngestHosts, IngestRecords int
	IngestTimeout              time.Duration
	// NoBudget runs the check function without its MemorySize in the
	// environment: no worker budget, no GOMEMLIMIT, only
	// MaxConcurrentHosts per shard, as before issue 11 (for comparison).
	NoBudget bool
	// Rate are the requests-per-second rows (resources_rate.go).
	Rate []RateConfig
	// CheckMemory lists the MemorySize values (MB) the SQLite rate row
	// runs at, in place of the template's (which stays as it is): the
	// check function's memory chosen by measurement (issue 24). Empty:
	// the template's alone.
	CheckMemory []int
}

// FullResources is what `make bench` runs: the sizes. The check
// invocation starts requests for 30 s (the template's 55 s would add
// nothing but time: the peaks come in the first seconds, when every worker
// slot is taken at once).
func FullResources() ResourcesConfig {
	return ResourcesConfig{
		SlowHosts: 1000, HangHosts: 1000, URLsPerHost: 2,
		PageBytes: 200_000, FirstByte: time.Second, LastByte: 2 * time.Second,
		CheckRun:    30 * time.Second,
		IngestHosts: 50_000, IngestRecords: 1000,
		Rate:        FullRate(),
		CheckMemory: []int{512, 1024},
	}
}

// SmokeResources is a seconds-long run for `make test`.
func SmokeResources() ResourcesConfig {
	return ResourcesConfig{
		SlowHosts: 12, HangHosts: 12, URLsPerHost: 2,
		PageBytes: 200_000, FirstByte: 100 * time.Millisecond, LastByte: 200 * time.Millisecond,
		// A slow host's two pages take about a second; the run is ten,
		// so under a loaded machine's slowdown every slow URL is still
		// fetched within it (TestResourcesSmoke wants them all).
		CheckRun: 10 * time.Second,
		Params:   map[string]string{"FetchTimeout": "2s", "FetchDelay": "200ms"},
		// Little time, so a moto slower than the smallest batch still
		// shows the hand-back instead of the timeout.
		IngestHosts: 600, IngestRecords: 20, IngestTimeout: 8 * time.Second,
		Rate:        SmokeRate(),
		CheckMemory: []int{512, 1024},
	}
}

// ResourcesResult is what the scenario measured.
type ResourcesResult struct {
	Config ResourcesConfig
	// The template's settings the children ran with.
	CheckMemoryMiB, IngestMemoryMiB int
	CheckTimeout, IngestTimeout     time.Duration
	Shards                          int
	Check, Ingest                   resChildReport
	// From the sink and the sites.
	SlowURLs, Fetched, Duplicates int
	ByStatus                      map[string]int
	SlowRequests, HangConns       int64
	EventBytes                    int
	Elapsed                       time.Duration
	// Rate are the requests-per-second rows.
	Rate []*RateResult
}

// Misses lists the targets the run missed: peak RSS at most 60% of the
// function's MemorySize, at most 800 descriptors, no request lost to a
// local resource, no healthy URL failed, and an ingest that answers
// before its timeout with every URL of the records it kept queued.
func (r *ResourcesResult) Misses() []string {
	var out []string
	for _, c := range []struct {
		name string
		rep  resChildReport
		mib  int
	}{{"check", r.Check, r.CheckMemoryMiB}, {"ingest", r.Ingest, r.IngestMemoryMiB}} {
		if c.rep.Err != "" {
			out = append(out, fmt.Sprintf("%s failed: %s", c.name, c.rep.Err))
		}
		if limit := int64(c.mib) << 20 * 6 / 10; c.rep.PeakRSS > limit {
			out = append(out, fmt.Sprintf("%s peak RSS %s above 60%% of %d MiB", c.name, mib(c.rep.PeakRSS), c.mib))
		}
		if c.rep.PeakFDs > 800 {
			out = append(out, fmt.Sprintf("%s had %d descriptors open, above 800", c.name, c.rep.PeakFDs))
		}
	}
	if n := r.Check.Summary.LocalErrors; n > 0 {
		out = append(out, fmt.Sprintf("check: %d requests not made for want of local resources", n))
	}
	if n := r.ByStatus["fetch_error"] + r.ByStatus["denied"]; n > 0 {
		out = append(out, fmt.Sprintf("check: %d URLs ended fetch_error or denied (no host gives up within the run)", n))
	}
	if r.Fetched == 0 {
		out = append(out, "check fetched nothing")
	}
	if left := r.IngestTimeout - r.Ingest.Elapsed; left < time.Second {
		out = append(out, fmt.Sprintf("ingest answered %s before its timeout, want at least 1 s", left.Round(time.Millisecond)))
	}
	if r.Ingest.URLsInOKRecords > r.Ingest.Appended {
		out = append(out, fmt.Sprintf("ingest kept records holding %d URLs but queued %d", r.Ingest.URLsInOKRecords, r.Ingest.Appended))
	}
	for _, rr := range r.Rate {
		out = append(out, rr.Misses()...)
	}
	return out
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// Table is the scenario's markdown table and what it shows.
func (r *ResourcesResult) Table() string {
	var b strings.Builder
	c, in := r.Check, r.Ingest
	fmt.Fprintf(&b, "Each function runs one invocation of its real code (handler, services, SDK clients; moto behind them, the bench's sink as the output queue) in a process of its own, with the template's MemorySize in `AWS_LAMBDA_FUNCTION_MEMORY_SIZE` (from which GOMEMLIMIT and the check worker budget follow) and Lambda's 1,024 descriptors (RLIMIT_NOFILE). Check works every shard in one invocation, as a wake-up batch would: the most one process ever works. Peak RSS is the kernel's high-water mark (VmHWM), descriptors are sampled from /proc/self/fd every 5 ms. Targets: peak RSS at most 60%% of MemorySize, at most 800 descriptors, no request lost to a local resource, ingest answering before its timeout.\n\n")
	fmt.Fprintf(&b, "| function (MemorySize, timeout) | load | GOMEMLIMIT | workers: budget / peak | peak RSS (of MemorySize) | peak heap | descriptors: wired / peak | fetch connections peak | outcome |\n|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| check (%d MiB, %s) | %d hosts of %d KB pages, %s to the first byte and %s to the last, and %d hosts that never answer, %d URLs each; one wake-up invocation of all %d shards, %s run | %s | %d / %d | %s (%.0f%%) | %s | %d / %d | %d | %d of %d slow URLs fetched in %s (%d requests, %d connections to the silent hosts); %d local errors, %d fetch errors, %d duplicates |\n",
		r.CheckMemoryMiB, r.CheckTimeout, r.Config.SlowHosts, r.Config.PageBytes/1000, r.Config.FirstByte, r.Config.LastByte, r.Config.HangHosts, r.Config.URLsPerHost, r.Shards, r.Config.CheckRun,
		mib(c.GOMEMLIMIT), c.Workers, c.PeakWorkers, mib(c.PeakRSS), pct(c.PeakRSS, r.CheckMemoryMiB), mib(c.PeakHeap), c.BaseFDs, c.PeakFDs, c.PeakConns,
		r.Fetched, r.SlowURLs, c.Elapsed.Round(100*time.Millisecond), r.SlowRequests, r.HangConns, c.Summary.LocalErrors, r.ByStatus["fetch_error"], r.Duplicates)
	fmt.Fprintf(&b, "| ingest (%d MiB, %s) | one SQS batch of %.1f MB: %d records, %d distinct hosts | %s | - | %s (%.0f%%) | %s | %d / %d | - | answered after %s, %s before the timeout: %d records queued (%d URLs), %d handed back (SQS redelivers them) |\n",
		r.IngestMemoryMiB, r.IngestTimeout, float64(r.EventBytes)/1e6, in.Records, in.URLs,
		mib(in.GOMEMLIMIT), mib(in.PeakRSS), pct(in.PeakRSS, r.IngestMemoryMiB), mib(in.PeakHeap), in.BaseFDs, in.PeakFDs,
		in.Elapsed.Round(100*time.Millisecond), (r.IngestTimeout - in.Elapsed).Round(100*time.Millisecond), in.Records-in.FailedRecords, in.URLsInOKRecords, in.FailedRecords)
	for _, rr := range r.Rate {
		b.WriteString(rr.row(r.CheckTimeout, r.Shards))
	}
	b.WriteString(memoryTable(r.Rate))
	if m := r.Misses(); len(m) > 0 {
		fmt.Fprintf(&b, "\nMissed: %s.\n", strings.Join(m, "; "))
	} else {
		fmt.Fprintf(&b, "\nTargets met: peak RSS at most 60%% of MemorySize, at most 800 descriptors, no request lost to a local resource, ingest answered before its timeout.\n")
	}
	return b.String()
}

func pct(b int64, mib int) float64 { return 100 * float64(b) / float64(int64(mib)<<20) }

// resources runs the scenario on the run's moto.
func (e *benchEnv) resources(ctx context.Context, rc ResourcesConfig) (*ResourcesResult, error) {
	start := time.Now()
	res := &ResourcesResult{Config: rc, ByStatus: map[string]int{}}
	slow, err := startSlowSite("127.0.0.2", rc)
	if err != nil {
		return nil, err
	}
	defer slow.Close()
	hang, err := startHangSite("127.0.0.3")
	if err != nil {
		return nil, err
	}
	defer hang.Close()
	// The slow and the hanging hosts stand for as many servers, each site
	// serving its names from one address: the server gate, which would
	// pace each site as one shared server, is off (ServerDelay 0).
	params := map[string]string{"AllowedPorts": fmt.Sprintf("%d,%d", slow.port, hang.port), "ServerDelay": "0"}
	maps.Copy(params, rc.Params)
	delay := time.Second // the template's FetchDelay
	if d, err := time.ParseDuration(params["FetchDelay"]); err == nil {
		delay = d
	}
	b, err := e.start(ctx, "resources", delay, params, 0, false)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	st := b.p.Stack
	checkFn, ingestFn := st.Functions[stack.CheckFunction], st.Functions[stack.IngestFunction]
	res.CheckMemoryMiB, res.CheckTimeout = checkFn.MemorySize, checkFn.Timeout
	res.IngestMemoryMiB, res.IngestTimeout = ingestFn.MemorySize, ingestFn.Timeout
	if rc.IngestTimeout > 0 {
		res.IngestTimeout = rc.IngestTimeout
	}
	res.Shards = st.ShardCount

	// Slow and silent hosts take turns in the due index: they are all
	// due at once, and hosts due at the same time come in key order.
	table := map[string][]netip.Addr{}
	var msgs []urlmsg.Message
	add := func(name string, addr netip.Addr, port int) {
		table[name] = []netip.Addr{addr}
		for i := range rc.URLsPerHost {
			m, err := urlmsg.Validate(urlmsg.Input{URL: fmt.Sprintf("http://%s:%d/page/%d", name, port, i)})
			if err != nil {
				panic(err)
			}
			m.ID = urlmsg.MakeID("resources", len(msgs), m.URL)
			msgs = append(msgs, m)
		}
	}
	for i := range rc.SlowHosts {
		add(fmt.Sprintf("%04d.slow.test", i), slow.addr, slow.port)
	}
	res.SlowURLs = len(msgs)
	for i := range rc.HangHosts {
		add(fmt.Sprintf("%04d.hang.test", i), hang.addr, hang.port)
	}
	e.log.Info("resources: queueing", "hosts", rc.SlowHosts+rc.HangHosts, "urls", len(msgs))
	ir := b.p.IngestServices().Ingester.Ingest(ctx, hostqueue.IngestParams{PersistLimit: 1000}, msgs)
	if len(ir.Failed) > 0 {
		return res, fmt.Errorf("queue the scenario's urls: %d failed", len(ir.Failed))
	}

	env, shards := checkChildEnv(st, rc.CheckRun, 0, rc.NoBudget)
	e.log.Info("resources: check invocation", "shards", shards, "run", rc.CheckRun)
	res.Check, err = e.resChild(ctx, "check", env, resChildInput{Timeout: checkFn.Timeout, Shards: shards, SinkURL: b.sink.url.String(), Resolve: table})
	if err != nil {
		return res, err
	}
	res.SlowRequests, res.HangConns = slow.requests.Load(), hang.accepted.Load()
	b.sink.mu.Lock()
	maps.Copy(res.ByStatus, b.sink.byStatus)
	res.Fetched, res.Duplicates = b.sink.byStatus["fetched"], b.sink.dups
	b.sink.mu.Unlock()

	ev := ingestEventOf(rc.IngestHosts, rc.IngestRecords)
	raw, err := json.Marshal(ev)
	if err != nil {
		return res, err
	}
	res.EventBytes = len(raw)
	env = maps.Clone(ingestFn.Env)
	env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = strconv.Itoa(ingestFn.MemorySize)
	e.log.Info("resources: ingest invocation", "bytes", len(raw), "records", rc.IngestRecords, "hosts", rc.IngestHosts, "timeout", res.IngestTimeout)
	res.Ingest, err = e.resChild(ctx, "ingest", env, resChildInput{Timeout: res.IngestTimeout, Event: raw})
	for _, c := range rateRows(rc) {
		if err != nil {
			break
		}
		var rr *RateResult
		if rr, err = e.rate(ctx, c); rr != nil {
			res.Rate = append(res.Rate, rr)
		}
	}
	res.Elapsed = time.Since(start)
	return res, err
}

// rateRows are rc's rate rows with the SQLite one at each of
// rc.CheckMemory's sizes (once, at the template's, if none). A row's
// hosts are sized for rateBaseMB; a larger MemorySize has more workers
// (up to 443 at 1,024 MB against 198 at 512), so it gets proportionally
// more hosts, to stay short of workers rather than of due hosts for the
// whole run (otherwise it measures the work, not the rate).
func rateRows(rc ResourcesConfig) []RateConfig {
	var out []RateConfig
	for _, c := range rc.Rate {
		if !c.SQLite || len(rc.CheckMemory) == 0 {
			out = append(out, c)
			continue
		}
		hosts := c.Hosts
		for _, mb := range rc.CheckMemory {
			c.MemoryMB = mb
			c.Hosts = max(hosts, (hosts*mb+rateBaseMB-1)/rateBaseMB)
			out = append(out, c)
		}
	}
	return out
}

// rateBaseMB is the MemorySize the rate rows' host counts are sized for
// (the template's).
const rateBaseMB = 512

// checkChildEnv is the check function's environment for a wake-up
// invocation of every shard of st, with run as CHECK_RUN_SECONDS and the
// function's MemorySize (memMB in its place if above 0; none if
// noBudget), and the shards it works.
func checkChildEnv(st *stack.Stack, run time.Duration, memMB int, noBudget bool) (map[string]string, []int) {
	checkFn := st.Functions[stack.CheckFunction]
	env := maps.Clone(checkFn.Env)
	env["ALLOW_PRIVATE_NETWORKS"] = "true"
	env["CHECK_RUN_SECONDS"] = strconv.FormatFloat(run.Seconds(), 'f', -1, 64)
	if memMB <= 0 {
		memMB = checkFn.MemorySize
	}
	env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = strconv.Itoa(memMB)
	if noBudget {
		delete(env, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
	}
	var shards []int
	for s := range st.ShardCount {
		shards = append(shards, s)
	}
	return env, shards
}

// resChild runs one function invocation in a child process (see
// resources_child.go) and returns its report.
func (e *benchEnv) resChild(ctx context.Context, mode string, fnEnv map[string]string, in resChildInput) (resChildReport, error) {
	var rep resChildReport
	dir, err := os.MkdirTemp("", "bench-resources-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	input, report := filepath.Join(dir, "input.json"), filepath.Join(dir, "report.json")
	b, err := json.Marshal(in)
	if err == nil {
		err = os.WriteFile(input, b, 0o644)
	}
	if err != nil {
		return rep, err
	}
	exe, err := os.Executable()
	if err != nil {
		return rep, err
	}
	cmd := exec.CommandContext(ctx, exe)
	// A clean environment: only the function's own, AWS's (moto) and the
	// child's; nothing of the bench's (GOMEMLIMIT, GOGC, a developer's AWS
	// profile) leaks in.
	vars := map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "LOG_LEVEL": "warn"}
	maps.Copy(vars, fnEnv)
	maps.Copy(vars, moto.Env(e.moto.Endpoint))
	vars[resChildEnv], vars[resInputEnv], vars[resReportEnv] = mode, input, report
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr proc.Tail
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	if b, err := os.ReadFile(report); err == nil {
		err = json.Unmarshal(b, &rep)
		if err != nil {
			return rep, fmt.Errorf("%s child report: %w", mode, err)
		}
	} else if runErr == nil {
		runErr = err
	}
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rep.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if runErr != nil {
		return rep, fmt.Errorf("%s child: %w (%s)\n%s", mode, runErr, rep.Err, stderr.String())
	}
	if n := strings.Count(stderr.String(), "out of local resources"); n > 0 {
		e.log.Warn("resources: local resource errors in the child's log", "function", mode, "lines", n)
	}
	return rep, nil
}

// ingestEventOf is an SQS event as Lambda delivers it: records carrying
// arrays of one-URL items, one distinct host per URL, with the metadata
// each record has (about 0.6 KB) and URLs of a realistic length.
func ingestEventOf(hosts, records int) events.SQSEvent {
	var ev events.SQSEvent
	records = max(1, min(records, hosts))
	per := (hosts + records - 1) / records
	h := 0
	for r := range records {
		var items []map[string]string
		for i := 0; i < per && h < hosts; i++ {
			items = append(items, map[string]string{"url": fmt.Sprintf("http://h%06d.ingest.test/articles/2025/11/a-reasonably-long-slug-for-a-page-%06d.html", h, h)})
			h++
		}
		body, _ := json.Marshal(items)
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", r, r)
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: id, ReceiptHandle: "AQEB" + strings.Repeat(fmt.Sprintf("%08x", r), 40),
			Body: string(body), Md5OfBody: fmt.Sprintf("%032x", r),
			Attributes: map[string]string{
				"ApproximateReceiveCount": "1", "SentTimestamp": "1764500000000",
				"SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": "1764500000100",
			},
			MessageAttributes: map[string]events.SQSMessageAttribute{},
			EventSource:       "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:urldownloader-input",
			AWSRegion: "us-east-1",
		})
	}
	return ev
}

// slowSite serves every slow host (by name) from one listener: robots.txt
// 404 at once, every page PageBytes long, its first byte after FirstByte
// and its last at LastByte.
type slowSite struct {
	srv      *http.Server
	addr     netip.Addr
	port     int
	requests atomic.Int64
}

func startSlowSite(ip string, rc ResourcesConfig) (*slowSite, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	page := []byte(strings.Repeat("<p>slow page text</p>\n", rc.PageBytes/22+1)[:rc.PageBytes])
	const steps = 10
	s := &slowSite{addr: netip.MustParseAddr(ip), port: ln.Addr().(*net.TCPAddr).Port}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		wait := func(d time.Duration) bool {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return true
			case <-r.Context().Done():
				return false
			}
		}
		if !wait(rc.FirstByte) {
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		w.WriteHeader(http.StatusOK)
		chunk := (len(page) + steps - 1) / steps
		for i := 0; i < len(page); i += chunk {
			if i > 0 && !wait((rc.LastByte-rc.FirstByte)/(steps-1)) {
				return
			}
			_, _ = w.Write(page[i:min(i+chunk, len(page))])
			http.NewResponseController(w).Flush()
		}
	})}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *slowSite) Close() { _ = s.srv.Close() }

// hangSite accepts connections and never answers: it reads what it is sent
// and holds the connection until the client lets go.
type hangSite struct {
	ln       net.Listener
	addr     netip.Addr
	port     int
	accepted atomic.Int64
	mu       sync.Mutex
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

func startHangSite(ip string) (*hangSite, error) {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		return nil, err
	}
	s := &hangSite{ln: ln, addr: netip.MustParseAddr(ip), port: ln.Addr().(*net.TCPAddr).Port, conns: map[net.Conn]bool{}}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns[c] = true
			s.mu.Unlock()
			s.wg.Go(func() {
				_, _ = io.Copy(io.Discard, c)
				c.Close()
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
			})
		}
	})
	return s, nil
}

func (s *hangSite) Close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
