// Package emulated runs the whole downloader on the embedded local stack: moto
// for DynamoDB, SQS and SSM, the resources of template.yaml created on it,
// the real ingest and check handlers driven the way AWS drives them (an SQS
// event source mapping for ingest, a schedule per shard for check), and a
// collector on the output queue. The local runner, the end-to-end tests and
// the benchmarks all use it.
package emulated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/urldownloader/urldownloader/infra/faults"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/config"
	"github.com/urldownloader/urldownloader/shared/aws/ssmparams"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/runtime/wiring"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// Options shape a local pipeline.
type Options struct {
	// Endpoint of a running moto; empty starts one for the pipeline, with
	// internal/moto's patches (a moto started elsewhere has them only if it
	// was started with moto.Start).
	Endpoint string
	// Prefix names the resources, so pipelines can share one moto.
	Prefix string
	// ShardCount overrides the template's default.
	ShardCount int
	// Params override the template's parameter defaults (name -> value).
	Params map[string]string
	// TemplateParams override template parameters (e.g.
	// "OutputMaxMessageBytes"), as a deploy's --parameter-overrides do.
	TemplateParams map[string]string
	// Addresses is the functions' address policy (fetch.AddressPolicy), in
	// place of the template's closed one: local mode's --allow-net and
	// --allow-private, whose names its denials give.
	Addresses fetch.AddressPolicy
	// Resolve, when set, resolves host names from this table instead of
	// DNS, as curl's --resolve does (see fetch.Options.Resolve): local
	// sites get real-looking names, a name missing from it is "no such
	// host", and no DNS query leaves the machine.
	Resolve map[string][]netip.Addr
	// CheckRun is how long one check invocation starts requests; locally
	// invocations run back to back, like a schedule that fires at once.
	CheckRun time.Duration
	// ParamTTL is the parameter cache's TTL (default 2s locally so --param
	// changes made during a run show quickly).
	ParamTTL time.Duration
	// URLsPerMessage packs this many URLs into one input SQS message
	// (payloads may be arrays); default 50.
	URLsPerMessage int
	Log            *slog.Logger
	// DynamoOptions and SQSOptions are applied to the pipeline's SDK
	// clients (the benchmark's billing middleware goes here).
	DynamoOptions []func(*dynamodb.Options)
	SQSOptions    []func(*sqs.Options)
	// S3Options are applied to the check function's body store client.
	S3Options []func(*s3.Options)
	// Faults, when set, makes the run hostile (see package faults).
	Faults *faults.Injector
	// MaxConns, when above zero, caps the connections the check
	// invocations' fetchers hold open (engine.Budget.Conns, which also
	// bounds their workers). Every invocation runs in this process, where
	// on Lambda each has its own 1,024 descriptors, and a fetcher keeps a
	// connection idle for each host with URLs left: a caller that also
	// serves the sites from this process holds both ends of each.
	MaxConns int
	// IngestBatchSize overrides the template's event source mapping batch
	// size (fault runs use small batches for more ingest invocations).
	IngestBatchSize int
	// IngestBatchingWindow, when above zero, replaces the mapping's
	// MaximumBatchingWindowInSeconds (5s in the template): tests that are
	// not about batching gather a batch for less long.
	IngestBatchingWindow time.Duration
	// LambdaConcurrency is the account's concurrent executions quota that
	// both functions' invocations share (see concurrency.go); beyond it an
	// invocation is refused as Lambda throttles it. Zero takes
	// $MOTO_STRICT_LAMBDA_CONCURRENCY, else AWS's default of 1,000.
	LambdaConcurrency int
	// ScheduleEvery, when set, starts each shard's scheduled invocations
	// that far apart, as EventBridge's rate(1 minute) does (idle shards
	// then rely on the wake queue). Zero runs them back to back, with a
	// short pause after an idle one: quick local runs and tests.
	ScheduleEvery time.Duration
	// PlaceByName places every host in the virtual shard of its name, as
	// before hosts were placed by their server's address (no lookup at
	// ingest, no move at check): the billing benchmark's baseline.
	PlaceByName bool
}

// faultDefaults shapes a fault run: more, smaller invocations give the
// faults more chances to hit, and short requests keep the shard leases that
// killed invocations leave behind short (a lease covers the longest request
// a worker may start). Values set by the caller win.
func faultDefaults(opts *Options) {
	if opts.IngestBatchSize == 0 {
		opts.IngestBatchSize = 10
	}
	if opts.URLsPerMessage == 0 {
		opts.URLsPerMessage = 5
	}
	if opts.CheckRun == 0 {
		opts.CheckRun = 3 * time.Second
	}
	ps := maps.Clone(opts.Params)
	if ps == nil {
		ps = map[string]string{}
	}
	for name, v := range map[string]string{"FetchTimeout": "3s", "MaxCrawlDelay": "2s", "CheckHostPeriod": "2s"} {
		if _, set := ps[name]; !set {
			ps[name] = v
		}
	}
	opts.Params = ps
}

// Pipeline is a running local downloader.
type Pipeline struct {
	opts  Options
	moto  *moto.Server
	Stack *stack.Stack
	AWS   aws.Config
	sqs   *sqs.Client
	svc   *wiring.Services
	// ingestSvc are the ingest function's own services: on AWS the two
	// functions share no client, connection pool or cache.
	ingestSvc *wiring.Services
	ingest    *ingesthandler.Handler
	check     *checkhandler.Handler
	esm       stack.EventSourceMapping
	wakes     atomic.Int64
	lambda    *concurrency
	posts     atomic.Int64
	log       *slog.Logger

	// accepted is when ingest first accepted a URL of each host (returned
	// success for its record): where docs/guarantees.md's time bounds start.
	acceptedMu sync.Mutex
	accepted   map[string]time.Time
}

// Start brings up the stack and wires the handlers.
func Start(ctx context.Context, opts Options) (*Pipeline, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if opts.Faults != nil {
		faultDefaults(&opts)
	}
	if opts.CheckRun <= 0 {
		opts.CheckRun = 20 * time.Second
	}
	if opts.ParamTTL <= 0 {
		opts.ParamTTL = 2 * time.Second
	}
	if opts.URLsPerMessage <= 0 {
		opts.URLsPerMessage = 50
	}
	if opts.Prefix == "" {
		opts.Prefix = "local" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	}
	conc, err := lambdaConcurrency(opts.LambdaConcurrency)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{opts: opts, log: opts.Log, lambda: newConcurrency(conc)}
	endpoint := opts.Endpoint
	if endpoint == "" {
		srv, err := moto.Start(ctx)
		if err != nil {
			return nil, fmt.Errorf("start moto: %w", err)
		}
		p.moto = srv
		endpoint = srv.Endpoint
	}
	awsCfg, err := moto.AWSConfig(ctx, endpoint)
	if err != nil {
		p.Close()
		return nil, err
	}
	p.AWS = awsCfg
	tpl, err := stack.Load("")
	if err != nil {
		p.Close()
		return nil, err
	}
	st, err := tpl.Deploy(ctx, awsCfg, stack.Options{Prefix: opts.Prefix, ShardCount: opts.ShardCount, ParamOverrides: opts.Params, TemplateParams: opts.TemplateParams})
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("create local stack: %w", err)
	}
	p.Stack = st
	p.esm = st.IngestEventSource
	if opts.IngestBatchSize > 0 {
		p.esm.BatchSize = opts.IngestBatchSize
	}
	env := st.Env()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		p.Close()
		return nil, err
	}
	cfg.Addresses = opts.Addresses
	svcOpts := wiring.Options{ParamTTL: opts.ParamTTL, Log: opts.Log, DynamoOptions: opts.DynamoOptions, SQSOptions: opts.SQSOptions,
		S3Options: opts.S3Options, Resolve: opts.Resolve, Budget: engine.Budget{Conns: opts.MaxConns}}
	if opts.Faults != nil {
		// Faults hit the functions' clients only; the runner's own client
		// (standing in for producers and the event source mapping) is clean.
		svcOpts.DynamoOptions = append(slices.Clone(svcOpts.DynamoOptions), opts.Faults.DynamoDBOptions)
		svcOpts.SQSOptions = append(slices.Clone(svcOpts.SQSOptions), opts.Faults.SQSOptions)
	}
	p.svc = wiring.New(awsCfg, cfg, svcOpts)
	ingestCfg, err := moto.AWSConfig(ctx, endpoint)
	if err != nil {
		p.Close()
		return nil, err
	}
	p.ingestSvc = wiring.New(ingestCfg, cfg, svcOpts)
	if opts.Faults != nil {
		// Short leases so a killed invocation's shards are taken over
		// quickly; the engine still stretches them to cover the longest
		// request it may start (fencing).
		p.svc.Engine.LeaseTTL = 3 * time.Second
	}
	p.sqs = sqs.NewFromConfig(awsCfg, opts.SQSOptions...)
	// Wired as the deployed functions' main.go files wire them, through
	// the same constructors.
	p.ingest = p.ingestSvc.IngestHandler()
	p.check = p.svc.CheckHandler(opts.CheckRun)
	if opts.PlaceByName {
		p.ingest.Resolver, p.svc.Engine.Placement = nil, nil
	}
	return p, nil
}

// Services exposes the check function's wired services (tests inspect the
// store through it).
func (p *Pipeline) Services() *wiring.Services { return p.svc }

// IngestServices are the ingest function's wired services (its own
// clients, as on AWS).
func (p *Pipeline) IngestServices() *wiring.Services { return p.ingestSvc }

// SQS is the pipeline's SQS client (tests read the queues).
func (p *Pipeline) SQS() *sqs.Client { return p.sqs }

// SetParam changes a runtime parameter in SSM while the pipeline runs; the
// functions pick it up within the parameter cache's TTL, with no restart.
func (p *Pipeline) SetParam(ctx context.Context, name, value string) error {
	return ssmparams.Seed(ctx, ssm.NewFromConfig(p.AWS), p.Stack.ParamPath, map[string]string{name: value})
}

// Close stops moto when the pipeline started it.
func (p *Pipeline) Close() {
	if p.ingestSvc != nil {
		p.ingestSvc.Publisher.Close()
	}
	if p.svc != nil {
		p.svc.Publisher.Close()
	}
	if p.moto != nil {
		p.moto.Close()
	}
}

// Sent is what Send queued: the IDs the downloader will give each accepted
// URL (computed with the same function the ingest uses), and the lines it
// refused before sending.
type Sent struct {
	Expected map[string]urlmsg.Message
	Rejected []urlmsg.ItemError
}

// Send validates items like a careful producer (invalid ones are reported,
// not sent, because one bad item fails its whole record) and sends the rest
// to the input queue, URLsPerMessage per message, ten messages per request.
func (p *Pipeline) Send(ctx context.Context, items []urlmsg.Input) (Sent, error) {
	sent := Sent{Expected: map[string]urlmsg.Message{}}
	var good []urlmsg.Input
	for i, in := range items {
		if _, err := urlmsg.Validate(in); err != nil {
			sent.Rejected = append(sent.Rejected, urlmsg.ItemError{Index: i, URL: in.URL, Error: err.Error()})
			continue
		}
		good = append(good, in)
	}
	var bodies []string
	for chunk := range slices.Chunk(good, p.opts.URLsPerMessage) {
		b, err := json.Marshal(chunk)
		if err != nil {
			return sent, fmt.Errorf("encode input message: %w", err)
		}
		bodies = append(bodies, string(b))
	}
	for batch := range slices.Chunk(bodies, 10) {
		entries := make([]sqstypes.SendMessageBatchRequestEntry, len(batch))
		for i, b := range batch {
			entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)}
		}
		out, err := p.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &p.Stack.InputQueueURL, Entries: entries})
		if err != nil {
			return sent, fmt.Errorf("send %d input messages: %w", len(entries), err)
		}
		if len(out.Failed) > 0 {
			f := out.Failed[0]
			return sent, fmt.Errorf("send input messages: %d refused, first: %s %s", len(out.Failed), aws.ToString(f.Code), aws.ToString(f.Message))
		}
		for _, ok := range out.Successful {
			i, _ := strconv.Atoi(aws.ToString(ok.Id))
			msgs, _, err := urlmsg.Parse(aws.ToString(ok.MessageId), []byte(batch[i]))
			if err != nil {
				return sent, fmt.Errorf("re-parse sent message: %w", err)
			}
			for _, m := range msgs {
				sent.Expected[m.ID] = m
			}
		}
	}
	return sent, nil
}

// Report is the outcome of a run.
type Report struct {
	Expected   int                   `json:"expected"`
	Results    int                   `json:"results"`
	ByStatus   map[result.Status]int `json:"byStatus"`
	Duplicates int                   `json:"duplicates"`
	Missing    []string              `json:"missing,omitempty"`
	Elapsed    time.Duration         `json:"elapsed"`
	// Ingest and check invocation counts, and input records that failed.
	IngestInvocations int `json:"ingestInvocations"`
	CheckInvocations  int `json:"checkInvocations"`
	// WakeInvocations are the check invocations made by wake-ups (the
	// others are scheduled).
	WakeInvocations int `json:"wakeInvocations"`
	FailedRecords   int `json:"failedRecords"`
	// Throttles counts the invocations refused for want of Lambda
	// concurrency (Options.LambdaConcurrency), retried later.
	Throttles int64 `json:"throttles,omitempty"`
	// Faults counts the injected faults by kind (fault runs only).
	Faults map[faults.Kind]int `json:"faults,omitempty"`
}

// Run drives ingest and check until every expected ID (and every
// cross-host redirect target it spawns) has a result, or ctx ends. Each
// result is passed to emit as it arrives.
func (p *Pipeline) Run(ctx context.Context, expected map[string]urlmsg.Message, emit func(result.Result, []byte)) (Report, error) {
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &collector{want: map[string]bool{}, seen: map[string]int{}, report: Report{ByStatus: map[result.Status]int{}}}
	for id := range expected {
		c.want[id] = true
	}
	c.report.Expected = len(c.want)
	var wg sync.WaitGroup
	wg.Add(3 + p.svc.Config.ShardCount)
	go func() { defer wg.Done(); p.pollInput(ctx, c) }()
	go func() { defer wg.Done(); p.ServeWakes(ctx) }()
	for s := 0; s < p.svc.Config.ShardCount; s++ {
		go func() { defer wg.Done(); p.schedule(ctx, s, c) }()
	}
	errc := make(chan error, 1)
	go func() {
		defer wg.Done()
		errc <- p.collect(ctx, c, emit, cancel)
	}()
	wg.Wait()
	err := <-errc
	c.mu.Lock()
	defer c.mu.Unlock()
	c.report.Elapsed = time.Since(start)
	c.report.Throttles = p.lambda.throttled.Load()
	c.report.WakeInvocations = p.WakeInvocations()
	c.report.Faults = p.opts.Faults.Counts()
	for id := range c.want {
		if c.seen[id] == 0 {
			c.report.Missing = append(c.report.Missing, id)
		}
	}
	slices.Sort(c.report.Missing)
	if err == nil && len(c.report.Missing) > 0 {
		err = fmt.Errorf("%d of %d urls have no result", len(c.report.Missing), len(c.want))
	}
	return c.report, err
}

type collector struct {
	mu     sync.Mutex
	want   map[string]bool
	seen   map[string]int
	report Report
}

func (c *collector) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.want {
		if c.seen[id] == 0 {
			return false
		}
	}
	return true
}

// pollInput is the SQS event source mapping, polling until ctx ends.
func (p *Pipeline) pollInput(ctx context.Context, c *collector) {
	for ctx.Err() == nil {
		n, failed, err := p.IngestOnce(ctx)
		if err != nil && ctx.Err() == nil {
			p.log.Error("ingest poll", "error", err)
			time.Sleep(200 * time.Millisecond)
		}
		if n > 0 {
			c.mu.Lock()
			c.report.IngestInvocations++
			c.report.FailedRecords += failed
			c.mu.Unlock()
		}
	}
}

// IngestOnce is one turn of the SQS event source mapping: it gathers up to
// BatchSize messages within the batching window, invokes ingest, deletes
// what succeeded and leaves the reported failures on the queue. A failed
// record is made visible again after a second instead of the queue's
// visibility timeout, to keep local runs short; its receive count still
// grows, so moto's redrive moves it to the dead-letter queue after
// maxReceiveCount, as SQS does. It returns the records handled and failed.
func (p *Pipeline) IngestOnce(ctx context.Context) (records, failedRecords int, err error) {
	const retryDelay = 1
	batchSize := max(p.esm.BatchSize, 1)
	window := time.Duration(p.esm.MaximumBatchingWindowInSeconds) * time.Second
	if p.opts.IngestBatchingWindow > 0 {
		window = p.opts.IngestBatchingWindow
	}
	var msgs []sqstypes.Message
	var first time.Time
	payload, largest := 0, 0
	for len(msgs) < batchSize && ctx.Err() == nil {
		wait := int32(1)
		if len(msgs) > 0 {
			wait = 0
		}
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &p.Stack.InputQueueURL, MaxNumberOfMessages: int32(min(10, batchSize-len(msgs))),
			WaitTimeSeconds: wait, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if len(msgs) == 0 {
				return 0, 0, fmt.Errorf("receive input: %w", err)
			}
			break
		}
		if len(out.Messages) == 0 {
			if len(msgs) == 0 || window == 0 || time.Since(first) >= window {
				break
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if len(msgs) == 0 {
			first = time.Now()
		}
		msgs = append(msgs, out.Messages...)
		for _, m := range out.Messages {
			n := recordSize(m)
			payload += n
			largest = max(largest, n)
		}
		// Stop before one more receive (ten records) could cross the limit.
		if window > 0 && time.Since(first) >= window || payload+10*largest >= maxBatchPayload {
			break
		}
	}
	if len(msgs) == 0 {
		return 0, 0, nil
	}
	ev := events.SQSEvent{}
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:input", AWSRegion: "us-east-1",
		})
	}
	inv := p.opts.Faults
	var resp events.SQSEventResponse
	// Throttled: the mapping's poller keeps the batch and tries the
	// invocation again shortly, counting each refusal. (Handing the batch
	// back at once, as the emulation did, let four back-to-back check
	// loops refuse ingest five times in seconds and send valid records to
	// the DLQ, a starvation AWS's minute-apart schedules make far slower.)
	for !p.lambda.acquire() {
		select {
		case <-ctx.Done():
			p.releaseInput(ctx, msgs, retryDelay)
			return 0, 0, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer p.lambda.release()
	if inv.Fire(faults.IngestCrash, 1) {
		// Killed mid-batch: some hosts may be written, the response is
		// lost, and every record comes back.
		cctx, cancel := context.WithTimeout(ctx, time.Duration(inv.Pick(faults.IngestCrash, 50))*time.Millisecond)
		_, _ = p.ingest.HandleSQS(cctx, ev)
		cancel()
		err = errors.New("ingest invocation killed (injected fault)")
	} else {
		resp, err = p.ingest.HandleSQS(ctx, ev)
	}
	redeliver := err == nil && inv.Fire(faults.InputRedelivery, 1)
	failed := map[string]bool{}
	if err != nil {
		p.log.Error("ingest invocation failed", "error", err)
		for _, r := range ev.Records {
			failed[r.MessageId] = true
		}
	}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	p.noteAccepted(ev.Records, failed)
	var del []sqstypes.DeleteMessageBatchRequestEntry
	var retry []sqstypes.ChangeMessageVisibilityBatchRequestEntry
	for i, m := range msgs {
		id := aws.String(strconv.Itoa(i))
		if failed[aws.ToString(m.MessageId)] || redeliver {
			retry = append(retry, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: id, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: retryDelay})
		} else {
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: id, ReceiptHandle: m.ReceiptHandle})
		}
	}
	dctx := context.WithoutCancel(ctx)
	for b := range slices.Chunk(del, 10) {
		if _, err := p.sqs.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: &p.Stack.InputQueueURL, Entries: b}); err != nil {
			return len(msgs), len(failed), fmt.Errorf("delete input messages: %w", err)
		}
	}
	for b := range slices.Chunk(retry, 10) {
		if _, err := p.sqs.ChangeMessageVisibilityBatch(dctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &p.Stack.InputQueueURL, Entries: b}); err != nil {
			return len(msgs), len(failed), fmt.Errorf("release failed input messages: %w", err)
		}
	}
	return len(msgs), len(failed), nil
}

// noteAccepted records the acceptance time of the hosts whose URLs came in
// the records ingest did not report as failed.
// releaseInput makes input messages visible again after delay seconds.
func (p *Pipeline) releaseInput(ctx context.Context, msgs []sqstypes.Message, delay int32) {
	var retry []sqstypes.ChangeMessageVisibilityBatchRequestEntry
	for i, m := range msgs {
		retry = append(retry, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: delay})
	}
	for b := range slices.Chunk(retry, 10) {
		if _, err := p.sqs.ChangeMessageVisibilityBatch(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &p.Stack.InputQueueURL, Entries: b}); err != nil {
			p.log.Error("release throttled input messages", "error", err)
		}
	}
}

func (p *Pipeline) noteAccepted(records []events.SQSMessage, failed map[string]bool) {
	now := time.Now()
	p.acceptedMu.Lock()
	defer p.acceptedMu.Unlock()
	if p.accepted == nil {
		p.accepted = map[string]time.Time{}
	}
	for _, r := range records {
		if failed[r.MessageId] {
			continue
		}
		msgs, _, err := urlmsg.Parse(r.MessageId, []byte(r.Body))
		if err != nil {
			continue
		}
		for _, m := range msgs {
			if _, ok := p.accepted[m.Host]; !ok {
				p.accepted[m.Host] = now
			}
		}
	}
}

// AcceptedAt is when ingest first accepted a URL of host through the input
// queue (false when none was).
func (p *Pipeline) AcceptedAt(host string) (time.Time, bool) {
	p.acceptedMu.Lock()
	defer p.acceptedMu.Unlock()
	t, ok := p.accepted[host]
	return t, ok
}

// maxBatchPayload is Lambda's limit on a synchronous invocation's event,
// which caps an SQS event source mapping's batch whatever its BatchSize.
const maxBatchPayload = 6 << 20

// recordSize is a message's share of the event JSON: its body and ids plus
// the record's fixed fields and attributes.
func recordSize(m sqstypes.Message) int {
	n := len(aws.ToString(m.Body)) + len(aws.ToString(m.ReceiptHandle)) + len(aws.ToString(m.MessageId)) + 500
	for k, v := range m.Attributes {
		n += len(k) + len(v) + 6
	}
	return n
}

// schedule invokes check for one shard back to back, each invocation with
// the function's deadline, as EventBridge would once a minute.
func (p *Pipeline) schedule(ctx context.Context, shard int, c *collector) {
	for ctx.Err() == nil {
		ictx, cancel := context.WithTimeout(ctx, p.opts.CheckRun+checkhandler.DeadlineMargin+15*time.Second)
		var dup sync.WaitGroup
		if p.opts.Faults.Fire(faults.DuplicateSchedule, 1) && p.lambda.acquire() {
			// EventBridge delivers at least once: the same shard twice.
			dup.Add(1)
			go func() {
				defer dup.Done()
				defer p.lambda.release()
				_, _ = p.check.Handle(p.opts.Faults.CheckCrash(ictx), checkhandler.Event{Shard: &shard})
			}()
		}
		began := time.Now()
		if !p.lambda.acquire() {
			// Throttled: EventBridge retries the event later.
			dup.Wait()
			cancel()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		_, err := p.check.Handle(p.opts.Faults.CheckCrash(ictx), checkhandler.Event{Shard: &shard})
		p.lambda.release()
		dup.Wait()
		cancel()
		if p.opts.ScheduleEvery > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(began.Add(p.opts.ScheduleEvery))):
			}
		} else if time.Since(began) < time.Second {
			// An idle invocation ends at once; EventBridge would wait a
			// minute, locally a short pause keeps the loop from spinning.
			time.Sleep(300 * time.Millisecond)
		}
		c.mu.Lock()
		c.report.CheckInvocations++
		c.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			p.log.Error("check invocation failed", "shard", shard, "error", err)
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// collect reads the output queue until every wanted ID has a result.
func (p *Pipeline) collect(ctx context.Context, c *collector, emit func(result.Result, []byte), stop func()) error {
	for {
		if c.done() {
			stop()
			return nil
		}
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &p.Stack.OutputQueueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("receive results: %w", err)
		}
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			body := []byte(aws.ToString(m.Body))
			var r result.Result
			if err := json.Unmarshal(body, &r); err != nil {
				return fmt.Errorf("output message is not a result: %w", err)
			}
			c.mu.Lock()
			c.seen[r.ID]++
			if c.seen[r.ID] > 1 {
				c.report.Duplicates++
			} else {
				c.report.ByStatus[r.Status]++
			}
			c.report.Results++
			if r.Status == result.StatusRedirect && r.Error == "" && r.Location != "" && c.want[r.ID] {
				c.want[urlmsg.MakeID(r.ID, 0, r.Location)] = true
			}
			c.mu.Unlock()
			if emit != nil {
				emit(r, body)
			}
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(del) > 0 {
			if _, err := p.sqs.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: &p.Stack.OutputQueueURL, Entries: del}); err != nil {
				return fmt.Errorf("delete results: %w", err)
			}
		}
	}
}

// Missing describes the expected URLs still without a result.
func Missing(expected map[string]urlmsg.Message, ids []string) []urlmsg.Message {
	var out []urlmsg.Message
	for _, id := range ids {
		if m, ok := expected[id]; ok {
			out = append(out, m)
		}
	}
	return out
}
