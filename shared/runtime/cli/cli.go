// Package cli holds what the user command (cmd/urldownloader) and the
// developer's emulated-stack command (infra/cmd/emulated) share: the flags
// both take (--param, --host-rules, --allow-net, --allow-private, the demo
// site's), the results file's opening, how a result counts toward the exit
// code, and the exit codes themselves.
package cli

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// ParamFlags is --param Name=Value, repeatable.
type ParamFlags map[string]string

func (p ParamFlags) String() string { return fmt.Sprint(map[string]string(p)) }
func (p ParamFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want Name=Value, got %q", v)
	}
	p[name] = value
	return nil
}

// The exit codes, as --help and docs/local-mode.md list them.
const (
	ExitOK          = 0   // no URL failed (IsFailure)
	ExitFailed      = 1   // some URLs failed, or lines were rejected, or the run failed
	ExitUsage       = 2   // a bad flag or argument, a changed input, or a missing tool
	ExitDisk        = 3   // a full, read-only or failing disk under --out, --bodies, --warc or --state
	ExitState       = 4   // the state file is not a urldownloader state, or is damaged
	ExitInterrupted = 130 // Ctrl-C, SIGTERM or SIGHUP: run the same command again to continue
)

// FailedStatuses are the endings where the URL's content was not
// obtained. A redirect is a success: its target, on another host, has a
// result of its own (or is not followed, by choice).
var FailedStatuses = []result.Status{result.StatusFetchError, result.StatusDenied, result.StatusDropped}

// RobotsDisallowed is how the engine words a URL its site's robots.txt
// forbids (shared/engine's robotsVerdict).
const RobotsDisallowed = "disallowed by robots.txt"

// IsFailure reports whether a result makes the exit code 1: it ended in
// FailedStatuses, except when the site's robots.txt forbids the URL, which
// is the polite ending the site asked for and nothing to change here
// (wget's robots skips do not fail it either). Denied by the address
// policy, by a Crawl-delay above MaxCrawlDelay or an unreadable robots.txt
// are failures: a flag or a later run changes them.
func IsFailure(r result.Result) bool {
	if !slices.Contains(FailedStatuses, r.Status) {
		return false
	}
	return r.Status != result.StatusDenied || !strings.Contains(r.Error, RobotsDisallowed)
}

// FlagSet reports whether the command line set the named flag.
func FlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// ShortDuration writes d as a person would: 10m, not 10m0s.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
