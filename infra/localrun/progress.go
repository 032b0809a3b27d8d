package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urldownloader/urldownloader/infra/standalone"
	"github.com/urldownloader/urldownloader/shared/metrics"
)

// progressEvery is how often the live progress line is redrawn.
const progressEvery = 500 * time.Millisecond

// isTerminal reports whether f is a terminal (a character device): the
// progress line redraws itself with \r, which only a terminal shows well.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// startProgress redraws one line on w every progressEvery until the
// returned stop is called (which clears it): URLs done of those owed a
// result, requests per second over the last seconds, hosts being worked,
// the backlog and an ETA from the results' pace so far.
func startProgress(w io.Writer, progress func() standalone.Progress) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	type sample struct {
		at   time.Time
		reqs int64
	}
	var window []sample
	wg.Go(func() {
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case now := <-t.C:
				p := progress()
				window = append(window, sample{now, p.Requests})
				for len(window) > 10 { // five seconds
					window = window[1:]
				}
				fmt.Fprint(w, "\r\033[K"+progressLine(p, window[0].reqs, now.Sub(window[0].at), now.Sub(start)))
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// progressLine renders p; reqsBefore were the requests span ago (the
// rate's window), elapsed is the run's time so far.
func progressLine(p standalone.Progress, reqsBefore int64, span, elapsed time.Duration) string {
	rate := 0.0
	if span > 0 {
		rate = float64(p.Requests-reqsBefore) / span.Seconds()
	}
	eta := "-"
	if p.Results > 0 && p.Backlog > 0 {
		eta = (time.Duration(float64(elapsed) / float64(p.Results) * float64(p.Backlog))).Round(time.Second).String()
	} else if p.Backlog == 0 && p.Expected > 0 {
		eta = "0s"
	}
	return fmt.Sprintf("localrun: %d/%d urls  %.1f req/s  %d hosts active  backlog %d  ETA %s",
		p.Results, p.Expected, rate, p.Hosts, p.Backlog, eta) + waitingText(p.Waiting)
}

// printMetrics writes the table of the metrics the functions wrote as EMF
// during the run (read back with metrics.Parse, as CloudWatch would):
// counts summed, distributions as count, p50, p99 and max, results also by
// status.
func printMetrics(w io.Writer, emf []byte) error {
	docs, err := metrics.Parse(bytes.NewReader(emf))
	if err != nil {
		return fmt.Errorf("read the functions' metrics back: %w", err)
	}
	totals := metrics.Totals(docs)
	fmt.Fprintln(w, "localrun: metrics (EMF, namespace "+metrics.Namespace+"):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tdimension\tvalue\tunit\t")
	for _, t := range totals {
		m, _ := metrics.Lookup(t.Name)
		dim := "-"
		if t.Dim != "" {
			dim = t.Dim + "=" + t.DimValue
		}
		var v string
		switch m.Kind {
		case metrics.Distribution:
			v = fmt.Sprintf("n=%d p50=%.1f p99=%.1f max=%.1f", len(t.Values), t.Quantile(0.5), t.Quantile(0.99), t.Max())
		case metrics.Gauge:
			if len(t.Values) == 0 {
				continue
			}
			v = fmt.Sprintf("last=%g max=%g", t.Values[len(t.Values)-1], t.Max())
		default:
			v = fmt.Sprintf("%g", t.Sum())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", t.Name, dim, v, t.Unit)
	}
	return tw.Flush()
}
