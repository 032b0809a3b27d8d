package main

// Local mode: the downloader on one machine (package standalone), the
// default backend of the runner. main.go's own flags (--urls, --out,
// --param, ...) are read from the flag set by name, so the moto backend's
// code needs no change beyond the dispatch.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/cli"
	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// DefaultState is where local mode keeps its state when --state is not
// given (git-ignored).
const DefaultState = ".state/run.db"

var (
	backendFlag = flag.String("backend", "local", "local, the only backend: one process on an embedded SQLite state (resumable); the emulated AWS stack is the developer command make emulated")
	stateFlag   = flag.String("state", "", "local backend: SQLite file keeping the queues, politeness state and input progress; the same file resumes a stopped run; without --urls or --listen, finish what it holds (default "+DefaultState+"; the demo site uses a fresh in-memory state)")
	bodiesFlag  = flag.String("bodies", "", "local backend: folder for bodies larger than InlineBodyBytes, content-addressed (default: 'bodies' beside the state file, .state/bodies)")
	retryFlag   = flag.Bool("retry-failed", false, "local backend: with the --state (and --out) of a job that ended with failures, and no --urls: queue the URLs whose results were failures again, as new inputs with new ids; each new result names the id it retries (retryOf), so both are kept by consumers that deduplicate by id")
	listenFlag  = flag.String("listen", "", "local backend: serve POST /urls on this address (e.g. 127.0.0.1:8080) and keep running until Ctrl-C")
)

// runBackend runs the backend --backend names: local mode, the only one the
// user command has. The emulated AWS stack is a developer's tool of the
// checkout (infra/cmd/emulated), so the command users install links no
// emulator; --backend moto says where it went.
func runBackend() int {
	switch *backendFlag {
	case "local":
		return runLocalMode()
	case "moto":
		fmt.Fprintln(os.Stderr, "urldownloader: the emulated AWS stack (--backend moto) is a developer command now: in a checkout, run make emulated ARGS='...' with the same flags (--endpoint, --faults, --fault-rate, --shards, --check-run, --timeout)")
		return cli.ExitUsage
	default:
		fmt.Fprintf(os.Stderr, "urldownloader: --backend %q: want local\n", *backendFlag)
		return cli.ExitUsage
	}
}

// sharedFlag returns the value of one of main.go's flags.
func sharedFlag(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

func sharedBool(name string) bool { return sharedFlag(name) == "true" }

func sharedInt(name string) int {
	var n int
	fmt.Sscan(sharedFlag(name), &n)
	return n
}

func sharedDuration(name string) time.Duration {
	d, _ := time.ParseDuration(sharedFlag(name))
	return d
}

func sharedParams() map[string]string {
	if f := flag.Lookup("param"); f != nil {
		if p, ok := f.Value.(cli.ParamFlags); ok {
			return maps.Clone(map[string]string(p))
		}
	}
	return map[string]string{}
}

func runLocalMode() int {
	urlsPath, outPath, listen := sharedFlag("urls"), sharedFlag("out"), *listenFlag
	// --state alone finishes what that state holds. The demo site listens
	// on new ports every run, so a demo cannot resume: it keeps its state
	// in memory.
	demo := urlsPath == "" && listen == "" && !cli.FlagSet("state") && !*retryFlag
	if *retryFlag && (urlsPath != "" || listen != "") {
		fmt.Fprintln(os.Stderr, "urldownloader: --retry-failed tries the failures of the job a --state holds: give that --state (and its --out), without --urls or --listen")
		return cli.ExitUsage
	}
	if sharedBool("demo-hostile") && !demo {
		fmt.Fprintln(os.Stderr, "urldownloader: --demo-hostile serves its own site; it does not go with --urls, --listen or --state")
		return 2
	}

	// Checked before anything is opened: a server other machines could
	// reach without a token does not start at all.
	var sopts localmode.ServeOptions
	if listen != "" {
		var err error
		if sopts, err = serveOptions(listen); err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader:", err)
			return 2
		}
	}

	logw := io.Discard
	if sharedBool("v") {
		logw = os.Stderr
	}
	log := slog.New(slog.NewJSONHandler(logw, nil))
	// The first Ctrl-C stops cleanly; after it, a second one kills.
	// SIGHUP (the terminal closed, an ssh session dropped) is the same
	// clean stop: its default would end the process with no summary and
	// no word on how to continue.
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stopSignals()
	go func() { <-sigCtx.Done(); stopSignals() }()
	ctx := sigCtx
	if cli.FlagSet("timeout") {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sharedDuration("timeout"))
		defer cancel()
	}

	params := sharedParams()
	opts := localmode.Options{
		Params: params, Addresses: cli.AddressPolicy(cli.AllowNet, *cli.AllowPrivate, demo), ShardCount: sharedInt("shards"), Log: log,
	}
	refusals := &refusalPrinter{w: os.Stderr, all: sharedBool("v")}
	opts.OnReject = refusals.print
	if cli.FlagSet("check-run") {
		opts.CheckRun = sharedDuration("check-run")
	}
	opts.DNSServers = dnsServerFlag
	// The functions' metrics, as on AWS, kept to be read back at the end.
	var emf metrics.Buffer
	opts.Metrics = metrics.New(&emf, "local", nil, map[string]string{"function": "local"})

	var input *localmode.Input
	var site *demosite.Site
	var hostile *demosite.HostileSite
	var tally *cli.HostileTally
	switch {
	case demo:
		var err error
		site, err = demosite.Start(demosite.Options{Hosts: sharedInt("demo-hosts")})
		if err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader:", err)
			return 1
		}
		defer site.Close()
		list := site.URLs(sharedInt("demo-pages"))
		if sharedBool("demo-skewed") {
			list = site.SkewedURLs(sharedInt("demo-pages"), 7)
		}
		if *cli.DemoLarge {
			list = append(list, cli.LargeURLs(site.Hosts())...)
			for name, v := range cli.LargeDefaults {
				if _, set := params[name]; !set {
					params[name] = v
				}
			}
		}
		hosts := site.Hosts()
		shown := strings.Join(hosts[:min(len(hosts), 4)], ", ")
		if len(hosts) > 4 {
			shown += fmt.Sprintf(" and %d more", len(hosts)-4)
		}
		fmt.Fprintf(os.Stderr, "urldownloader: demo site on %s: %d urls\n", shown, len(list))
		if sharedBool("demo-hostile") {
			hostile, err = demosite.StartHostile(demosite.HostileOptions{Pages: sharedInt("hostile-pages")})
			if err != nil {
				fmt.Fprintln(os.Stderr, "urldownloader:", err)
				return 1
			}
			defer hostile.Close()
			list = append(list, hostile.URLs()...)
			for name, v := range cli.HostileDefaults {
				if _, set := params[name]; !set {
					params[name] = v
				}
			}
			opts.Resolve = hostile.Resolve()
			fmt.Fprintf(os.Stderr, "urldownloader: hostile hosts under *.%s (names resolved from a fixed table, no DNS): %d urls; GiveUpAfter=%s FetchTimeout=%s\n",
				demosite.HostileDomain, len(hostile.URLs()), params["GiveUpAfter"], params["FetchTimeout"])
		}
		var b strings.Builder
		for _, u := range list {
			line, _ := json.Marshal(map[string]string{"url": u})
			b.Write(line)
			b.WriteByte('\n')
		}
		input = &localmode.Input{Name: "demo", R: strings.NewReader(b.String())}
	case urlsPath == "-":
		var err error
		if input, err = stdinInput(os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader: read stdin:", err)
			return 2
		}
	case urlsPath != "":
		f, err := os.Open(urlsPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader: open urls:", err)
			return 2
		}
		defer f.Close()
		abs, err := filepath.Abs(urlsPath)
		if err != nil {
			abs = urlsPath
		}
		input = &localmode.Input{Name: abs, R: f}
	}

	fresh := true
	if !demo {
		opts.State = *stateFlag
		if opts.State == "" {
			opts.State = DefaultState
		}
		// A zero-byte file holds no job: Open takes it as a new state.
		if fi, err := os.Stat(opts.State); err == nil && fi.Size() > 0 {
			fresh = false
		}
	}
	if *retryFlag && fresh {
		fmt.Fprintf(os.Stderr, "urldownloader: --retry-failed: %s holds no job: give the --state of the job whose failures to try again\n", opts.State)
		return cli.ExitUsage
	}
	// Open checks the state and the results file before it creates or
	// writes either (outfile.go).
	opts.OutPath, opts.Overwrite = outPath, *cli.Overwrite
	opts.Bodies = *bodiesFlag
	opts.Warc, opts.WarcMaxBytes = *warcFlag, *warcMaxBytesFlag
	if opts.Bodies == "" {
		state := opts.State
		if state == "" {
			state = DefaultState
		}
		opts.Bodies = filepath.Join(filepath.Dir(state), "bodies")
	}
	bodies := &cli.BodyTally{}
	denials := &cli.AddressDenials{}
	var outs *outcomes // set once the runtime is open, before any result
	opts.OnResult = func(r result.Result) {
		bodies.Add(r)
		denials.Add(r)
		outs.add(r)
		if hostile != nil {
			// tally is set once the runtime is open, before any result.
			tally.Add(r)
		}
	}

	rt, err := localmode.Open(ctx, opts)
	if err != nil && sigCtx.Err() != nil {
		// Ctrl-C while the state was being read: nothing was taken from
		// the input or the queues yet, so this is a clean stop like any
		// other, not a broken state.
		fmt.Fprintf(os.Stderr, "urldownloader: stopped while opening the state (%v); nothing was taken from the input or the queues: run the same command again to continue\n", err)
		return 130
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "urldownloader:", err)
		if localmode.IsDiskFault(err) {
			fmt.Fprintln(os.Stderr, "urldownloader: the disk under the state or --out is full, read-only or failing: free space (or fix it) and run the same command again")
			return cli.ExitDisk
		}
		cli.ExplainOpenError(os.Stderr, err)
		return openExit(err)
	}
	defer rt.Close()
	outs = newOutcomes(rt.QueueKey, rt.Params())
	printRecovery(os.Stderr, rt)
	if hostile != nil {
		tally = cli.NewHostileTally(hostile, rt.AcceptedAt)
	}
	switch {
	case demo:
		fmt.Fprintln(os.Stderr, "urldownloader: local mode, state in memory")
	case fresh:
		fmt.Fprintf(os.Stderr, "urldownloader: local mode, new state %s\n", opts.State)
	default:
		fmt.Fprintf(os.Stderr, "urldownloader: local mode, state %s: %d urls queued by an earlier run\n", opts.State, rt.Resumed)
		if rt.Resumed > 0 {
			fmt.Fprintln(os.Stderr, "urldownloader: hosts the earlier run stopped are due again at their staggered check, within 2 × CheckHostPeriod")
		}
	}
	if *retryFlag {
		var n int
		input, n, err = rt.RetryFailed(ctx, cli.IsFailure)
		switch {
		case err != nil:
			fmt.Fprintln(os.Stderr, "urldownloader: --retry-failed:", err)
			return cli.ExitFailed
		case n == 0 && rt.Resumed == 0:
			fmt.Fprintf(os.Stderr, "urldownloader: --retry-failed: nothing to retry: no url of the job in %s ended in failure (or every failure was retried already)\n", opts.State)
			return cli.ExitOK
		case n == 0:
			fmt.Fprintln(os.Stderr, "urldownloader: --retry-failed: no failure to retry yet; finishing the urls still queued")
		default:
			fmt.Fprintf(os.Stderr, "urldownloader: --retry-failed: %d failed urls queued again (%s), each result naming the id it retries (retryOf)\n", n, input.Name)
		}
	}
	fmt.Fprintf(os.Stderr, "urldownloader: up to %d hosts at once (%d connections, %.1f GiB for workers)\n",
		rt.HostsAtOnce(), rt.Budget().Conns, float64(rt.Budget().Memory)/(1<<30))

	// The server stops after Run, so the results of its last rounds are
	// kept for GET /urls/{id} while clients can still ask.
	stopServing := func() {}
	if listen != "" {
		srv, err := rt.Listen(sopts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "urldownloader:", err)
			return 2
		}
		stopServing = func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Close(sctx); err != nil {
				fmt.Fprintln(os.Stderr, "urldownloader: stop serving:", err)
			}
		}
		auth := ""
		if sopts.Token != "" {
			auth = " (with Authorization: Bearer <token>)"
		}
		fmt.Fprintf(os.Stderr, "urldownloader: accepting POST http://%s/urls%s until Ctrl-C; GET /urls/{id} for a result, GET /healthz\n", srv.Addr(), auth)
	}
	// A terminal gets a line redrawn in place (not under -v, whose logs
	// would break it); anything else a line every logEvery.
	stopProgress := startProgress(os.Stderr, rt, isTerminal(os.Stderr) && !sharedBool("v"))
	rep, runErr := rt.Run(ctx, localmode.RunOptions{Input: input, Serve: listen != ""})
	stopProgress()
	stopServing()

	refusals.printMore()
	printLocalSummary(os.Stderr, rep, outs, rt.HostDelay, rt.ServerOf, sharedBool("v"))
	denials.Print(os.Stderr)
	bodies.Print(os.Stderr, opts.Bodies)
	printWarc(os.Stderr, rt.WarcFiles())
	if err := printMetrics(os.Stderr, emf.Bytes(), sharedBool("v")); err != nil {
		fmt.Fprintln(os.Stderr, "urldownloader:", err)
	}
	if site != nil {
		reqs := site.Requests()
		if hostile != nil {
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
	rejected := rep.Input.Rejected + rep.Input.SkippedRejected
	var fault *localmode.DiskFaultError
	switch {
	case errors.As(runErr, &fault):
		cli.ExplainDiskFault(os.Stderr, fault, rep, opts.State)
		return cli.ExitDisk
	case runErr != nil:
		if nt := (*localmode.NotTextError)(nil); errors.As(runErr, &nt) {
			fmt.Fprintf(os.Stderr, "urldownloader: --urls %s is not UTF-8 text: it looks like %s; nothing of it was read\n", listName(urlsPath), nt.Looks())
			fmt.Fprintln(os.Stderr, "urldownloader:", notTextHint(nt.Kind, urlsPath))
			return cli.ExitUsage
		}
		fmt.Fprintln(os.Stderr, "urldownloader:", runErr)
		if errors.As(runErr, new(*localmode.StateDamagedError)) {
			cli.ExplainOpenError(os.Stderr, runErr)
			return cli.ExitState
		}
		if errors.Is(runErr, localmode.ErrInputChanged) {
			fmt.Fprintln(os.Stderr, "urldownloader: use a new --state for a new input")
			return 2
		}
		return 1
	case rep.Stopped:
		ids := slices.Sorted(maps.Keys(rep.Missing))
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		if timedOut || demo {
			for _, id := range ids[:min(len(ids), 20)] {
				fmt.Fprintf(os.Stderr, "urldownloader: no result yet: %s %s\n", id, rep.Missing[id])
			}
			if rep.MissingCount > 20 {
				fmt.Fprintf(os.Stderr, "urldownloader: ... and %d more\n", rep.MissingCount-20)
			}
		}
		if demo {
			fmt.Fprintf(os.Stderr, "urldownloader: stopped with %d urls without a result\n", rep.MissingCount)
		} else {
			fmt.Fprintf(os.Stderr, "urldownloader: stopped; %d urls are still queued in %s: run the same command again to continue\n", rep.MissingCount, opts.State)
		}
		if timedOut {
			return 1
		}
		return 130
	case rep.Expected == 0 && rep.Input.Skipped > 0 && rep.Input.Lines == 0:
		fmt.Fprintln(os.Stderr, "urldownloader: nothing to do: this state already read the whole input and every url has its result (use a new --state to download again)")
		if rejected > 0 {
			return 1
		}
	case rejected > 0:
		fmt.Fprintf(os.Stderr, "urldownloader: %d input lines were not accepted\n", rejected)
		return 1
	}
	if hostile != nil {
		// The hostile hosts' failures are the demo's point: it fails when
		// one ended otherwise than its kind says (see UNEXPECTED above).
		if tally.Unexpected() > 0 {
			return cli.ExitFailed
		}
		return cli.ExitOK
	}
	if n := outs.failed(); n > 0 {
		fmt.Fprintf(os.Stderr, "urldownloader: %d urls failed (exit 1): see above\n", n)
		if !demo && rt.OutFile().Path != "" {
			// The advice above may be a flag to change: a retry takes
			// the flags of its own command line.
			fmt.Fprintf(os.Stderr, "urldownloader: to try the failed urls again (after the change advised, if any): urldownloader --state %s --out %s --retry-failed\n", opts.State, outPath)
		}
		return cli.ExitFailed
	}
	return cli.ExitOK
}

// stdinInput names standard input by its first line: piping the same list
// again resumes it, a list that starts differently is a new input.
func stdinInput(r io.Reader) (*localmode.Input, error) {
	br := bufio.NewReader(r)
	first, err := br.ReadBytes('\n')
	if err != nil && err != io.EOF {
		return nil, err
	}
	sum := sha256.Sum256(first)
	return &localmode.Input{Name: "stdin/" + hex.EncodeToString(sum[:8]), R: io.MultiReader(bytes.NewReader(first), br)}, nil
}

// openExit is the exit code for an error of localmode.Open: a damaged
// state is not a usage error (the command was right, the file is not).
func openExit(err error) int {
	if errors.As(err, new(*localmode.StateDamagedError)) {
		return cli.ExitState
	}
	return cli.ExitUsage
}
