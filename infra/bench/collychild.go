package main

// Colly's process: the bench binary (or its test binary) started again
// with collyChildEnv set runs Colly v2 over a URL file and exits, so that
// Colly's CPU time and peak memory are its own, measured as local mode's
// are (the child's rusage and VmHWM), and not mixed with the farm's in the
// bench process.

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
)

// collyChildEnv names the child's input file (a collyInput as JSON).
const collyChildEnv = "BENCH_COLLY_CHILD"

// collyInput is what the parent hands Colly's process.
type collyInput struct {
	// URLs is a file of URLs, one per line, visited in that order.
	URLs string
	// Hosts get one LimitRule each, in this order.
	Hosts []string
	Delay time.Duration
	// CA, when set, is a PEM file of the site's CA, trusted by Colly's
	// transport (the default one's clone otherwise).
	CA string
	// Report is the file the child writes its collyReport to.
	Report string
}

// collyReport is what Colly's process saw.
type collyReport struct {
	OK, Failed int64
	// FirstError is one failure's text.
	FirstError string
	// Visits is from the first Visit to Wait's return.
	Visits time.Duration
}

func init() {
	if in := os.Getenv(collyChildEnv); in != "" {
		os.Exit(collyChildMain(in))
	}
}

func collyChildMain(path string) int {
	var in collyInput
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &in)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "colly child: input:", err)
		return 2
	}
	rep, err := collyChild(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "colly child:", err)
		return 2
	}
	out, _ := json.Marshal(rep)
	if err := os.WriteFile(in.Report, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "colly child: write report:", err)
		return 2
	}
	if rep.Failed > 0 {
		fmt.Fprintf(os.Stderr, "colly child: %d requests failed, one with: %s\n", rep.Failed, rep.FirstError)
		return 1
	}
	return 0
}

// collyChild runs Colly as the politeness rows configure it: async, one
// LimitRule{DomainGlob: host, Delay: d, Parallelism: 1} per host, its
// defaults otherwise.
func collyChild(in collyInput) (collyReport, error) {
	var rep collyReport
	c := colly.NewCollector(colly.Async(true))
	if in.CA != "" {
		pem, err := os.ReadFile(in.CA)
		if err != nil {
			return rep, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return rep, fmt.Errorf("%s holds no certificate", in.CA)
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = &tls.Config{RootCAs: pool}
		c.WithTransport(t)
	}
	rules := make([]*colly.LimitRule, 0, len(in.Hosts))
	for _, h := range in.Hosts {
		rules = append(rules, &colly.LimitRule{DomainGlob: h, Delay: in.Delay, Parallelism: 1})
	}
	if err := c.Limits(rules); err != nil {
		return rep, fmt.Errorf("colly limits: %w", err)
	}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	c.OnResponse(func(*colly.Response) { ok.Add(1) })
	c.OnError(func(_ *colly.Response, err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	})
	f, err := os.Open(in.URLs)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	var urls []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		urls = append(urls, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return rep, err
	}
	start := time.Now()
	for _, u := range urls {
		if err := c.Visit(u); err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err.Error())
		}
	}
	c.Wait()
	rep.Visits = time.Since(start)
	rep.OK, rep.Failed = ok.Load(), failed.Load()
	if e, ok := firstErr.Load().(string); ok {
		rep.FirstError = e
	}
	return rep, nil
}
