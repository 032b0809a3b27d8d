package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/billing"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
)

// sink stands in for the output queue's consumer side: an SQS endpoint on
// loopback that accepts SendMessageBatch as SQS does (JSON protocol, MD5s
// of the bodies) and records each result's ID. The publisher's requests
// still go through the SDK and HTTP and are counted; only moto's queue,
// whose cost grows with its length (see internal/moto's patches), is left out, together
// with a consumer receiving and deleting results, which is not part of the
// downloader.
type sink struct {
	srv *http.Server
	url *url.URL

	mu       sync.Mutex
	want     map[string]bool
	missing  int
	seen     map[string]int
	byStatus map[string]int
	dups     int
	sealed   bool
	closed   bool
	done     chan struct{}
}

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{seen: map[string]int{}, byStatus: map[string]int{}, done: make(chan struct{})}
	s.url = &url.URL{Scheme: "http", Host: ln.Addr().String()}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *sink) Close() { _ = s.srv.Close() }

// again makes the sink wait for a new set of IDs (add) after a drive
// ended: the refresh scenario's second drive waits for later results of
// the first one's URLs. The counts start again; results already seen
// stay seen.
func (s *sink) again() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want, s.missing, s.dups, s.sealed, s.closed = nil, 0, 0, false, false
	s.byStatus = map[string]int{}
	s.done = make(chan struct{})
}

// add adds IDs whose results the run waits for; seal says no more will
// come, so the run ends when all have arrived.
func (s *sink) add(ids map[string]urlmsg.Message, seal bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.want == nil {
		s.want = map[string]bool{}
	}
	for id := range ids {
		if !s.want[id] {
			s.want[id] = true
			if s.seen[id] == 0 {
				s.missing++
			}
		}
	}
	s.sealed = s.sealed || seal
	s.check()
}

func (s *sink) check() {
	if s.sealed && s.missing == 0 && !s.closed {
		s.closed = true
		close(s.done)
	}
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	type entry struct {
		ID          string `json:"Id"`
		MessageBody string `json:"MessageBody"`
	}
	var in struct {
		Entries     []entry `json:"Entries"`
		MessageBody string  `json:"MessageBody"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &in)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#InvalidRequest","message":"bad body"}`))
		return
	}
	md5hex := func(b string) string { h := md5.Sum([]byte(b)); return hex.EncodeToString(h[:]) }
	switch r.Header.Get("X-Amz-Target") {
	case "AmazonSQS.SendMessageBatch":
		type ok struct {
			ID               string `json:"Id"`
			MessageID        string `json:"MessageId"`
			MD5OfMessageBody string `json:"MD5OfMessageBody"`
		}
		out := struct {
			Successful []ok  `json:"Successful"`
			Failed     []any `json:"Failed"`
		}{Failed: []any{}}
		for _, e := range in.Entries {
			s.record(e.MessageBody)
			out.Successful = append(out.Successful, ok{ID: e.ID, MessageID: newMessageID(), MD5OfMessageBody: md5hex(e.MessageBody)})
		}
		_ = json.NewEncoder(w).Encode(out)
	case "AmazonSQS.SendMessage":
		s.record(in.MessageBody)
		_ = json.NewEncoder(w).Encode(map[string]string{"MessageId": newMessageID(), "MD5OfMessageBody": md5hex(in.MessageBody)})
	default:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.sqs#UnsupportedOperation","message":"the bench sink only takes sends"}`))
	}
}

var msgSeq atomic.Int64

func newMessageID() string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", msgSeq.Add(1))
}

func (s *sink) record(body string) {
	var r struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Seq    int    `json:"seq"`
	}
	_ = json.Unmarshal([]byte(body), &r)
	if r.Seq > 1 {
		// A refreshing URL's later results are results of their own
		// (refreshKey): the refresh scenario waits for them.
		r.ID = refreshKey(r.ID, r.Seq)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[r.ID]++
	if s.seen[r.ID] > 1 {
		s.dups++
		return
	}
	s.byStatus[r.Status]++
	if s.want[r.ID] {
		s.missing--
		s.check()
	}
}

// queueRedirect sends the SDK requests for one queue URL to another
// endpoint (the sink); the rest go where the client's config says.
type queueRedirect struct {
	queue    atomic.Value // string
	endpoint *url.URL
}

type redirectKey struct{}

func (q *queueRedirect) option(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("BenchRedirectMark", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			target, _ := q.queue.Load().(string)
			var u *string
			switch p := in.Parameters.(type) {
			case *sqs.SendMessageBatchInput:
				u = p.QueueUrl
			case *sqs.SendMessageInput:
				u = p.QueueUrl
			}
			if target != "" && u != nil && *u == target {
				ctx = middleware.WithStackValue(ctx, redirectKey{}, true)
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before); err != nil {
			return err
		}
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("BenchRedirect", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			if on, _ := middleware.GetStackValue(ctx, redirectKey{}).(bool); on {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					req.URL.Scheme, req.URL.Host = q.endpoint.Scheme, q.endpoint.Host
				}
			}
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
	})
}

// bench is one pipeline of the benchmark with its sink and, when metered,
// its billing meter and SQS counter.
type bench struct {
	p      *emulated.Pipeline
	ddbLat *latencies
	store  *countingStore
	// ingestStore counts the ingest function's store calls.
	ingestStore *countingStore
	sink        *sink
	meter       *billing.Meter
	counter     *billing.SQSCounter
	log         *slog.Logger
}

func (b *bench) Close() {
	b.p.Close()
	b.sink.Close()
}

// start brings up a pipeline on the run's moto whose output queue is the
// sink, with the template's defaults, the given fetch delay and
// cfg.Params; metered adds the billing middleware, mods shape the
// pipeline further.
func (e *benchEnv) start(ctx context.Context, name string, delay time.Duration, extra map[string]string, urlsPerMessage int, metered bool, mods ...func(*emulated.Options)) (*bench, error) {
	sk, err := startSink()
	if err != nil {
		return nil, err
	}
	b := &bench{sink: sk, log: e.log, ddbLat: &latencies{}}
	redirect := &queueRedirect{endpoint: sk.url}
	sqsOpts := []func(*sqs.Options){redirect.option}
	ddbOpts := []func(*dynamodb.Options){b.ddbLat.dynamo}
	if metered {
		awsCfg, err := moto.AWSConfig(ctx, e.moto.Endpoint)
		if err != nil {
			sk.Close()
			return nil, err
		}
		// The meter remembers every item it sees and reads on the side only
		// the first time it meets a key: all writers of the bench's tables
		// are metered, and moto is spared a read per write.
		// The refresh scenario names its queries by their items: a Query of
		// a host's refresh items is per refresh, not background.
		b.meter = billing.NewMeterWith(dynamodb.NewFromConfig(awsCfg), kindOf, billing.MeterOptions{Remember: true, QueryKinds: name == "refresh"})
		b.counter = billing.NewSQSCounter(nil)
		ddbOpts = append(ddbOpts, b.meter.Option)
		sqsOpts = append(sqsOpts, b.counter.Option)
	}
	p, err := e.pipeline(ctx, name, delay, extra, func(o *emulated.Options) {
		o.DynamoOptions, o.SQSOptions = ddbOpts, sqsOpts
		if urlsPerMessage > 0 {
			o.URLsPerMessage = urlsPerMessage
		}
		for _, m := range mods {
			m(o)
		}
	})
	if err != nil {
		sk.Close()
		return nil, err
	}
	b.p = p
	// Count the domain's store calls, in both functions (each has its
	// own store client, as on AWS).
	svc, isvc := p.Services(), p.IngestServices()
	b.store = &countingStore{Store: svc.Store}
	b.ingestStore = &countingStore{Store: isvc.Store}
	svc.Engine.Store, isvc.Ingester.Store = b.store, b.ingestStore
	redirect.queue.Store(p.Stack.OutputQueueURL)
	if b.counter != nil {
		b.counter.Name(p.Stack.InputQueueURL, "input")
		b.counter.Name(p.Stack.OutputQueueURL, "output")
		b.counter.Name(p.Stack.InputDLQURL, "input-dlq")
		b.counter.Name(p.Stack.WakeEventSource.QueueURL, "wake")
	}
	return b, nil
}

// driveReport is what a drive did.
type driveReport struct {
	ByStatus          map[string]int
	Duplicates        int
	IngestInvocations int
	IngestRecords     int
	CheckInvocations  int
	// WakeInvocations are check invocations made by the wake queue.
	WakeInvocations int
	Missing         int
	// IngestedAt is when the last ingest turn that took records ended.
	IngestedAt time.Time
	// DoneAt is when the last result arrived (before the invocations in
	// flight were stopped).
	DoneAt time.Time
	// HandedAt is when driveIdle began handing the URLs over.
	HandedAt time.Time
}

// feedFunc is a producer called before each event source mapping turn with
// the records ingested so far; it returns the IDs of what it sent and
// whether it is done.
type feedFunc func(ctx context.Context, ingested int) (sent map[string]urlmsg.Message, last bool, err error)

// scheduleEvery is the template's schedule, rate(1 minute).
const scheduleEvery = time.Minute

// drive runs the pipeline the way AWS would: the input queue's event source
// mapping (IngestOnce, after feed), each shard's scheduled check invocation
// once a minute, and the wake queue's invocations, until the sink has a
// result for every expected ID or ctx ends.
func (b *bench) drive(ctx context.Context, expected map[string]urlmsg.Message, feed feedFunc) (driveReport, error) {
	return b.driveWith(ctx, expected, feed, nil)
}

// handOverFunc gives the URLs to a running, idle deployment and returns
// what it accepted.
type handOverFunc func(ctx context.Context) (map[string]urlmsg.Message, error)

// driveIdle runs the pipeline as an idle deployment (every shard's first
// scheduled invocation has found nothing and ended) that then receives the
// URLs from handOver: what a user meets when URLs arrive. HandedAt is when
// handOver began.
func (b *bench) driveIdle(ctx context.Context, handOver handOverFunc) (driveReport, error) {
	return b.driveWith(ctx, nil, nil, handOver)
}

func (b *bench) driveWith(ctx context.Context, expected map[string]urlmsg.Message, feed feedFunc, handOver handOverFunc) (driveReport, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.sink.add(expected, feed == nil && handOver == nil)
	total := len(expected)
	svc := b.p.Services()
	var rep driveReport
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	// The input queue's event source mapping, one batch at a time (the
	// producer's feed first). Lambda reads a standard queue with five
	// pollers at first; on moto (one Python process) concurrent receives
	// slow each other down to batches of a few hundred records spread over
	// minutes, so the mapping is emulated sequentially: larger batches,
	// arriving one after the other.
	wg.Add(1)
	go func() {
		defer wg.Done()
		ingested := 0
		for ctx.Err() == nil {
			if feed != nil {
				more, last, err := feed(ctx, ingested)
				if err != nil {
					select {
					case errc <- err:
					default:
					}
					cancel()
					return
				}
				mu.Lock()
				total += len(more)
				mu.Unlock()
				b.sink.add(more, last)
				if last {
					feed = nil
				}
			}
			began := time.Now()
			n, failed, err := b.p.IngestOnce(ctx)
			if err != nil && ctx.Err() == nil {
				b.log.Warn("ingest turn", "error", err)
				time.Sleep(200 * time.Millisecond)
			}
			ingested += n - failed
			if n > 0 {
				b.log.Info("ingest batch", "records", n, "failed", failed, "took", time.Since(began).Round(time.Millisecond))
				mu.Lock()
				rep.IngestInvocations++
				rep.IngestRecords += n
				rep.IngestedAt = time.Now()
				mu.Unlock()
			}
		}
	}()
	run := 55 * time.Second
	if s, err := strconv.Atoi(b.p.Stack.Env()["CHECK_RUN_SECONDS"]); err == nil && s > 0 {
		run = time.Duration(s) * time.Second
	}
	// The wake queue's event source mapping: ingest wakes idle shards.
	wg.Add(1)
	go func() { defer wg.Done(); b.p.ServeWakes(ctx) }()
	var firstRuns sync.WaitGroup
	for s := 0; s < svc.Config.ShardCount; s++ {
		h := svc.CheckHandler(run)
		h.Log = slog.New(slog.DiscardHandler)
		wg.Add(1)
		firstRuns.Add(1)
		go func() {
			defer wg.Done()
			first := true
			defer func() {
				if first {
					firstRuns.Done()
				}
			}()
			for ctx.Err() == nil {
				began := time.Now()
				ictx, icancel := context.WithTimeout(ctx, run+checkhandler.DeadlineMargin+15*time.Second)
				_, err := h.Handle(ictx, checkhandler.Event{Shard: &s})
				icancel()
				mu.Lock()
				rep.CheckInvocations++
				mu.Unlock()
				if err != nil && ctx.Err() == nil {
					b.log.Warn("check invocation", "shard", s, "error", err)
				}
				if first {
					first = false
					firstRuns.Done()
				}
				// EventBridge's rate(1 minute): the next one a minute after
				// this one began, however soon it ended.
				select {
				case <-ctx.Done():
				case <-time.After(time.Until(began.Add(scheduleEvery))):
				}
			}
		}()
	}
	if handOver != nil {
		firstRuns.Wait()
		rep.HandedAt = time.Now()
		more, err := handOver(ctx)
		if err != nil {
			cancel()
			wg.Wait()
			return rep, fmt.Errorf("hand over: %w", err)
		}
		mu.Lock()
		total += len(more)
		mu.Unlock()
		b.sink.add(more, true)
	}
	var err error
	select {
	case <-b.sink.done:
		rep.DoneAt = time.Now()
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	wg.Wait()
	b.sink.mu.Lock()
	rep.ByStatus = map[string]int{}
	for k, v := range b.sink.byStatus {
		rep.ByStatus[k] = v
	}
	rep.Duplicates, rep.Missing = b.sink.dups, b.sink.missing
	rep.WakeInvocations = b.p.WakeInvocations()
	b.sink.mu.Unlock()
	if err == nil && rep.Missing > 0 {
		err = fmt.Errorf("%d of %d urls have no result", rep.Missing, total)
	}
	if err != nil {
		return rep, fmt.Errorf("%w (%d of %d results)", err, total-rep.Missing, total)
	}
	return rep, nil
}

// send queues urls on the input queue as a producer would.
func (b *bench) send(ctx context.Context, urls []string) (map[string]urlmsg.Message, error) {
	return b.handOver(ctx, urls, b.p.Send)
}

// post hands urls over through POST /urls, the synchronous entry: they are
// in the store when it returns.
func (b *bench) post(ctx context.Context, urls []string) (map[string]urlmsg.Message, error) {
	return b.handOver(ctx, urls, b.p.Post)
}

func (b *bench) handOver(ctx context.Context, urls []string, via func(context.Context, []urlmsg.Input) (emulated.Sent, error)) (map[string]urlmsg.Message, error) {
	items := make([]urlmsg.Input, len(urls))
	for i, u := range urls {
		items[i] = urlmsg.Input{URL: u}
	}
	sent, err := via(ctx, items)
	if err != nil {
		return nil, err
	}
	if len(sent.Rejected) > 0 {
		return nil, fmt.Errorf("%d urls rejected, first: %+v", len(sent.Rejected), sent.Rejected[0])
	}
	return sent.Expected, nil
}
