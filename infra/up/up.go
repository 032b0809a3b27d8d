package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/infra/samlocal"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// API modes: how POST /urls is served.
const (
	apiAuto      = "auto"
	apiSAM       = "sam"
	apiInProcess = "inprocess"
)

// options shape one local deployment.
type options struct {
	// Listen is the API's loopback address.
	Listen string
	// API is apiAuto, apiSAM or apiInProcess.
	API string
	// Image is the sam local invoke image (apiSAM).
	Image string
	// DemoHosts and DemoPages size the demo site.
	DemoHosts, DemoPages int
	// ParamTTL is how long the functions cache SSM parameters (30 s, as
	// deployed: a put-parameter shows within it).
	ParamTTL time.Duration
	// ScheduleEvery is the check schedules' rate (the template's 1 minute).
	ScheduleEvery time.Duration
	// CheckRun is how long one check invocation starts requests.
	CheckRun time.Duration
	// Params are SSM parameters set at start (Name -> value).
	Params map[string]string
	Log    *slog.Logger
	// Note receives what the deployment says about itself (stderr).
	Note io.Writer
}

// deployment is a running local deployment.
type deployment struct {
	pipe     *emulated.Pipeline
	site     *demosite.Site
	endpoint string
	apiURL   string
	// apiMode says how POST /urls is served, for the banner.
	apiMode string
	closers []func()
}

// start brings the deployment up: moto with the stack, the demo site, the
// API. The event sources run in serve.
func start(ctx context.Context, opts options) (d *deployment, err error) {
	d = &deployment{}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if err := checkLoopbackAddr(opts.Listen); err != nil {
		return nil, err
	}
	site, err := demosite.Start(demosite.Options{Hosts: opts.DemoHosts})
	if err != nil {
		return nil, fmt.Errorf("start the demo site: %w", err)
	}
	d.site = site
	d.closers = append(d.closers, site.Close)
	pipe, err := emulated.Start(ctx, emulated.Options{
		// The stage (and so the SSM path /urldownloader/dev/) is the
		// template's default; the prefix names the table and queues.
		Prefix: "dev", Addresses: fetch.PrivatePolicy(), Params: opts.Params, ParamTTL: opts.ParamTTL,
		ScheduleEvery: opts.ScheduleEvery, CheckRun: opts.CheckRun, Log: opts.Log,
	})
	if err != nil {
		return nil, err
	}
	d.pipe = pipe
	d.closers = append(d.closers, pipe.Close)
	d.endpoint = aws.ToString(pipe.AWS.BaseEndpoint)

	mode, why := opts.API, ""
	if mode == apiAuto {
		if why = samUnavailable(ctx, opts.Image); why == "" {
			mode = apiSAM
		} else {
			mode = apiInProcess
		}
	}
	switch mode {
	case apiSAM:
		if err := d.startSAMAPI(ctx, opts); err != nil {
			return nil, err
		}
		d.apiMode = "sam local start-api (ingest in Docker, " + opts.Image + ")"
	case apiInProcess:
		if err := d.startInProcessAPI(opts.Listen); err != nil {
			return nil, err
		}
		d.apiMode = "the in-process API adapter (ingest handler in this process)"
		if why != "" {
			d.apiMode += "; not sam local: " + why
		}
	default:
		return nil, fmt.Errorf("--api %q: want auto, sam or inprocess", opts.API)
	}
	return d, nil
}

// samUnavailable says why sam local start-api cannot serve here, or "".
func samUnavailable(ctx context.Context, image string) string {
	root, err := proc.ModuleRoot()
	if err != nil {
		return err.Error()
	}
	if _, err := os.Stat(filepath.Join(root, samlocal.BuiltTemplate)); err != nil {
		return "no " + samlocal.BuiltTemplate + " (make sam-build)"
	}
	if !samlocal.DockerAvailable(ctx) {
		return "no Docker daemon answers (make sam-local provisions one and stops it after)"
	}
	if image == "" {
		return "no invoke image given"
	}
	if exec.CommandContext(ctx, "docker", "image", "inspect", image).Run() != nil {
		return "no image " + image + " (infra/scripts/docker-provision.sh builds it)"
	}
	return ""
}

func (d *deployment) startSAMAPI(ctx context.Context, opts options) error {
	root, err := proc.ModuleRoot()
	if err != nil {
		return err
	}
	built := filepath.Join(root, samlocal.BuiltTemplate)
	tpl := filepath.Join(filepath.Dir(built), samlocal.LocalTemplateName)
	if err := samlocal.LocalTemplate(built, tpl); err != nil {
		return err
	}
	env, err := samlocal.EnvVars(d.pipe.Stack, d.endpoint, map[string]map[string]string{
		// Loopback demo hosts: the template pins this to false for AWS.
		"IngestFunction": {"ALLOW_PRIVATE_NETWORKS": "true"},
	})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "urldownloader-up-")
	if err != nil {
		return err
	}
	d.closers = append(d.closers, func() { os.RemoveAll(dir) })
	envFile := filepath.Join(dir, "env.json")
	if err := samlocal.WriteJSON(envFile, env); err != nil {
		return err
	}
	sam, err := samlocal.NewSAM(root, tpl, envFile, opts.Image, opts.Note)
	if err != nil {
		return err
	}
	_, port, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", opts.Listen, err)
	}
	var p int
	if _, err := fmt.Sscan(port, &p); err != nil {
		return fmt.Errorf("--listen %s: port: %w", opts.Listen, err)
	}
	api, err := sam.StartAPI(ctx, p)
	if err != nil {
		return err
	}
	d.closers = append(d.closers, api.Close)
	d.apiURL = api.URL
	return nil
}

func (d *deployment) startInProcessAPI(listen string) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("serve POST /urls: %w", err)
	}
	srv := &http.Server{Handler: d.pipe.APIHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	d.closers = append(d.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	d.apiURL = "http://" + ln.Addr().String()
	return nil
}

func checkLoopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--listen %s: serve only on a loopback address (there is no IAM on the local API)", addr)
	}
	return nil
}

// serve runs the event sources until ctx ends.
func (d *deployment) serve(ctx context.Context) { d.pipe.Serve(ctx) }

// close stops everything, last started first.
func (d *deployment) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

// command is one copy-paste command the banner prints.
type command struct {
	What string
	Line string
}

// awsEnv is the line that gives the AWS CLI moto's fixed credentials and
// the region; the other commands assume it ran in the same shell.
const awsEnv = "export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1"

// commands are the banner's commands, run as printed by the test.
func (d *deployment) commands() []command {
	hosts := d.site.Hosts()
	h0, h1 := hosts[0], hosts[len(hosts)-1]
	ep := "--endpoint-url " + d.endpoint
	st := d.pipe.Stack
	return []command{
		{"post URLs to the API (202 with their ids)",
			fmt.Sprintf(`curl -s -X POST --data '[{"url": "http://%s/page/1"}, "http://%s/page/2"]' %s/urls`, h0, h1, d.apiURL)},
		{"give the AWS CLI moto's credentials (once per shell)", awsEnv},
		{"send URLs to the input queue (the ingest mapping polls it)",
			fmt.Sprintf(`.venv/bin/aws sqs send-message %s --queue-url %s --message-body '{"url": "http://%s/page/3"}'`, ep, st.InputQueueURL, h0)},
		{"read results from the output queue (and delete them: see below)",
			fmt.Sprintf(`.venv/bin/aws sqs receive-message %s --queue-url %s --max-number-of-messages 10 --wait-time-seconds 10`, ep, st.OutputQueueURL)},
		{"change a parameter live: bodies cut at 12 bytes (\"truncated\": true) within the cache TTL",
			fmt.Sprintf(`.venv/bin/aws ssm put-parameter %s --name %sMaxBodyBytes --type String --value 12 --overwrite`, ep, st.ParamPath)},
	}
}

// banner prints the endpoints and the commands.
func (d *deployment) banner(w io.Writer, ttl time.Duration) {
	st := d.pipe.Stack
	fmt.Fprintf(w, "urldownloader is up (Ctrl-C stops it)\n\n")
	fmt.Fprintf(w, "  POST /urls       %s/urls  (%s)\n", d.apiURL, d.apiMode)
	fmt.Fprintf(w, "  moto (AWS APIs)  %s\n", d.endpoint)
	fmt.Fprintf(w, "  input queue      %s\n", st.InputQueueURL)
	fmt.Fprintf(w, "  output queue     %s\n", st.OutputQueueURL)
	fmt.Fprintf(w, "  table            %s\n", st.TableName)
	fmt.Fprintf(w, "  parameters       %s*  (cached %v)\n", st.ParamPath, ttl)
	fmt.Fprintf(w, "  demo site        %s\n\n", strings.Join(prefixAll("http://", d.site.Hosts()), " "))
	fmt.Fprintf(w, "From the repository's folder:\n\n")
	for _, c := range d.commands() {
		fmt.Fprintf(w, "# %s\n%s\n\n", c.What, c.Line)
	}
	fmt.Fprintf(w, "A received message stays on the queue, hidden for the visibility timeout, until deleted:\n"+
		".venv/bin/aws sqs delete-message --endpoint-url %s --queue-url %s --receipt-handle <ReceiptHandle>\n", d.endpoint, st.OutputQueueURL)
}

func prefixAll(p string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = p + s
	}
	return out
}
