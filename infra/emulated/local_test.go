package emulated_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// start brings up a pipeline on the shared moto, or the one at
// opts.Endpoint, with a unique prefix. Input
// batches gather for 500ms unless opts says otherwise (the template's 5s
// would hold up every test's first ingest).
func start(t *testing.T, opts emulated.Options) *emulated.Pipeline {
	t.Helper()
	if opts.IngestBatchingWindow == 0 {
		opts.IngestBatchingWindow = 500 * time.Millisecond
	}
	srv := &moto.Server{Endpoint: opts.Endpoint} // a test's own moto
	if srv.Endpoint == "" {
		srv = moto.Shared(t)
	}
	opts.Endpoint = srv.Endpoint
	if opts.Log == nil && os.Getenv("LOCAL_LOG") != "" {
		// The functions' logs, to see what a failing run did.
		opts.Log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	name := strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())
	if len(name) > 24 {
		name = name[:24]
	}
	opts.Prefix = fmt.Sprintf("%s-%d", name, time.Now().UnixNano()%1e6)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := emulated.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start pipeline: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func inputs(urls []string) []urlmsg.Input {
	out := make([]urlmsg.Input, len(urls))
	for i, u := range urls {
		out[i] = urlmsg.Input{URL: u}
	}
	return out
}

// runAll sends items and runs the pipeline until every one has a result.
func runAll(t *testing.T, p *emulated.Pipeline, items []urlmsg.Input, timeout time.Duration) (emulated.Report, map[string]result.Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sent, err := p.Send(ctx, items)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	if len(sent.Rejected) > 0 {
		t.Fatalf("rejected before sending: %+v", sent.Rejected)
	}
	return runExpected(ctx, t, p, sent.Expected)
}

// noRedelivery turns the strict layer's redelivery of deleted input
// messages (SQS's at-least-once, a 0.5% draw) off for p's input queue, for
// a test that counts duplicates exactly: a redelivered message is ingested
// again and its URLs come out twice, as the guarantees allow.
func noRedelivery(t *testing.T, p *emulated.Pipeline) {
	t.Helper()
	q := p.Stack.InputQueueURL
	if err := moto.SetStrictQueue(t.Context(), aws.ToString(p.AWS.BaseEndpoint), q[strings.LastIndex(q, "/")+1:], map[string]any{moto.KnobSQSRedeliverShare: 0}); err != nil {
		t.Fatal(err)
	}
}

// runExpected runs the pipeline until every expected ID has a result and
// returns the first result of each.
func runExpected(ctx context.Context, t *testing.T, p *emulated.Pipeline, expected map[string]urlmsg.Message) (emulated.Report, map[string]result.Result) {
	t.Helper()
	var mu sync.Mutex
	got := map[string]result.Result{}
	rep, err := p.Run(ctx, expected, func(r result.Result, _ []byte) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[r.ID]; !dup {
			got[r.ID] = r
		}
	})
	if err != nil {
		t.Fatalf("run: %v (report %+v)", err, rep)
	}
	for id, m := range expected {
		if _, ok := got[id]; !ok {
			t.Errorf("no result for %s", m.URL)
		}
	}
	return rep, got
}

// TestManyHostsPolite is the core promise: 20 loopback hosts x 10 URLs,
// FetchDelay 300ms: every URL fetched once with its own page, and the
// server never sees two requests to one host closer than the delay.
func TestManyHostsPolite(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: map[string]string{"FetchDelay": "300ms", "CheckHostPeriod": "2s"}})
	noRedelivery(t, p)
	rep, got := runAll(t, p, inputs(site.URLs(10)), 3*time.Minute)
	if rep.ByStatus[result.StatusFetched] != 200 || rep.Duplicates != 0 {
		t.Errorf("fetched %d of 200 with %d duplicates: %+v; want each once", rep.ByStatus[result.StatusFetched], rep.Duplicates, rep.ByStatus)
	}
	for _, r := range got {
		path := strings.TrimPrefix(r.URL, "http://"+r.Host)
		if want := demosite.Body(r.Host, path); r.Data != want {
			t.Errorf("%s: body %q, want %q", r.URL, r.Data, want)
		}
		if r.Status != result.StatusFetched || r.HTTPStatus != 200 || r.SHA256 == "" || r.Bytes != int64(len(r.Data)) {
			t.Errorf("%s: incomplete result %+v", r.URL, r)
		}
	}
	// robots.txt (404 here) plus ten pages per host.
	if n := len(site.Requests()); n != 20*11 {
		t.Errorf("server saw %d requests, want %d (one robots.txt and ten pages per host)", n, 20*11)
	}
	if gap, host := demosite.MinGap(site.Requests()); gap < 300*time.Millisecond {
		t.Errorf("requests to %s only %s apart, want >= 300ms", host, gap)
	}
}

// TestPersistLimitDropsOldest: 30 URLs to one host at once with
// PersistLimit 5 all get a result; the evicted ones are dropped.
func TestPersistLimitDropsOldest(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: map[string]string{"FetchDelay": "100ms", "PersistLimit": "5", "CheckHostPeriod": "2s"}})
	rep, got := runAll(t, p, inputs(site.URLs(30)), 2*time.Minute)
	fetched, dropped := rep.ByStatus[result.StatusFetched], rep.ByStatus[result.StatusDropped]
	if fetched+dropped != 30 || dropped == 0 || fetched < 5 {
		t.Errorf("fetched %d + dropped %d, want 30 in all, at least one dropped and at least 5 fetched", fetched, dropped)
	}
	for _, r := range got {
		if r.Status == result.StatusDropped && !strings.Contains(r.Error, "PersistLimit") {
			t.Errorf("dropped result without the reason: %+v", r)
		}
	}
	// The server only ever saw the URLs that were kept.
	for _, rq := range site.Requests() {
		if i, ok := demosite.PageIndex(rq.Path); ok && i < 30-fetched {
			t.Errorf("an evicted page %s was requested", rq.Path)
		}
	}
}

// TestParameterChangeWithoutRestart: a FetchDelay lowered in SSM during a
// run shortens the gaps the server sees, with no restart. A worker reads
// its parameters once a round (ten URLs): the second round is the fast one.
func TestParameterChangeWithoutRestart(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), ParamTTL: time.Second, CheckRun: 30 * time.Second,
		Params: map[string]string{"FetchDelay": "1s", "CheckHostPeriod": "2s"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		// Lower the delay once the slow pace is established.
		for ctx.Err() == nil && len(site.Requests()) < 3 {
			time.Sleep(50 * time.Millisecond)
		}
		if err := p.SetParam(ctx, "FetchDelay", "100ms"); err != nil {
			t.Errorf("set parameter: %v", err)
		}
	}()
	runAll(t, p, inputs(site.URLs(13)), 2*time.Minute)
	reqs := site.Requests()
	first := reqs[1].Start.Sub(reqs[0].End)
	last := reqs[len(reqs)-1].Start.Sub(reqs[len(reqs)-2].End)
	if first < time.Second {
		t.Errorf("first gap %s, want >= 1s (the initial FetchDelay)", first)
	}
	if last > 600*time.Millisecond {
		t.Errorf("last gap %s, want the lowered delay (100ms) in force by then", last)
	}
}

// TestMalformedRecordReachesDLQ: a malformed input record fails alone and
// lands in the dead-letter queue after maxReceiveCount; its neighbours in
// the same batches are queued.
func TestMalformedRecordReachesDLQ(t *testing.T) {
	t.Parallel()
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy()})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sq := p.SQS()
	bad := `{"url": "ftp://example.com/not-http"}`
	if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &p.Stack.InputQueueURL, MessageBody: aws.String(bad)}); err != nil {
		t.Fatal(err)
	}
	good := inputs([]string{"http://127.0.0.9:9/a", "http://127.0.0.9:9/b", "http://127.0.0.10:9/c"})
	sent, err := p.Send(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	var inDLQ string
	for i := 0; i < 30 && inDLQ == ""; i++ {
		if _, _, err := p.IngestOnce(ctx); err != nil {
			t.Fatalf("ingest: %v", err)
		}
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &p.Stack.InputDLQURL, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			inDLQ = aws.ToString(m.Body)
		}
	}
	if inDLQ != bad {
		t.Fatalf("dead-letter queue holds %q, want the malformed record", inDLQ)
	}
	store := p.Services().Store
	pending := 0
	for _, host := range []string{"127.0.0.9:9", "127.0.0.10:9"} {
		h, err := store.Load(ctx, host, 10)
		if err != nil {
			t.Fatalf("load %s: %v", host, err)
		}
		pending += h.Pending
	}
	if pending != len(sent.Expected) {
		t.Errorf("%d urls queued, want %d", pending, len(sent.Expected))
	}
}

// TestDeniedWithoutAllowPrivate: by default loopback targets are refused by
// the address guard and end as denied, without the server seeing a request.
func TestDeniedWithoutAllowPrivate(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 1, Handler: http.NotFoundHandler()})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	p := start(t, emulated.Options{Params: map[string]string{"FetchDelay": "100ms", "CheckHostPeriod": "2s"}})
	rep, got := runAll(t, p, inputs(site.URLs(2)), time.Minute)
	if rep.ByStatus[result.StatusDenied] != 2 {
		t.Errorf("results %+v, want 2 denied", rep.ByStatus)
	}
	for _, r := range got {
		if !strings.Contains(r.Error, "127.0.0.") {
			t.Errorf("denied result does not name the address: %q", r.Error)
		}
	}
	if n := len(site.Requests()); n != 0 {
		t.Errorf("server saw %d requests, want none", n)
	}
}
