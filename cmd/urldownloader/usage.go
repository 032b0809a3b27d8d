package main

// --help: the flags by the mode they serve, each mode's own defaults, every
// runtime parameter with its default (from shared/domain/params' table), and the
// exit codes.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/cli"
	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// modeDefaults are the defaults --help shows, by mode, for the flags whose
// default depends on it.
var modeDefaults = map[string]map[string]string{
	"local": {
		"timeout":   "none: run until every URL has its result",
		"check-run": cli.ShortDuration(localmode.DefaultCheckRun),
		"shards":    fmt.Sprint(localmode.DefaultShardCount),
	},
}

// flagGroups order the flags in --help. A flag in no group (added later)
// is listed under "Other flags", so none is ever left out.
var flagGroups = []struct {
	title, mode string
	names       []string
}{
	{"Input and output (every mode)", "", []string{"urls", "out", "overwrite", "param", "host-rules", "allow-net", "allow-private", "v"}},
	{"Local mode (--backend local, the default): one process, state in a SQLite file", "local",
		[]string{"backend", "state", "retry-failed", "listen", "token", "allowed-host", "bodies", "warc", "warc-max-bytes", "timeout", "check-run", "shards", "dns-server"}},
	{"Demo site (without --urls)", "", []string{"demo-hosts", "demo-pages", "demo-skewed", "demo-large", "demo-hostile", "hostile-pages"}},
}

// argNames name the value each flag takes in --help.
var argNames = map[string]string{
	"urls": "FILE", "out": "FILE", "state": "FILE", "bodies": "DIR", "warc": "FILE", "warc-max-bytes": "N", "listen": "ADDR", "param": "Name=Value", "host-rules": "FILE",
	"timeout": "DURATION", "check-run": "DURATION", "shards": "N",
	"allow-net": "CIDR[:PORT[-PORT]][,...]", "allowed-host": "NAME[:PORT]", "dns-server": "IP[:PORT]", "token": "TOKEN", "demo-hosts": "N", "demo-pages": "N", "hostile-pages": "N", "backend": "local",
}

// The flag package calls Usage for -h and for a bad flag: the whole text
// (to stdout) only when help was asked for, else a pointer to it (after
// the flag package's own error, on stderr; exit 2).
func init() {
	flag.Usage = func() {
		if helpAsked(os.Args[1:]) {
			usage(os.Stdout)
			return
		}
		fmt.Fprintln(flag.CommandLine.Output(), "run 'urldownloader --help' for the flags, the parameters and the exit codes")
	}
}

func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "--h":
			return true
		}
	}
	return false
}

func usage(w io.Writer) {
	name := "urldownloader"
	fmt.Fprintf(w, `%s: download URLs politely (robots.txt, one request per host at a time, FetchDelay or Crawl-delay apart).
Results go to --out (or stdout) as JSON lines; everything else goes to stderr.

Usage:
  %[1]s                               download the built-in demo site (state in memory)
  %[1]s --urls FILE --out FILE        a job: resumable, state in %s (run it again after Ctrl-C)
  %[1]s --state FILE --out FILE --retry-failed  try the failed URLs of that job again
  %[1]s --listen 127.0.0.1:8080       serve POST /urls until Ctrl-C
  %[1]s send --stack NAME --urls FILE  put a list on a deployed stack's input queue (send --help)
  %[1]s receive --stack NAME --out FILE  write a deployed stack's results (receive --help)
`, name, DefaultState)
	listed := map[string]bool{}
	for _, g := range flagGroups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, n := range g.names {
			f := flag.Lookup(n)
			if f == nil {
				continue
			}
			listed[n] = true
			printFlag(w, f, g.mode)
		}
	}
	var other []*flag.Flag
	flag.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] {
			other = append(other, f)
		}
	})
	if len(other) > 0 {
		fmt.Fprintf(w, "\nOther flags:\n")
		for _, f := range other {
			printFlag(w, f, "")
		}
	}
	printParams(w)
	fmt.Fprintf(w, `
Exit codes:
  %d    every URL ended fetched, not_modified or redirect, or denied by its site's robots.txt
  %d    some ended %s (other than by robots.txt), input lines were rejected, --timeout passed, or the run failed (the summary says which and what to change)
  %d    usage error: a bad flag or argument, an input that changed under its --state or is not UTF-8 text (gzip, UTF-16), or a needed tool is missing
  %d    disk fault: the disk under --out, --bodies, --warc or --state is full, read-only or failing; free space (or fix it) and run the same command again: nothing was lost
  %d    the --state file is not a urldownloader state, or is damaged (cut short, corrupted): move it away to start a new job, or give another --state
  %d  interrupted (Ctrl-C, SIGTERM, SIGHUP: a closed terminal): run the same command again to continue
`, cli.ExitOK, cli.ExitFailed, strings.Join(statusNames(cli.FailedStatuses), ", "), cli.ExitUsage, cli.ExitDisk, cli.ExitState, cli.ExitInterrupted)
}

// printFlag writes one flag as flag.PrintDefaults does, with the default of
// mode when it has its own.
func printFlag(w io.Writer, f *flag.Flag, mode string) {
	typ, text := flag.UnquoteUsage(f)
	if n, ok := argNames[f.Name]; ok {
		typ = n
	}
	dashes := "--"
	if len(f.Name) == 1 {
		dashes = "-"
	}
	fmt.Fprintf(w, "  %s%s", dashes, f.Name)
	if typ != "" {
		fmt.Fprintf(w, " %s", typ)
	}
	fmt.Fprintf(w, "\n    \t%s", strings.ReplaceAll(text, "\n", "\n    \t"))
	def := f.DefValue
	if d, ok := modeDefaults[mode][f.Name]; ok {
		def = d
	} else if _, perMode := modeDefaults["local"][f.Name]; perMode {
		def = "" // the mode sections give it
	}
	switch def {
	case "", "0", "0s", "false", "map[]":
	default:
		fmt.Fprintf(w, " (default %s)", def)
	}
	fmt.Fprintln(w)
}

// printParams lists every runtime parameter with its default, from the
// parameter table itself.
func printParams(w io.Writer) {
	fmt.Fprintf(w, "\nParameters (--param Name=Value, repeatable; the same in every mode; see docs/parameters.md):\n")
	defaults := params.Defaults().Format()
	names := params.Names()
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "  %-*s  %s\n", width, n, defaults[n])
	}
	fmt.Fprintf(w, "  (--demo-hostile and --demo-large set a few of these for their run unless given)\n")
}

func statusNames(ss []result.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
