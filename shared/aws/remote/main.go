package remote

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Exit codes of Main.
const (
	ExitOK          = 0   // the list was sent to its end; receiving ended (idle)
	ExitError       = 1   // a call or a file failed, or lines were refused
	ExitUsage       = 2   // bad flags
	ExitInterrupted = 130 // stopped by a signal after the batch in flight, progress kept
)

// Main runs `urldownloader send ...` or `urldownloader receive ...`:
// args[0] is the subcommand, the rest its flags. SIGINT and SIGTERM stop
// it after the batch in flight, a second one at once.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal stops after the batch in flight; a second one
	// (the default action again) ends the process at once.
	go func() { <-ctx.Done(); stop() }()
	return run(ctx, args, env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, aws: loadConfig})
}

// env is what a run takes from the world, so tests give their own.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	aws            func(ctx context.Context, a awsFlags) (aws.Config, error)
}

// awsFlags select the account, region and endpoint; the rest of the
// configuration (credentials) comes from the SDK's usual chain.
type awsFlags struct {
	region, profile, endpoint string
}

func (a *awsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.region, "region", "", "AWS region (default: the SDK's chain: AWS_REGION, the profile's region)")
	fs.StringVar(&a.profile, "profile", "", "shared config profile (default: AWS_PROFILE or default)")
	fs.StringVar(&a.endpoint, "endpoint-url", "", "send every AWS call to this `URL` (e.g. the moto endpoint make up prints)")
}

// loadConfig is the SDK's default chain: environment, shared config and
// credentials files, SSO, web identity, the instance's or task's role.
func loadConfig(ctx context.Context, a awsFlags) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if a.region != "" {
		opts = append(opts, config.WithRegion(a.region))
	}
	if a.profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(a.profile))
	}
	if a.endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(a.endpoint))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return cfg, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return cfg, errors.New("AWS configuration: no region: give --region or set AWS_REGION")
	}
	return cfg, nil
}

const usage = `usage:
  urldownloader send    [--stack NAME | --input-queue URL] [--urls FILE] [--progress FILE] [flags]
  urldownloader receive [--stack NAME | --output-queue URL] --out FILE [--bodies DIR | --inline] [--until-idle D] [flags]
run "urldownloader send --help" or "urldownloader receive --help" for the flags`

func run(ctx context.Context, args []string, e env) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, usage)
		return ExitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(e.stdout, usage)
		return ExitOK
	case "send":
		return runSend(ctx, args[1:], e)
	case "receive":
		return runReceive(ctx, args[1:], e)
	}
	fmt.Fprintf(e.stderr, "urldownloader: unknown command %q\n%s\n", args[0], usage)
	return ExitUsage
}

// endpoints resolves the queues and bucket from --stack, then the flags
// over it.
func endpoints(ctx context.Context, cfg aws.Config, stack string, flags Endpoints) (Endpoints, error) {
	var e Endpoints
	if stack != "" {
		var err error
		if e, err = StackEndpoints(ctx, cloudformation.NewFromConfig(cfg), stack); err != nil {
			return e, err
		}
	}
	if flags.InputQueue != "" {
		e.InputQueue = flags.InputQueue
	}
	if flags.OutputQueue != "" {
		e.OutputQueue = flags.OutputQueue
	}
	if flags.BodyBucket != "" {
		e.BodyBucket = flags.BodyBucket
	}
	return e, nil
}

// parseExit is the exit code of a flag parse error: --help is not one.
func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	return ExitUsage
}

func runSend(ctx context.Context, args []string, e env) int {
	fs := flag.NewFlagSet("urldownloader send", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var a awsFlags
	a.register(fs)
	stack := fs.String("stack", "", "the deployed stack's CloudFormation `NAME`: its InputQueueUrl output is the queue")
	queue := fs.String("input-queue", "", "the input queue's `URL` (instead of, or over, --stack)")
	urls := fs.String("urls", "-", "the URL list `FILE`: JSON lines {\"url\", \"etag\", \"lastModified\", \"validatorsUrl\"}, JSON arrays or strings, or bare URLs; - is stdin")
	progressPath := fs.String("progress", "", "`FILE` recording how far the list was sent, to resume (default: <urls>.sent.json; none for stdin)")
	window := fs.Int("window-mib", DefaultWindowBytes>>20, "MiB of the list grouped by host at once (the memory it takes)")
	msgKiB := fs.Int("message-kib", DefaultMessageBytes>>10, "largest message in KiB (capped by the queue's MaximumMessageSize)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "urldownloader send: unexpected arguments %q\n", fs.Args())
		return ExitUsage
	}
	if *stack == "" && *queue == "" {
		fmt.Fprintf(e.stderr, "urldownloader send: %v\n", errNoQueue)
		return ExitUsage
	}
	if *window < 1 || *msgKiB < minMessageBytes>>10 {
		fmt.Fprintf(e.stderr, "urldownloader send: --window-mib must be at least 1 and --message-kib at least %d\n", minMessageBytes>>10)
		return ExitUsage
	}
	list := e.stdin
	if *urls != "-" {
		f, err := os.Open(*urls)
		if err != nil {
			fmt.Fprintf(e.stderr, "urldownloader send: %v\n", err)
			return ExitUsage
		}
		defer f.Close()
		list = f
		if *progressPath == "" {
			*progressPath = *urls + ".sent.json"
		}
	} else if *progressPath == "" {
		fmt.Fprintln(e.stderr, "urldownloader send: reading stdin without --progress: a run stopped early cannot resume")
	}
	if *progressPath != "" {
		p, _ := filepath.Abs(*progressPath)
		*progressPath = p
	}
	cfg, err := e.aws(ctx, a)
	if err != nil {
		fmt.Fprintf(e.stderr, "urldownloader send: %v\n", err)
		return ExitError
	}
	ends, err := endpoints(ctx, cfg, *stack, Endpoints{InputQueue: *queue})
	if err != nil {
		fmt.Fprintf(e.stderr, "urldownloader send: %v\n", err)
		return ExitError
	}
	start := time.Now()
	rep, err := Send(ctx, SendOptions{
		SQS: sqs.NewFromConfig(cfg), QueueURL: ends.InputQueue, List: list, Progress: *progressPath,
		WindowBytes: *window << 20, MessageBytes: *msgKiB << 10,
		OnReject: func(r Rejected) { fmt.Fprintf(e.stderr, "line %d refused: %s\n", r.Line, r.Error) },
		OnWindow: func(r SendReport) {
			fmt.Fprintf(e.stderr, "sent %d URLs of %d lines in %d messages (%s)\n", r.URLs, r.Lines, r.Messages, time.Since(start).Round(time.Second))
		},
	})
	fmt.Fprintf(e.stdout, "sent %d URLs in %d messages (%d SendMessageBatch calls) to %s; %d lines read, %d refused", rep.URLs, rep.Messages, rep.Batches, ends.InputQueue, rep.Lines, rep.Rejected)
	if rep.Skipped > 0 {
		fmt.Fprintf(e.stdout, "; %d lines sent by earlier runs skipped", rep.Skipped)
	}
	fmt.Fprintln(e.stdout)
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(e.stderr, "urldownloader send: interrupted; the same command goes on where it stopped (%s)\n", *progressPath)
		return ExitInterrupted
	case err != nil:
		fmt.Fprintf(e.stderr, "urldownloader send: %v\n", err)
		return ExitError
	case rep.Rejected > 0:
		return ExitError
	}
	return ExitOK
}

func runReceive(ctx context.Context, args []string, e env) int {
	fs := flag.NewFlagSet("urldownloader receive", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var a awsFlags
	a.register(fs)
	stack := fs.String("stack", "", "the deployed stack's CloudFormation `NAME`: its OutputQueueUrl and BodyBucketName outputs")
	queue := fs.String("output-queue", "", "the output queue's `URL` (instead of, or over, --stack)")
	bucket := fs.String("bucket", "", "the body bucket's `NAME` (instead of, or over, --stack): bodies are read from it only")
	out := fs.String("out", "", "results `FILE`, JSON lines, appended to (required)")
	bodies := fs.String("bodies", "", "write stored bodies to this folder (`DIR`/sha256/<sha256>; the result's body names the file in \"path\")")
	inline := fs.Bool("inline", false, "put stored bodies into the results' data instead (each held in memory)")
	idle := fs.Duration("until-idle", 0, "stop after this long without a message (default: until Ctrl-C)")
	recentIDs := fs.Int("recent", DefaultRecent, "result ids remembered to drop duplicates")
	maxResults := fs.Int64("max", 0, "stop after writing this many results (default: no limit)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(e.stderr, "urldownloader receive: unexpected arguments %q\n", fs.Args())
		return ExitUsage
	case *stack == "" && *queue == "":
		fmt.Fprintf(e.stderr, "urldownloader receive: %v\n", errNoQueue)
		return ExitUsage
	case *out == "":
		fmt.Fprintln(e.stderr, "urldownloader receive: --out FILE is required (results are synced there before their messages are deleted)")
		return ExitUsage
	case *bodies != "" && *inline:
		fmt.Fprintln(e.stderr, "urldownloader receive: --bodies and --inline exclude each other")
		return ExitUsage
	case *idle < 0 || *recentIDs < 1 || *maxResults < 0:
		fmt.Fprintln(e.stderr, "urldownloader receive: --until-idle and --max must not be negative, --recent at least 1")
		return ExitUsage
	}
	cfg, err := e.aws(ctx, a)
	if err != nil {
		fmt.Fprintf(e.stderr, "urldownloader receive: %v\n", err)
		return ExitError
	}
	ends, err := endpoints(ctx, cfg, *stack, Endpoints{OutputQueue: *queue, BodyBucket: *bucket})
	if err != nil {
		fmt.Fprintf(e.stderr, "urldownloader receive: %v\n", err)
		return ExitError
	}
	o := ReceiveOptions{
		SQS: sqs.NewFromConfig(cfg), QueueURL: ends.OutputQueue, Out: *out,
		Bodies: *bodies, Inline: *inline, Bucket: ends.BodyBucket, UntilIdle: *idle, Recent: *recentIDs, Max: *maxResults,
		OnNote: func(s string) { fmt.Fprintln(e.stderr, s) },
	}
	if *bodies != "" || *inline {
		o.S3 = s3.NewFromConfig(cfg, func(o *s3.Options) {
			// An endpoint of one's own (moto) cannot resolve a bucket's
			// host name: address buckets by path.
			o.UsePathStyle = cfg.BaseEndpoint != nil
			// wholebody verifies every body's SHA-256 against its result;
			// the SDK's note that S3 sent no checksum of its own is noise.
			o.DisableLogOutputChecksumValidationSkipped = true
		})
	}
	rep, err := Receive(ctx, o)
	fmt.Fprintf(e.stdout, "wrote %d results to %s (%d duplicates dropped, %d bodies fetched, %d messages deleted, %d left on the queue)\n",
		rep.Written, *out, rep.Duplicates, rep.Bodies, rep.Deleted, rep.Left)
	switch {
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case err != nil:
		fmt.Fprintf(e.stderr, "urldownloader receive: %v\n", err)
		return ExitError
	}
	return ExitOK
}
