// Command urldownloader downloads a list of URLs politely on one machine:
// local mode (localmode.go) on an embedded SQLite state, with no AWS
// account; send and receive talk to a deployed stack. The emulated AWS
// stack is a developer's command of its own (infra/cmd/emulated).
// Without --urls it serves a small demo site on loopback hosts and
// downloads it. --help lists the flags by mode, the parameters and the exit
// codes (usage.go). See docs/local-mode.md.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/urldownloader/urldownloader/shared/aws/remote"
	"github.com/urldownloader/urldownloader/shared/runtime/cli"
)

func main() {
	// send and receive talk to a deployed stack (package remote), with
	// flags of their own.
	if len(os.Args) > 1 && (os.Args[1] == "send" || os.Args[1] == "receive") {
		os.Exit(remote.Main(os.Args[1:]))
	}
	if os.Getenv("GOGC") == "" {
		// The heap of a large job is mostly short-lived (responses,
		// results on their way out), so collecting more often than Go's
		// default lowers the peak within the CPU target and shrinks the
		// stacks of workers sleeping between requests (docs/benchmarks.md,
		// section 1). GOGC in the environment still decides.
		debug.SetGCPercent(localGCPercent)
	}
	os.Exit(cli.Profiled(run))
}

// localGCPercent is the runner's GOGC when the environment sets none.
const localGCPercent = 50

func run() int {
	params := cli.ParamFlags{}
	flag.String("urls", "", "JSON lines of {\"host\",\"url\"} or bare URLs, one per line; - is stdin (default: the built-in demo site)")
	flag.String("out", "", "write results as JSON lines to this file (default stdout)")
	flag.Var(params, "param", "runtime parameter Name=Value, repeatable (e.g. --param FetchDelay=200ms)")
	flag.Duration("timeout", 0, "give up after this long, print what is missing and exit 1")
	flag.Int("shards", 0, "check loops, 1 to 16")
	flag.Duration("check-run", 0, "how long each check invocation keeps starting requests")
	flag.Int("demo-hosts", 3, "demo site: loopback hosts to serve")
	flag.Int("demo-pages", 4, "demo site: pages per host")
	flag.Bool("demo-skewed", false, "demo site: skewed, shuffled workload (3 hosts with --demo-pages pages, 7 with a quarter, the rest 1 or 2)")
	flag.Bool("demo-hostile", false, "demo site: add hostile hosts (refused, hanging, dripping, resetting, robots.txt 503/429/600 KiB, a redirect loop, a Retry-After beyond GiveUpAfter, a name that does not resolve) and show how each ended; sets GiveUpAfter=20s FetchTimeout=2s MaxBackoff=4s CheckHostPeriod=2s unless given")
	flag.Int("hostile-pages", 3, "with --demo-hostile: URLs per hostile host")
	flag.Bool("v", false, "log the functions' JSON logs to stderr")
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
	// --backend local (the default) runs on one machine: localmode.go.
	return runBackend()
}
