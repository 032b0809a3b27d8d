package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// progressEvery is how often the live progress line is redrawn on a
// terminal; logEvery how often a progress line is written when stderr is
// not one (a file, a pipe, a CI log), one line each; boundEvery how often
// the ETA's politeness bound is read again from the state (a read per
// queue).
const (
	progressEvery = 500 * time.Millisecond
	boundEvery    = 2 * time.Second
)

var logEvery = 10 * time.Second // a variable for the tests

// isTerminal reports whether f is a terminal (a character device): the
// progress line redraws itself with \r, which only a terminal shows well.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressSource is what the progress line reads (a localmode.Runtime).
type progressSource interface {
	Progress() localmode.Progress
	HostsLeft(ctx context.Context) ([]localmode.HostLoad, error)
}

// startProgress shows the run's progress on w until the returned stop is
// called: redrawn in place every progressEvery when redraw is set (a
// terminal; stop clears it), else one line every logEvery. It says the
// URLs done of those owed a result, requests per second over the last
// seconds, hosts being worked, the backlog and an ETA: the politeness
// bound of the URLs still queued (each host's URLs left × its FetchDelay
// or Crawl-delay, the slowest host's).
func startProgress(w io.Writer, src progressSource, redraw bool) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	// The window starts with the requests at start, so the first line
	// (after logEvery when not a terminal) has a rate to show too.
	window := []sample{{start, src.Progress().Requests}}
	every := progressEvery
	if !redraw {
		every = logEvery
	}
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		eta, etaKnown := time.Duration(0), false
		var etaAt time.Time
		for {
			select {
			case <-done:
				if redraw {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			case now := <-t.C:
				p := src.Progress()
				if now.Sub(etaAt) >= boundEvery {
					ctx, cancel := context.WithTimeout(context.Background(), boundEvery)
					left, err := src.HostsLeft(ctx)
					cancel()
					if etaKnown = err == nil; etaKnown {
						eta, _ = localmode.Bound(left)
						sb, _ := localmode.ServerBound(left)
						eta = max(eta, sb)
					}
					etaAt = now
				}
				window = rateWindow(append(window, sample{now, p.Requests}), now)
				line := progressLine(p, window[0].reqs, now.Sub(window[0].at), eta, etaKnown)
				if redraw {
					fmt.Fprint(w, "\r\033[K"+line)
				} else {
					fmt.Fprintf(w, "%s  elapsed %s\n", line, now.Sub(start).Round(time.Second))
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// sample is the requests made so far, at a moment.
type sample struct {
	at   time.Time
	reqs int64
}

// rateWindow drops the samples the rate no longer needs: it keeps the
// newest one at least rateSpan old, so the rate covers the last rateSpan
// or a little more. (Dropping every sample older than rateSpan left a log
// line, written every logEvery = 10 s, with only its own sample: "0.0
// req/s" on every line of a run.)
func rateWindow(w []sample, now time.Time) []sample {
	for len(w) > 2 && now.Sub(w[1].at) >= rateSpan {
		w = w[1:]
	}
	return w
}

// rateSpan is how far back the progress line's rate looks.
const rateSpan = 5 * time.Second

// progressLine renders p; reqsBefore were the requests span ago (the
// rate's window); eta is the politeness bound of what is left, when known.
func progressLine(p localmode.Progress, reqsBefore int64, span, eta time.Duration, etaKnown bool) string {
	rate := 0.0
	if span > 0 {
		rate = float64(p.Requests-reqsBefore) / span.Seconds()
	}
	etaText := "-"
	switch {
	case p.Backlog == 0 && p.Expected > 0:
		etaText = "0s"
	case etaKnown && p.Backlog > 0:
		etaText = eta.Round(time.Second).String()
	}
	return fmt.Sprintf("urldownloader: %d/%d urls  %.1f req/s  %d hosts active  backlog %d  ETA %s",
		p.Results, p.Expected, rate, p.Hosts, p.Backlog, etaText) + refreshText(p) + waitingText(p.Waiting) + serversText(p.Servers)
}

// serversText says which server addresses hosts wait on at their gate,
// for the progress line: "  12 hosts waiting on 127.0.0.2 (ServerDelay
// 200ms)", the two most waited on; empty when none.
func serversText(ws []server.Waiting) string {
	var parts []string
	for _, w := range ws[:min(len(ws), 2)] {
		hosts := fmt.Sprintf("%d hosts", w.Hosts)
		if w.Hosts == 1 {
			hosts = "1 host"
		}
		parts = append(parts, fmt.Sprintf("%s waiting on %s (ServerDelay %s)", hosts, w.Addr, w.Delay))
	}
	switch more := len(ws) - 2; {
	case more == 1:
		parts = append(parts, "1 more address")
	case more > 1:
		parts = append(parts, fmt.Sprintf("%d more addresses", more))
	}
	if len(parts) == 0 {
		return ""
	}
	return "  " + strings.Join(parts, ", ")
}

// refreshText says how many URLs refresh, when the next is due and how
// late the latest refetch was, from a second on (docs/refresh.md); ""
// when none refreshes.
func refreshText(p localmode.Progress) string {
	if p.Refreshing == 0 {
		return ""
	}
	next := "now"
	if d := time.Until(p.NextRefresh); d > time.Second {
		next = "in " + d.Round(time.Second).String()
	}
	s := fmt.Sprintf("  refreshing %d, next due %s", p.Refreshing, next)
	if p.RefreshLag >= time.Second {
		s += fmt.Sprintf(", lag %s", p.RefreshLag.Round(time.Second))
	}
	return s
}

// printMetrics writes the table of the metrics the functions wrote as EMF
// during the run (read back with metrics.Parse, as CloudWatch would):
// counts summed, distributions as count, p50, p99 and max, results also by
// status. Rows that are all zero (an idle shard's gauges, counters that
// never moved) are left out unless all is set (-v).
func printMetrics(w io.Writer, emf []byte, all bool) error {
	docs, err := metrics.Parse(bytes.NewReader(emf))
	if err != nil {
		return fmt.Errorf("read the functions' metrics back: %w", err)
	}
	totals := metrics.Totals(docs)
	fmt.Fprintln(w, "urldownloader: metrics (EMF, namespace "+metrics.Namespace+"):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tdimension\tvalue\tunit\t")
	for _, t := range totals {
		m, _ := metrics.Lookup(t.Name)
		dim := "-"
		if t.Dim != "" {
			dim = t.Dim + "=" + t.DimValue
		}
		var v string
		zero := false
		switch m.Kind {
		case metrics.Distribution:
			zero = len(t.Values) == 0
			v = fmt.Sprintf("n=%d p50=%.1f p99=%.1f max=%.1f", len(t.Values), t.Quantile(0.5), t.Quantile(0.99), t.Max())
		case metrics.Gauge:
			if len(t.Values) == 0 {
				continue
			}
			zero = !slices.ContainsFunc(t.Values, func(x float64) bool { return x != 0 })
			v = fmt.Sprintf("last=%g max=%g", t.Values[len(t.Values)-1], t.Max())
		default:
			zero = t.Sum() == 0
			v = fmt.Sprintf("%g", t.Sum())
		}
		if zero && !all {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", t.Name, dim, v, t.Unit)
	}
	return tw.Flush()
}
