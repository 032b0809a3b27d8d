package emulated_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/infra/faults"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestThrottledTableManyWorkers: DynamoDB throttling one call in seven
// (15%) while one check invocation works up to 200 hosts at once (about
// 150 at its peak here), each worker
// with its own store calls on one shared client. AWS throttles a hot
// partition or a new on-demand table this way; the SDK's standard
// retryer would empty its retry token bucket within ~100 throttles and
// then fail every later call at once ("retry quota exceeded": failed
// commits, refetches, valid ingest records handed back until the DLQ).
// With the product's retry policy (config.RetryOptions: no token bucket,
// backed-off attempts) every URL ends fetched, nothing reaches the input
// queue's DLQ, and duplicates stay within the 5% the low-rate fault run
// allows.
func TestThrottledTableManyWorkers(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	site, err := demosite.Start(demosite.Options{Hosts: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	srv, err := moto.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	// Fire(DynamoThrottle, 0.5) at rate 0.3: 15% of DynamoDB calls.
	inj := faults.New(13, 0.3).Only(faults.DynamoThrottle)
	calls := &callTimes{}
	p := start(t, emulated.Options{Endpoint: srv.Endpoint, ShardCount: 1, Addresses: fetch.PrivatePolicy(), Faults: inj,
		Params: map[string]string{"FetchDelay": delay.String(), "CheckHostPeriod": "2s", "FetchTimeout": "1s", "MaxCrawlDelay": "500ms",
			// ~200 workers: every host of the site at once, in one invocation
			// (one shard).
			"MaxConcurrentHosts": "200"},
		CheckRun:      faultCheckRun,
		DynamoOptions: []func(*dynamodb.Options){calls.option}})
	eng := p.Services().Engine
	eng.LeaseTTL = faultLeaseTTL
	defer func() { t.Logf("store calls: %s", calls) }()

	urls := site.URLs(8)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	sent, err := p.Send(ctx, inputs(urls))
	if err != nil || len(sent.Rejected) > 0 {
		t.Fatalf("send: %v, %d rejected", err, len(sent.Rejected))
	}
	rep, got := runExpected(ctx, t, p, sent.Expected)
	_, peak := eng.Workers()
	t.Logf("%d urls on %d hosts: %+v duplicates=%d elapsed=%s faults=%v workers peak=%d",
		len(urls), len(site.Hosts()), rep.ByStatus, rep.Duplicates, rep.Elapsed, rep.Faults, peak)

	if rep.Faults[faults.DynamoThrottle] < 100 {
		t.Errorf("%d throttles injected, want at least 100 (more than the SDK's default retry bucket takes)", rep.Faults[faults.DynamoThrottle])
	}
	for id, r := range got {
		if _, ok := sent.Expected[id]; !ok {
			t.Errorf("a result under an id never sent: %s %s (a URL accepted twice)", id, r.URL)
		}
		path := strings.TrimPrefix(r.URL, "http://"+r.Host)
		if r.Status != result.StatusFetched || r.Data != demosite.Body(r.Host, path) {
			t.Errorf("%s: %s %q, want fetched with its page", r.URL, r.Status, r.Data)
		}
	}
	if share := float64(rep.Duplicates) / float64(len(urls)); share > 0.05 {
		t.Errorf("duplicates %d of %d urls (%.1f%%), want at most 5%%", rep.Duplicates, len(urls), 100*share)
	}
	if gap, host := demosite.MinGap(site.Requests()); gap < delay {
		t.Errorf("requests to %s only %s apart, want >= %s", host, gap, delay)
	}
	q := sqs.NewFromConfig(p.AWS)
	out, err := q.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(p.Stack.InputDLQURL), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatalf("read the input DLQ: %v", err)
	}
	if n := len(out.Messages); n > 0 {
		t.Errorf("%d input records reached the DLQ, want none (first: %s)", n, aws.ToString(out.Messages[0].Body))
	}
}
