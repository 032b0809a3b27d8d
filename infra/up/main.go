// Command up runs a local deployment until Ctrl-C, for a user to talk to
// with curl and the AWS CLI: moto with the template's table, queues and
// parameters, a demo site on loopback hosts, the input queue's event source
// mapping, the wake queue's and one schedule per shard for check, and POST
// /urls on a loopback port, through `sam local start-api` where Docker and
// the invoke image are there, else through the in-process API adapter. It
// prints the endpoints and copy-paste commands. `make up` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/infra/samlocal"
)

type paramFlags map[string]string

func (p paramFlags) String() string { return fmt.Sprint(map[string]string(p)) }
func (p paramFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want Name=Value, got %q", v)
	}
	p[name] = value
	return nil
}

func main() { os.Exit(run()) }

func run() int {
	params := paramFlags{}
	opts := options{Note: os.Stderr}
	flag.StringVar(&opts.Listen, "listen", "127.0.0.1:3000", "loopback address of POST /urls (3000 is sam local start-api's default)")
	flag.StringVar(&opts.API, "api", apiAuto, "how POST /urls is served: sam (sam local start-api, needs Docker), inprocess, or auto (sam where it can)")
	flag.StringVar(&opts.Image, "image", os.Getenv(samlocal.EnvImage), "sam local invoke image (make sets it)")
	flag.IntVar(&opts.DemoHosts, "demo-hosts", 3, "demo site: loopback hosts to serve")
	flag.DurationVar(&opts.ParamTTL, "param-ttl", 30*time.Second, "how long the functions cache SSM parameters (30s as deployed)")
	flag.DurationVar(&opts.ScheduleEvery, "schedule-every", time.Minute, "rate of each shard's check schedule (the template's rate(1 minute))")
	flag.DurationVar(&opts.CheckRun, "check-run", 55*time.Second, "how long one check invocation starts requests (the template's CHECK_RUN_SECONDS)")
	flag.Var(params, "param", "SSM parameter set at start, Name=Value, repeatable (default FetchDelay=500ms)")
	verbose := flag.Bool("v", false, "show the functions' JSON logs on stderr")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "up: unexpected arguments %q\n", flag.Args())
		return 2
	}
	if _, set := params["FetchDelay"]; !set {
		// Quick enough to watch, slow enough to see the spacing.
		params["FetchDelay"] = "500ms"
	}
	opts.Params = params
	logw := io.Discard
	if *verbose {
		logw = os.Stderr
	}
	opts.Log = slog.New(slog.NewJSONHandler(logw, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	d, err := start(startCtx, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "up: %v\n", err)
		return 1
	}
	defer d.close()
	d.banner(os.Stdout, opts.ParamTTL)
	d.serve(ctx)
	fmt.Fprintln(os.Stderr, "up: stopping")
	return 0
}
