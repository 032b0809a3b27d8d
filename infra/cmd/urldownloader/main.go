// Command urldownloader downloads a list of URLs politely on one machine:
// local mode (localmode.go, the default) on an embedded SQLite state, or
// with --backend moto on the emulated AWS stack (moto, the template's
// resources, the real handlers), with no AWS account and no Docker.
// Without --urls it serves a small demo site on loopback hosts and
// downloads it. --help lists the flags by mode, the parameters and the exit
// codes (usage.go). See the README's "Local mode".
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/infra/faults"
	"github.com/urldownloader/urldownloader/infra/local"
	"github.com/urldownloader/urldownloader/infra/remote"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/result"
	"github.com/urldownloader/urldownloader/shared/urlmsg"
)

type paramFlags map[string]string

func (p paramFlags) String() string { return fmt.Sprint(map[string]string(p)) }
func (p paramFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want Name=Value, got %q", v)
	}
	p[name] = value
	return nil
}

func main() {
	// send and receive talk to a deployed stack (package remote), with
	// flags of their own.
	if len(os.Args) > 1 && (os.Args[1] == "send" || os.Args[1] == "receive") {
		os.Exit(remote.Main(os.Args[1:]))
	}
	if os.Getenv("GOGC") == "" {
		// The heap of a large job is mostly short-lived (responses,
		// results on their way out): collecting at 75% growth instead of
		// Go's 100% held the 10,000-host row at 408 MiB against 541-646
		// MiB. With every host at once (plain HTTP on the fetcher's own
		// connections, the admission's slow start), 50% held it at
		// 459-468 MiB against 531 MiB at 75%, within the CPU target
		// (docs/benchmarks.md, section 1); collecting more often also
		// shrinks the stacks of workers sleeping between requests.
		// GOGC in the environment still decides.
		debug.SetGCPercent(localGCPercent)
	}
	os.Exit(profiled(run))
}

// localGCPercent is the runner's GOGC when the environment sets none.
const localGCPercent = 50

func run() int {
	params := paramFlags{}
	urlsPath := flag.String("urls", "", "JSON lines of {\"host\",\"url\"} or bare URLs, one per line; - is stdin (default: the built-in demo site)")
	outPath := flag.String("out", "", "write results as JSON lines to this file (default stdout)")
	flag.Var(params, "param", "runtime parameter Name=Value, repeatable (e.g. --param FetchDelay=200ms)")
	timeout := flag.Duration("timeout", 0, "give up after this long, print what is missing and exit 1")
	shards := flag.Int("shards", 0, "check loops (local) or the template's ShardCount (moto), 1 to 16")
	checkRun := flag.Duration("check-run", 0, "how long each check invocation keeps starting requests")
	endpoint := flag.String("endpoint", "", "use a running moto at this URL instead of starting one")
	demoHosts := flag.Int("demo-hosts", 3, "demo site: loopback hosts to serve")
	demoPages := flag.Int("demo-pages", 4, "demo site: pages per host")
	demoSkewed := flag.Bool("demo-skewed", false, "demo site: skewed, shuffled workload (3 hosts with --demo-pages pages, 7 with a quarter, the rest 1 or 2)")
	demoHostile := flag.Bool("demo-hostile", false, "demo site: add hostile hosts (refused, hanging, dripping, resetting, robots.txt 503/429/600 KiB, a redirect loop, a Retry-After beyond GiveUpAfter, a name that does not resolve) and show how each ended; sets GiveUpAfter=20s FetchTimeout=2s MaxBackoff=4s CheckHostPeriod=2s unless given")
	hostilePages := flag.Int("hostile-pages", 3, "with --demo-hostile: URLs per hostile host")
	faultSeed := flag.Int64("faults", 0, "make the run hostile, reproducibly from this seed (0: no faults): killed invocations, DynamoDB throttling/5xx/conflicts, SQS partial failures, duplicated schedules, redelivered input")
	faultRate := flag.Float64("fault-rate", 0.05, "with --faults: probability of each kind of fault at each opportunity")
	verbose := flag.Bool("v", false, "log the functions' JSON logs to stderr")
	hostRules := flag.String("host-rules", "", "per-host rules: a file holding the HostRules parameter's JSON list (see README, Per-host rules)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "urldownloader: unexpected arguments %q\n", flag.Args())
		return 2
	}
	if err := applyHostRulesFile(params, *hostRules); err != nil {
		fmt.Fprintln(os.Stderr, "urldownloader:", err)
		return 2
	}
	// --backend local (the default) runs on one machine: localmode.go.
	if code, handled := runBackend(); handled {
		return code
	}
	applyMotoDefaults(timeout, checkRun)

	logw := io.Discard
	if *verbose {
		logw = os.Stderr
	}
	log := slog.New(slog.NewJSONHandler(logw, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	if *demoHostile && *urlsPath != "" {
		fmt.Fprintln(os.Stderr, "urldownloader: --demo-hostile serves its own site; it does not go with --urls")
		return 2
	}

	var items []urlmsg.Input
	var site *demosite.Site
	var hostile *demosite.HostileSite
	if *urlsPath == "" {
		var err error
		site, err = demosite.Start(demosite.Options{Hosts: *demoHosts})
		if err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader:", err)
			return 1
		}
		defer site.Close()
		list := site.URLs(*demoPages)
		if *demoSkewed {
			list = site.SkewedURLs(*demoPages, 7)
		}
		if *demoLargeFlag {
			list = append(list, largeURLs(site.Hosts())...)
			for name, v := range largeDefaults {
				if _, set := params[name]; !set {
					params[name] = v
				}
			}
		}
		for _, u := range list {
			items = append(items, urlmsg.Input{URL: u})
		}
		hosts := site.Hosts()
		shown := strings.Join(hosts[:min(len(hosts), 4)], ", ")
		if len(hosts) > 4 {
			shown += fmt.Sprintf(" and %d more", len(hosts)-4)
		}
		fmt.Fprintf(os.Stderr, "urldownloader: demo site on %s: %d urls\n", shown, len(items))
		if *demoHostile {
			hostile, err = demosite.StartHostile(demosite.HostileOptions{Pages: *hostilePages})
			if err != nil {
				fmt.Fprintln(os.Stderr, "urldownloader:", err)
				return 1
			}
			defer hostile.Close()
			n := 0
			for _, u := range hostile.URLs() {
				items = append(items, urlmsg.Input{URL: u})
				n++
			}
			for name, v := range hostileDefaults {
				if _, set := params[name]; !set {
					params[name] = v
				}
			}
			fmt.Fprintf(os.Stderr, "urldownloader: hostile hosts under *.%s (names resolved from a fixed table, no DNS): %d urls; GiveUpAfter=%s FetchTimeout=%s\n",
				demosite.HostileDomain, n, params["GiveUpAfter"], params["FetchTimeout"])
		}
	} else {
		var err error
		items, err = readURLs(*urlsPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader:", err)
			return 2
		}
	}

	out := io.Writer(os.Stdout)
	if *outPath != "" {
		f, err := createOut(*outPath) // outfile.go: never empties results unasked
		if err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader:", err)
			explainOpenError(os.Stderr, err)
			return 2
		}
		defer f.Close()
		out = f
	}
	w := bufio.NewWriter(out)
	defer w.Flush()

	var inj *faults.Injector
	if *faultSeed != 0 {
		if !flagSet("check-run") {
			*checkRun = 0 // the fault run's own default
		}
		inj = faults.New(*faultSeed, *faultRate)
		fmt.Fprintf(os.Stderr, "urldownloader: %s\n", inj)
	}
	opts := local.Options{
		ShardCount: *shards, Params: params, Addresses: addressPolicy(allowNetFlag, *allowPrivateFlag, site != nil), CheckRun: *checkRun,
		Endpoint: *endpoint, Log: log, Faults: inj,
	}
	if hostile != nil {
		opts.Resolve = hostile.Resolve()
	}
	p, err := local.Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "urldownloader:", err)
		return 1
	}
	defer p.Close()

	sent, err := p.Send(ctx, items)
	if err != nil {
		fmt.Fprintln(os.Stderr, "urldownloader:", err)
		return 1
	}
	for _, r := range sent.Rejected {
		fmt.Fprintf(os.Stderr, "urldownloader: line %d not sent: %s\n", r.Index+1, r.Error)
	}
	fmt.Fprintf(os.Stderr, "urldownloader: sent %d urls (%d rejected) to %s\n", len(sent.Expected), len(sent.Rejected), p.Stack.InputQueueURL)

	var tally *hostileTally
	healthyURLs, healthyOK := 0, 0
	if hostile != nil {
		tally = newHostileTally(hostile, p.AcceptedAt)
		healthyURLs = len(items) - len(hostile.URLs())
	}
	bodies := &bodyTally{}
	var failed atomic.Int64
	denials := &addressDenials{}
	report, runErr := p.Run(ctx, sent.Expected, func(r result.Result, line []byte) {
		w.Write(line)
		w.WriteByte('\n')
		bodies.add(r)
		denials.add(r)
		if isFailure(r) {
			failed.Add(1)
		}
		if tally == nil {
			return
		}
		tally.add(r)
		path := strings.TrimPrefix(r.URL, "http://"+r.Host)
		if _, bad := hostile.ByHost(r.Host); !bad && r.Status == result.StatusFetched && r.Data == demosite.Body(r.Host, path) {
			healthyOK++
		}
	})
	w.Flush()
	printSummary(report)
	denials.print(os.Stderr)
	bodies.print(os.Stderr, "s3://"+p.Stack.BodyBucket)
	if inj != nil {
		fmt.Fprintf(os.Stderr, "urldownloader: %s\n", inj.Summary())
	}
	if site != nil {
		reqs := site.Requests()
		if hostile != nil {
			fmt.Fprintf(os.Stderr, "urldownloader: healthy demo hosts: %d of %d urls fetched with their page\n", healthyOK, healthyURLs)
			tally.print(os.Stderr)
			if n := tally.unexpected(); n > 0 {
				fmt.Fprintf(os.Stderr, "urldownloader: %d hostile results did not end as their host's kind says (see UNEXPECTED above)\n", n)
			}
			reqs = append(reqs, hostile.Requests()...)
		}
		gap, host := demosite.MinGap(reqs)
		fmt.Fprintf(os.Stderr, "urldownloader: demo site saw %d requests; smallest gap between two requests to one host: %s (%s)\n",
			len(reqs), gap.Round(time.Millisecond), host)
	}
	if runErr != nil {
		for _, m := range local.Missing(sent.Expected, report.Missing) {
			fmt.Fprintf(os.Stderr, "urldownloader: missing result: %s %s\n", m.ID, m.URL)
		}
		fmt.Fprintln(os.Stderr, "urldownloader:", runErr)
		if errors.Is(ctx.Err(), context.Canceled) {
			return exitInterrupted
		}
		return 1
	}
	if len(sent.Rejected) > 0 || failed.Load() > 0 {
		return 1
	}
	return 0
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func printSummary(r local.Report) {
	var parts []string
	keys := make([]string, 0, len(r.ByStatus))
	for s := range r.ByStatus {
		keys = append(keys, string(s))
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, r.ByStatus[result.Status(k)]))
	}
	dupPct := 0.0
	if r.Expected > 0 {
		dupPct = 100 * float64(r.Duplicates) / float64(r.Expected)
	}
	fmt.Fprintf(os.Stderr, "urldownloader: summary: expected=%d results=%d %s duplicates=%d (%.1f%%) missing=%d elapsed=%s ingestInvocations=%d checkInvocations=%d failedRecords=%d\n",
		r.Expected, r.Results, strings.Join(parts, " "), r.Duplicates, dupPct, len(r.Missing), r.Elapsed.Round(time.Millisecond),
		r.IngestInvocations, r.CheckInvocations, r.FailedRecords)
}

// readURLs reads JSON lines of {"host","url",...} or bare URLs.
func readURLs(path string) ([]urlmsg.Input, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open urls: %w", err)
		}
		defer f.Close()
		r = f
	}
	var items []urlmsg.Input
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var in urlmsg.Input
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &in); err != nil {
				return nil, fmt.Errorf("%s line %d: not a JSON object: %w", path, n, err)
			}
		} else {
			in.URL = line
		}
		items = append(items, in)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return items, nil
}
