package main

// The end of a local run, for people: counts by status, the time against
// the job's politeness bound, and for each kind of failure how many, an
// example and what to change.

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/cli"
	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// cause is one kind of failure: which results it takes, how to say it, and
// what to change (from the parameters in force; "" when nothing here can
// change it).
type cause struct {
	status result.Status
	// in are substrings of the result's Error, all of which must appear.
	in     []string
	what   string
	advice func(now map[string]string, errText string) string
}

// causes are tried in order; the first that matches takes the result. The
// substrings are those of the messages the engine and the fetcher write
// (shared/engine, shared/web/fetch, shared/domain/hostqueue).
var causes = []cause{
	// Before the address policy: a port denial also comes from "check
	// address" and says "not allowed".
	{result.StatusDenied, []string{"port ", "is not allowed (allowed ports"}, "denied: port not in AllowedPorts",
		func(now map[string]string, _ string) string {
			return fmt.Sprintf("add the port to --param AllowedPorts=%s,PORT", now[params.NameAllowedPorts])
		}},
	{result.StatusDenied, []string{"check address", "not allowed"}, "denied by the address policy",
		func(_ map[string]string, errText string) string {
			// A denial that names its remedy is counted by cli.AddressDenials,
			// which lists each flag and network after the summary.
			if fetch.AddressFix(errText) != "" {
				return "the flags that would allow them follow"
			}
			return "add --allow-net CIDR or --allow-private to reach them (only sites you run)"
		}},
	{result.StatusDenied, []string{cli.RobotsDisallowed}, "disallowed by the site's robots.txt (not a failure)",
		func(map[string]string, string) string { return "" }},
	{result.StatusDenied, []string{"above MaxCrawlDelay"}, "denied: robots.txt asks for a Crawl-delay above MaxCrawlDelay",
		func(now map[string]string, _ string) string {
			return fmt.Sprintf("to wait that long between requests, raise --param MaxCrawlDelay (now %s)", now[params.NameMaxCrawlDelay])
		}},
	{result.StatusDenied, []string{"robots.txt could not be read"}, "denied: robots.txt could not be read until GiveUpAfter",
		func(now map[string]string, _ string) string {
			return fmt.Sprintf("the site did not answer; these urls have ended, so the same command will not ask again: to try them later, list them in a new job (another --state and --out), or raise --param GiveUpAfter (now %s)", now[params.NameGiveUpAfter])
		}},
	{result.StatusFetchError, []string{"beyond GiveUpAfter"}, "the host asked to wait (Retry-After) beyond GiveUpAfter",
		func(now map[string]string, _ string) string {
			return fmt.Sprintf("to wait that long, raise --param GiveUpAfter (now %s)", now[params.NameGiveUpAfter])
		}},
	{result.StatusFetchError, []string{"host gave no usable answer"}, "given up: the host gave no usable answer for GiveUpAfter",
		func(now map[string]string, _ string) string {
			return fmt.Sprintf("these urls have ended, so the same command will not ask again: to try them later, list them in a new job (another --state and --out), or raise --param GiveUpAfter (now %s)", now[params.NameGiveUpAfter])
		}},
	{result.StatusFetchError, []string{"no complete answer within"}, "timed out",
		func(now map[string]string, _ string) string {
			return fmt.Sprintf("raise --param FetchTimeout (now %s)", now[params.NameFetchTimeout])
		}},
	{result.StatusFetchError, []string{"does not resolve"}, "host name does not resolve",
		func(map[string]string, string) string { return "check the host names in the input" }},
	{result.StatusFetchError, []string{"no such host"}, "host name does not resolve",
		func(map[string]string, string) string { return "check the host names in the input" }},
	{result.StatusFetchError, []string{"redirects"}, "too many redirects (a redirect loop?)",
		func(map[string]string, string) string { return "" }},
	{result.StatusFetchError, []string{"connection reset"}, "connection reset by the server",
		func(now map[string]string, _ string) string {
			return fmt.Sprintf("raise --param MaxAttempts (now %s), or list these urls in a new job later (they have ended: the same command will not ask again)", now[params.NameMaxAttempts])
		}},
	{result.StatusFetchError, []string{"connection refused"}, "connection refused",
		func(map[string]string, string) string {
			return "nothing listens there: check the URLs' ports (these urls have ended: to try them later, list them in a new job)"
		}},
	{result.StatusDropped, nil, "dropped: the host's queue exceeded PersistLimit",
		func(now map[string]string, _ string) string {
			return fmt.Sprintf("raise --param PersistLimit (now %s), or split the job", now[params.NamePersistLimit])
		}},
}

// outcomes follows a run's results for the summary: the URLs of each
// politeness queue, and the failures by cause.
type outcomes struct {
	queueKey func(host string) string
	params   params.Params // in force, for the advice

	mu sync.Mutex
	// byKey holds, by queue, the URLs of its results that cost a
	// request, each as a hash: copies of one URL share its fetch.
	byKey   map[string]*keyLoad
	byCause map[string]*failure // by failure.what
	// failures counts the results that are failures (cli.IsFailure).
	failures int
}

// keyLoad is a queue's results that cost a request: how many, and the
// distinct URLs among them (a 64-bit hash each, 8 bytes a URL rather than
// the URL: a collision among a queue's URLs is as good as never).
type keyLoad struct {
	urls     int
	distinct map[uint64]struct{}
}

func urlHash(u string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(u))
	return h.Sum64()
}

type failure struct {
	what, advice string
	n            int
	example      result.Result
}

func newOutcomes(queueKey func(string) string, p params.Params) *outcomes {
	return &outcomes{queueKey: queueKey, params: p, byKey: map[string]*keyLoad{}, byCause: map[string]*failure{}}
}

// add takes one result.
func (o *outcomes) add(r result.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Refused before any request, a URL costs its host no delay.
	if r.Status != result.StatusDenied && r.Status != result.StatusDropped {
		key := o.queueKey(r.Host)
		l := o.byKey[key]
		if l == nil {
			l = &keyLoad{distinct: map[uint64]struct{}{}}
			o.byKey[key] = l
		}
		l.urls++
		l.distinct[urlHash(r.URL)] = struct{}{}
	}
	if !slices.Contains(cli.FailedStatuses, r.Status) {
		return
	}
	if cli.IsFailure(r) {
		o.failures++
	}
	what, advice := classify(r, o.params)
	f := o.byCause[what]
	if f == nil {
		f = &failure{what: what, advice: advice, example: r}
		o.byCause[what] = f
	}
	f.n++
}

// classify names a failed result's cause and what to change.
func classify(r result.Result, p params.Params) (what, advice string) {
	for _, c := range causes {
		if c.status != r.Status || !containsAll(r.Error, c.in) {
			continue
		}
		return c.what, c.advice(p.Format(), r.Error)
	}
	if r.Status == result.StatusFetchError && r.HTTPStatus != 0 {
		return fmt.Sprintf("answered HTTP %d", r.HTTPStatus), ""
	}
	return string(r.Status) + " (other)", "see the error field of these results in the output"
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// failed returns how many results were failures (cli.IsFailure).
func (o *outcomes) failed() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failures
}

// loads returns each queue's URLs in this run with its delay.
func (o *outcomes) loads(delay func(key string) time.Duration, server func(key string) (netip.Addr, time.Duration)) []localmode.HostLoad {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]localmode.HostLoad, 0, len(o.byKey))
	for _, k := range slices.Sorted(maps.Keys(o.byKey)) {
		l := o.byKey[k]
		h := localmode.HostLoad{Key: k, URLs: l.urls, Copies: l.urls - len(l.distinct), Delay: delay(k)}
		if server != nil {
			h.Addr, h.ServerDelay = server(k)
		}
		out = append(out, h)
	}
	return out
}

// adviceLines returns one line per cause of failure, the most frequent
// first: how many, what, an example, what to change.
func (o *outcomes) adviceLines() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	fs := slices.Collect(maps.Values(o.byCause))
	slices.SortFunc(fs, func(a, b *failure) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.what, b.what)
	})
	var lines []string
	for _, f := range fs {
		line := fmt.Sprintf("%d %s (e.g. %s", f.n, f.what, f.example.URL)
		if f.example.Error != "" {
			line += ": " + shorten(f.example.Error, 160)
		}
		line += ")"
		if f.advice != "" {
			line += ": " + f.advice
		}
		lines = append(lines, line)
	}
	return lines
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// boundText says a job's politeness bound and what sets it, e.g. "40s
// (127.0.0.2:8080: 10 urls × 4s Crawl-delay)".
func boundText(loads []localmode.HostLoad, fetchDelay time.Duration) string {
	b, worst := localmode.Bound(loads)
	if sb, s := localmode.ServerBound(loads); sb > b {
		// The hosts share a server: its gate, not any one host, bounds
		// the job.
		return fmt.Sprintf("%s (%d hosts waiting on %s: %d requests × %s ServerDelay)", sb.Round(time.Millisecond), s.Hosts, s.Addr, s.Fetches, s.Delay)
	}
	if worst.URLs == 0 {
		return "0s"
	}
	kind := "FetchDelay"
	if worst.Delay > fetchDelay {
		kind = "Crawl-delay"
	}
	if worst.Copies > 0 {
		// Copies of a URL share its one fetch: the bound counts fetches.
		return fmt.Sprintf("%s (%s: %d distinct of %d urls × %s %s)", b.Round(time.Millisecond), worst.Key, worst.Fetches(), worst.URLs, worst.Delay, kind)
	}
	return fmt.Sprintf("%s (%s: %d urls × %s %s)", b.Round(time.Millisecond), worst.Key, worst.URLs, worst.Delay, kind)
}

// printLocalSummary writes the end of a local run to w. verbose adds the
// runtime's own counters.
func printLocalSummary(w io.Writer, r localmode.Report, o *outcomes, delay func(string) time.Duration, server func(string) (netip.Addr, time.Duration), verbose bool) {
	in := r.Input
	if in.SameAs != "" {
		fmt.Fprintf(w, "urldownloader: input: the list read before as %s (its start is the same: moved, renamed or extended), going on where it stopped, under its ids\n", in.SameAs)
	}
	if in.Skipped > 0 {
		fmt.Fprintf(w, "urldownloader: input: %d lines read by earlier runs (%d urls accepted, %d lines rejected) skipped\n", in.Skipped, in.SkippedURLs, in.SkippedRejected)
	}
	got := 0
	for _, n := range r.ByStatus {
		got += n
	}
	verb := "done"
	if r.Stopped {
		verb = "stopped"
	}
	fmt.Fprintf(w, "urldownloader: %s: %d of %d urls have a result, in %s; politeness bound %s\n",
		verb, got+r.DoneElsewhere, r.Expected, r.Elapsed.Round(100*time.Millisecond), boundText(o.loads(delay, server), o.params.FetchDelay))
	var parts []string
	statuses := slices.Sorted(maps.Keys(r.ByStatus))
	slices.SortStableFunc(statuses, func(a, b result.Status) int { return r.ByStatus[b] - r.ByStatus[a] })
	for _, s := range statuses {
		parts = append(parts, fmt.Sprintf("%s %d", s, r.ByStatus[s]))
	}
	if r.DoneElsewhere > 0 {
		parts = append(parts, fmt.Sprintf("done by another process on the state %d", r.DoneElsewhere))
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "urldownloader: by status: %s\n", strings.Join(parts, ", "))
	}
	for _, line := range o.adviceLines() {
		fmt.Fprintf(w, "urldownloader: %s\n", line)
	}
	if r.Duplicates > 0 {
		fmt.Fprintf(w, "urldownloader: %d results were written twice (at least once: consumers deduplicate by id)\n", r.Duplicates)
	}
	if verbose || in.Rejected > 0 {
		fmt.Fprintf(w, "urldownloader: input: read=%d lines accepted=%d rejected=%d resumed=%d\n", in.Lines, in.URLs, in.Rejected, r.Resumed)
	}
	if verbose {
		fmt.Fprintf(w, "urldownloader: counters: expected=%d results=%d duplicates=%d missing=%d requests=%d checkInvocations=%d ingestInvocations=%d\n",
			r.Expected, r.Results, r.Duplicates, r.MissingCount, r.Requests, r.CheckRuns, in.Batches)
	}
}
