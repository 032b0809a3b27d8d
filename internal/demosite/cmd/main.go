// Command demosite serves the demo site on loopback hosts for a local run
// with --urls, and verifies a run's results against what the site saw.
//
//	go run ./internal/demosite/cmd serve --hosts 20 --pages 10 --urls urls.jsonl --log requests.jsonl
//	go run ./internal/demosite/cmd verify --results results.jsonl --log requests.jsonl --min-gap 300ms
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demosite serve|verify [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "verify":
		err = verify(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want serve or verify", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demosite:", err)
		os.Exit(1)
	}
}

// serve runs the site until interrupted, writing its URLs first and its
// request log (one JSON line per request) when it stops.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	hosts := fs.Int("hosts", 20, "loopback hosts")
	pages := fs.Int("pages", 10, "pages per host")
	urls := fs.String("urls", "urls.jsonl", "write the site's URLs here, one {\"url\"} per line")
	logPath := fs.String("log", "requests.jsonl", "write the request log here on exit")
	latency := fs.Duration("latency", 0, "added to every response")
	skewed := fs.Bool("skewed", false, "skewed, shuffled workload: 3 hosts with --pages pages, 7 with a quarter of that, the rest 1 or 2")
	_ = fs.Parse(args)
	site, err := demosite.Start(demosite.Options{Hosts: *hosts, Latency: *latency})
	if err != nil {
		return err
	}
	defer site.Close()
	f, err := os.Create(*urls)
	if err != nil {
		return err
	}
	list := site.URLs(*pages)
	if *skewed {
		list = site.SkewedURLs(*pages, 7)
	}
	for _, u := range list {
		b, _ := json.Marshal(map[string]string{"url": u})
		fmt.Fprintf(f, "%s\n", b)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "demosite: serving %d hosts (%s ...), URLs in %s; stop with Ctrl-C or kill\n", *hosts, site.Hosts()[0], *urls)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	site.Close()
	lf, err := os.Create(*logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	enc := json.NewEncoder(lf)
	for _, r := range site.Requests() {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "demosite: %d requests logged to %s\n", len(site.Requests()), *logPath)
	return nil
}

// verify checks that every result is fetched with the page the site serves
// for it, and that the site never saw two requests to one host closer than
// min-gap.
func verify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	resultsPath := fs.String("results", "results.jsonl", "the run's results (JSON lines)")
	logPath := fs.String("log", "requests.jsonl", "the site's request log")
	minGap := fs.Duration("min-gap", time.Second, "smallest allowed gap between two requests to one host")
	want := fs.Int("want", 0, "number of fetched results expected (0: any)")
	_ = fs.Parse(args)

	var bad []string
	fetched := map[string]bool{}
	if err := eachLine(*resultsPath, func(line []byte) error {
		var r result.Result
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		if r.Status != result.StatusFetched {
			bad = append(bad, fmt.Sprintf("%s: %s %s", r.URL, r.Status, r.Error))
			return nil
		}
		path := strings.TrimPrefix(r.URL, "http://"+r.Host)
		if body := demosite.Body(r.Host, path); r.Data != body {
			bad = append(bad, fmt.Sprintf("%s: body %q, want %q", r.URL, r.Data, body))
		}
		fetched[r.ID] = true
		return nil
	}); err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	var reqs []demosite.Request
	if err := eachLine(*logPath, func(line []byte) error {
		var r demosite.Request
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		reqs = append(reqs, r)
		return nil
	}); err != nil {
		return fmt.Errorf("read request log: %w", err)
	}
	gap, host := demosite.MinGap(reqs)
	fmt.Printf("fetched %d urls with the right body, %d problems; %d requests seen by the site; smallest gap %s (host %s)\n",
		len(fetched), len(bad), len(reqs), gap.Round(time.Millisecond), host)
	for _, b := range bad {
		fmt.Println("  ", b)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d results are not fetched with the right body", len(bad))
	}
	if *want > 0 && len(fetched) != *want {
		return fmt.Errorf("%d urls fetched, want %d", len(fetched), *want)
	}
	if gap >= 0 && gap < *minGap {
		return fmt.Errorf("two requests to %s only %s apart, want at least %s", host, gap, *minGap)
	}
	return nil
}

func eachLine(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}
