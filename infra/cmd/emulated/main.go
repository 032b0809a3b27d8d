// Command emulated runs a job on the emulated AWS stack: moto with the
// template's resources, the real ingest and check handlers driven as AWS
// drives them (infra/emulated), optionally under injected faults. It is the
// developer's rig (`make emulated ARGS='...'`), with the flags the user
// command's --backend moto had; the command users install
// (cmd/urldownloader) links no emulator.
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
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/infra/faults"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/cli"
)

func main() {
	os.Exit(cli.Profiled(run))
}

func run() int {
	params := cli.ParamFlags{}
	urlsPath := flag.String("urls", "", "JSON lines of {\"host\",\"url\"} or bare URLs, one per line; - is stdin (default: the built-in demo site)")
	outPath := flag.String("out", "", "write results as JSON lines to this file (default stdout)")
	flag.Var(params, "param", "runtime parameter Name=Value, repeatable (e.g. --param FetchDelay=200ms)")
	timeout := flag.Duration("timeout", 0, "give up after this long, print what is missing and exit 1 (0: "+cli.ShortDuration(motoTimeout)+")")
	shards := flag.Int("shards", 0, "the template's ShardCount, 1 to 16 (default: the template's)")
	checkRun := flag.Duration("check-run", 0, "how long each check invocation keeps starting requests (0: "+cli.ShortDuration(motoCheckRun)+"; "+cli.ShortDuration(faultCheckRun)+" with --faults)")
	endpoint := flag.String("endpoint", "", "use a running moto at this URL instead of starting one")
	demoHosts := flag.Int("demo-hosts", 3, "demo site: loopback hosts to serve")
	demoPages := flag.Int("demo-pages", 4, "demo site: pages per host")
	demoSkewed := flag.Bool("demo-skewed", false, "demo site: skewed, shuffled workload (3 hosts with --demo-pages pages, 7 with a quarter, the rest 1 or 2)")
	demoHostile := flag.Bool("demo-hostile", false, "demo site: add hostile hosts (refused, hanging, dripping, resetting, robots.txt 503/429/600 KiB, a redirect loop, a Retry-After beyond GiveUpAfter, a name that does not resolve) and show how each ended; sets GiveUpAfter=20s FetchTimeout=2s MaxBackoff=4s CheckHostPeriod=2s unless given")
	hostilePages := flag.Int("hostile-pages", 3, "with --demo-hostile: URLs per hostile host")
	faultSeed := flag.Int64("faults", 0, "make the run hostile, reproducibly from this seed (0: no faults): killed invocations, DynamoDB throttling/5xx/conflicts, SQS partial failures, duplicated schedules, redelivered input")
	faultRate := flag.Float64("fault-rate", 0.05, "with --faults: probability of each kind of fault at each opportunity")
	verbose := flag.Bool("v", false, "log the functions' JSON logs to stderr")
	hostRules := flag.String("host-rules", "", "per-host rules: a file holding the HostRules parameter's JSON list (see docs/politeness.md, Per-host rules)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "urldownloader: unexpected arguments %q\n", flag.Args())
		return 2
	}
	if err := cli.ApplyHostRulesFile(params, *hostRules); err != nil {
		fmt.Fprintln(os.Stderr, "urldownloader:", err)
		return 2
	}
	if motoMissing(*endpoint) {
		return cli.ExitUsage
	}
	applyMotoDefaults(timeout, checkRun)

	logw := io.Discard
	if *verbose {
		logw = os.Stderr
	}
	log := slog.New(slog.NewJSONHandler(logw, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
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
		if *cli.DemoLarge {
			list = append(list, cli.LargeURLs(site.Hosts())...)
			for name, v := range cli.LargeDefaults {
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
			for name, v := range cli.HostileDefaults {
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
		f, err := cli.CreateOut(*outPath) // outfile.go: never empties results unasked
		if err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader:", err)
			cli.ExplainOpenError(os.Stderr, err)
			return 2
		}
		defer f.Close()
		out = f
	}
	w := bufio.NewWriter(out)
	defer w.Flush()

	var inj *faults.Injector
	if *faultSeed != 0 {
		if !cli.FlagSet("check-run") {
			*checkRun = 0 // the fault run's own default
		}
		inj = faults.New(*faultSeed, *faultRate)
		fmt.Fprintf(os.Stderr, "urldownloader: %s\n", inj)
	}
	opts := emulated.Options{
		ShardCount: *shards, Params: params, Addresses: cli.AddressPolicy(cli.AllowNet, *cli.AllowPrivate, site != nil), CheckRun: *checkRun,
		Endpoint: *endpoint, Log: log, Faults: inj,
	}
	if hostile != nil {
		opts.Resolve = hostile.Resolve()
	}
	p, err := emulated.Start(ctx, opts)
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

	var tally *cli.HostileTally
	healthyURLs, healthyOK := 0, 0
	if hostile != nil {
		tally = cli.NewHostileTally(hostile, p.AcceptedAt)
		healthyURLs = len(items) - len(hostile.URLs())
	}
	bodies := &cli.BodyTally{}
	failed := newFailures()
	denials := &cli.AddressDenials{}
	report, runErr := p.Run(ctx, sent.Expected, func(r result.Result, line []byte) {
		w.Write(line)
		w.WriteByte('\n')
		bodies.Add(r)
		denials.Add(r)
		failed.add(r)
		if tally == nil {
			return
		}
		tally.Add(r)
		path := strings.TrimPrefix(r.URL, "http://"+r.Host)
		if _, bad := hostile.ByHost(r.Host); !bad && r.Status == result.StatusFetched && r.Data == demosite.Body(r.Host, path) {
			healthyOK++
		}
	})
	w.Flush()
	printSummary(report)
	denials.Print(os.Stderr)
	bodies.Print(os.Stderr, "s3://"+p.Stack.BodyBucket)
	if inj != nil {
		fmt.Fprintf(os.Stderr, "urldownloader: %s\n", inj.Summary())
	}
	if site != nil {
		reqs := site.Requests()
		if hostile != nil {
			fmt.Fprintf(os.Stderr, "urldownloader: healthy demo hosts: %d of %d urls fetched with their page\n", healthyOK, healthyURLs)
			tally.Print(os.Stderr)
			if n := tally.Unexpected(); n > 0 {
				fmt.Fprintf(os.Stderr, "urldownloader: %d hostile results did not end as their host's kind says (see UNEXPECTED above)\n", n)
			}
			reqs = append(reqs, hostile.Requests()...)
		}
		gap, host := demosite.MinGap(reqs)
		fmt.Fprintf(os.Stderr, "urldownloader: demo site saw %d requests; smallest gap between two requests to one host: %s (%s)\n",
			len(reqs), gap.Round(time.Millisecond), host)
	}
	if runErr != nil {
		for _, m := range emulated.Missing(sent.Expected, report.Missing) {
			fmt.Fprintf(os.Stderr, "urldownloader: missing result: %s %s\n", m.ID, m.URL)
		}
		fmt.Fprintln(os.Stderr, "urldownloader:", runErr)
		if errors.Is(ctx.Err(), context.Canceled) {
			return cli.ExitInterrupted
		}
		return 1
	}
	failed.print(os.Stderr)
	if len(sent.Rejected) > 0 {
		fmt.Fprintf(os.Stderr, "urldownloader: %d input lines were not sent (exit 1): see \"not sent\" above\n", len(sent.Rejected))
	}
	if len(sent.Rejected) > 0 || failed.count() > 0 {
		return 1
	}
	return 0
}

func printSummary(r emulated.Report) {
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
