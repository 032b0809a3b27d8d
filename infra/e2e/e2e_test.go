// Package e2e_test runs the real Lambda binaries end to end without AWS and
// without Docker: both bootstraps under aws-lambda-rie (as `sam local
// invoke` would run them), against template.yaml's resources on moto,
// invoked with the event files under infra/events (the files `sam local
// invoke -e` takes), fetching from loopback hosts whose own request log
// checks politeness.
//
// Nothing here skips: without moto or the emulator (`make tools`) the test
// fails, because a skipped end-to-end test in CI looks like a passing one.
package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/urldownloader/urldownloader/infra/rie"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

const (
	// fetchDelay is the FetchDelay parameter; the site's log must never show
	// two requests to one host closer than this.
	fetchDelay = 300 * time.Millisecond
	// checkRunSeconds keeps each check invocation short, so the test loops
	// over several of them as the schedule would.
	checkRunSeconds = "6"
	checkTimeout    = 30 * time.Second
	// resultsWithin bounds the wait for every URL's result once checks
	// run: the URLs need a few seconds of delays, so this only catches a
	// check function that never delivers them.
	resultsWithin = 3 * time.Minute
	// hangLimit bounds a whole test: nothing in it is expected to take
	// more than a minute even under CI's load, so it only ends a hang.
	hangLimit = 6 * time.Minute
)

// eventsDir holds the payloads, relative to this package's directory (go
// test runs each package in its own directory).
var eventsDir = filepath.Join("..", "events")

func TestIngestAndCheckUnderRIE(t *testing.T) {
	started := time.Now()
	// Only bounds a hang: the run takes about 20 s alone and under a
	// full parallel make test well under a minute (the bootstraps are
	// built before any test starts, see TestMain).
	ctx, cancel := context.WithTimeout(t.Context(), hangLimit)
	defer cancel()

	sqsEvent := readEvent(t, "ingest-sqs.json")
	apiEvent := readEvent(t, "ingest-api.json")
	partialEvent := readEvent(t, "ingest-sqs-partial-failure.json")
	checkEvent := readEvent(t, "check-shard-0.json")

	// What the events must produce, by result id, computed with the same
	// parser the function uses, so ids and normalised URLs match exactly.
	want := map[string]urlmsg.Message{}
	rejected := map[string]string{} // URL in a failing record -> its message id
	addSQS := func(name string, raw []byte) (failing []string) {
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range ev.Records {
			ms, bad, err := urlmsg.Parse(r.MessageId, []byte(r.Body))
			if err != nil || len(bad) > 0 {
				failing = append(failing, r.MessageId)
				for _, u := range urlPattern.FindAllString(r.Body, -1) {
					rejected[u] = r.MessageId
				}
				continue
			}
			for _, m := range ms {
				want[m.ID] = m
			}
		}
		return failing
	}
	if failing := addSQS("ingest-sqs.json", sqsEvent); len(failing) > 0 {
		t.Fatalf("ingest-sqs.json has invalid records %v: it is the happy path", failing)
	}
	wantFailing := addSQS("ingest-sqs-partial-failure.json", partialEvent)
	if len(wantFailing) != 1 {
		t.Fatalf("ingest-sqs-partial-failure.json has %d invalid records, want exactly 1", len(wantFailing))
	}
	var apiReq events.APIGatewayProxyRequest
	if err := json.Unmarshal(apiEvent, &apiReq); err != nil {
		t.Fatalf("ingest-api.json: %v", err)
	}
	apiMsgs, bad, err := urlmsg.Parse("api/"+apiReq.RequestContext.RequestID, []byte(apiReq.Body))
	if err != nil || len(bad) > 0 {
		t.Fatalf("ingest-api.json body: %v %v", err, bad)
	}
	for _, m := range apiMsgs {
		want[m.ID] = m
	}

	site := startSite(t, hostsOf(sqsEvent, apiEvent, partialEvent))
	motoSrv := startMoto(t, ctx)
	t.Logf("started moto and the site in %v", time.Since(started).Round(time.Millisecond))

	awsCfg, err := moto.AWSConfig(ctx, motoSrv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.Load("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := tpl.Deploy(ctx, awsCfg, stack.Options{
		Prefix:     stack.UniquePrefix("e2e"),
		ShardCount: 1,
		ParamOverrides: map[string]string{
			"FetchDelay":      fetchDelay.String(),
			"CheckHostPeriod": "2s",
		},
	})
	if err != nil {
		t.Fatalf("deploy the stack on moto: %v", err)
	}

	// --- ingest ---
	ingest := startFunction(t, ctx, st, "IngestFunction", bins.ingest, motoSrv.Endpoint, nil, 0)

	var sqsResp events.SQSEventResponse
	invokeJSON(t, ctx, ingest, "ingest-sqs.json", sqsEvent, &sqsResp)
	if len(sqsResp.BatchItemFailures) != 0 {
		t.Errorf("ingest-sqs.json: batchItemFailures %+v, want none", sqsResp.BatchItemFailures)
	}

	var apiResp events.APIGatewayProxyResponse
	invokeJSON(t, ctx, ingest, "ingest-api.json", apiEvent, &apiResp)
	var apiBody struct {
		Accepted int                `json:"accepted"`
		IDs      []string           `json:"ids"`
		Errors   []urlmsg.ItemError `json:"errors"`
	}
	if err := json.Unmarshal([]byte(apiResp.Body), &apiBody); err != nil {
		t.Fatalf("ingest-api.json: response body %q: %v", apiResp.Body, err)
	}
	var apiIDs []string
	for _, m := range apiMsgs {
		apiIDs = append(apiIDs, m.ID)
	}
	if apiResp.StatusCode != http.StatusAccepted || apiBody.Accepted != len(apiMsgs) || len(apiBody.Errors) != 0 || !slices.Equal(apiBody.IDs, apiIDs) {
		t.Errorf("ingest-api.json: %d %s, want 202 with accepted %d, ids %v, no errors", apiResp.StatusCode, apiResp.Body, len(apiMsgs), apiIDs)
	}

	var partialResp events.SQSEventResponse
	invokeJSON(t, ctx, ingest, "ingest-sqs-partial-failure.json", partialEvent, &partialResp)
	var gotFailing []string
	for _, f := range partialResp.BatchItemFailures {
		gotFailing = append(gotFailing, f.ItemIdentifier)
	}
	if !slices.Equal(gotFailing, wantFailing) {
		t.Errorf("ingest-sqs-partial-failure.json: batchItemFailures %v, want exactly the malformed record %v", gotFailing, wantFailing)
	}
	logReports(t, "ingest", ingest)

	// --- check, as the schedule would invoke it, until every URL is done ---
	collector := collectResults(ctx, t, sqs.NewFromConfig(awsCfg), st.OutputQueueURL)
	check := startFunction(t, ctx, st, "CheckFunction", bins.check, motoSrv.Endpoint,
		map[string]string{"CHECK_RUN_SECONDS": checkRunSeconds}, checkTimeout)
	checksFrom := time.Now()
	for invocations := 1; ; invocations++ {
		var summary map[string]any
		invokeJSON(t, ctx, check, "check-shard-0.json", checkEvent, &summary)
		t.Logf("check invocation %d: %v", invocations, summary)
		if collector.waitFor(ctx, want, 3*time.Second) {
			break
		}
		if time.Since(checksFrom) > resultsWithin || ctx.Err() != nil {
			t.Fatalf("after %d check invocations in %v, no result for:\n%s",
				invocations, time.Since(checksFrom).Round(time.Millisecond), strings.Join(collector.missing(want), "\n"))
		}
	}
	logReports(t, "check", check)

	// --- every URL fetched, with its page ---
	results := collector.snapshot()
	for id, r := range results {
		m, ok := want[id]
		if !ok {
			t.Errorf("unexpected result %s for %s (%s)", id, r.URL, r.Status)
			continue
		}
		u, err := url.Parse(m.URL)
		if err != nil {
			t.Fatal(err)
		}
		wantBody := demosite.Body(m.Host, u.Path)
		if r.Status != result.StatusFetched || r.HTTPStatus != http.StatusOK || r.URL != m.URL || r.Host != m.Host || r.Data != wantBody || r.Encoding != "" {
			t.Errorf("result for %s: status %s, http %d, url %s, host %s, encoding %q, data %q, error %q;\nwant fetched, 200, %s, %s, text %q",
				m.URL, r.Status, r.HTTPStatus, r.URL, r.Host, r.Encoding, r.Data, r.Error, m.URL, m.Host, wantBody)
		}
	}
	if n := collector.duplicates(); n > 0 {
		t.Logf("%d duplicate result messages (allowed: delivery is at least once)", n)
	}

	// --- politeness, from the server's side ---
	reqs := site.requests()
	seen := map[string]int{}
	for _, r := range reqs {
		seen[r.Host+r.Path]++
	}
	for _, m := range want {
		u, _ := url.Parse(m.URL)
		if n := seen[m.Host+u.Path]; n != 1 {
			t.Errorf("%s was requested %d times, want once", m.URL, n)
		}
	}
	for raw, id := range rejected {
		// A failing record is all or nothing: none of its URLs is fetched.
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if n := seen[u.Host+u.Path]; n != 0 {
			t.Errorf("%s was requested %d times, but it came in the failing record %s", raw, n, id)
		}
	}
	gaps := demosite.Gaps(reqs)
	if len(gaps) == 0 {
		t.Errorf("no host got two requests; the politeness check checked nothing")
	}
	for _, h := range slices.Sorted(maps.Keys(gaps)) {
		g := gaps[h]
		t.Logf("host %s: %d requests, smallest gap %v", h, g.Requests, g.Min.Round(time.Millisecond))
		if g.Min < fetchDelay {
			t.Errorf("host %s: two requests %v apart (end of one response to start of the next), want at least %v;\n%s",
				h, g.Min, fetchDelay, describe(reqs, h))
		}
	}
	t.Logf("end to end in %v (checks %v)", time.Since(started).Round(time.Millisecond), time.Since(checksFrom).Round(time.Millisecond))
}

func readEvent(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(eventsDir, name))
	if err != nil {
		t.Fatalf("read event: %v", err)
	}
	if !json.Valid(b) {
		t.Fatalf("%s is not valid JSON", name)
	}
	return b
}

// startFunction runs one of the stack's functions under the emulator with
// the environment the template gives it, pointed at moto.
func startFunction(t *testing.T, ctx context.Context, st *stack.Stack, id, bootstrap, endpoint string, extra map[string]string, timeout time.Duration) *rie.Emulator {
	t.Helper()
	return startFunctionOpts(t, ctx, st, id, bootstrap, endpoint, extra, timeout, nil)
}

// startFunctionOpts is startFunction with edit applied to the emulator's
// options (nil: none).
func startFunctionOpts(t *testing.T, ctx context.Context, st *stack.Stack, id, bootstrap, endpoint string, extra map[string]string, timeout time.Duration, edit func(*rie.Options)) *rie.Emulator {
	t.Helper()
	fn, ok := st.Functions[id]
	if !ok {
		t.Fatalf("template has no %s", id)
	}
	env := maps.Clone(fn.Env)
	maps.Copy(env, moto.Env(endpoint))
	// The template pins ALLOW_PRIVATE_NETWORKS to false so that submitted
	// URLs can never reach private addresses (the metadata endpoint) on
	// AWS. This test's targets are loopback hosts, which that guard refuses
	// (status denied), so it is lifted here, as `make run --allow-private`
	// does.
	env["ALLOW_PRIVATE_NETWORKS"] = "true"
	maps.Copy(env, extra)
	if timeout == 0 {
		timeout = fn.Timeout
	}
	opts := rie.Options{Bootstrap: bootstrap, Env: env, Timeout: timeout, MemorySize: fn.MemorySize, FunctionName: id}
	if edit != nil {
		edit(&opts)
	}
	e, err := rie.Start(ctx, opts)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	t.Cleanup(func() {
		e.Close()
		if t.Failed() {
			t.Logf("%s output (emulator and function):\n%s", id, e.Output())
		}
	})
	return e
}

// invokeJSON invokes with an event and decodes the answer into out; a
// function error fails the test.
func invokeJSON(t *testing.T, ctx context.Context, e *rie.Emulator, name string, event []byte, out any) {
	t.Helper()
	body, err := e.Invoke(ctx, event)
	if err != nil {
		t.Fatalf("invoke with %s: %v", name, err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		t.Fatalf("invoke with %s: answer %q: %v", name, body, err)
	}
}

func logReports(t *testing.T, name string, e *rie.Emulator) {
	t.Helper()
	for i, r := range e.Reports() {
		t.Logf("%s invocation %d: cold=%v init=%v duration=%v handler=%v maxMemory=%dMB error=%q",
			name, i+1, r.Cold, r.InitDuration, r.Duration, r.RuntimeDuration, r.MaxMemoryUsed, r.Error)
	}
}

// urlPattern finds URLs in raw event text, even in a malformed record.
var urlPattern = regexp.MustCompile(`https?://[^"\\\s]+`)

// hostsOf lists the host:port of every URL the events mention, so the site
// serves (and logs) all of them.
func hostsOf(raw ...[]byte) []string {
	set := map[string]bool{}
	for _, b := range raw {
		for _, m := range urlPattern.FindAll(b, -1) {
			if u, err := url.Parse(string(m)); err == nil {
				set[u.Host] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// site serves the demo pages on fixed loopback addresses (the events name
// them) and logs every request with the server's own clock. It is
// demosite's handler and log on addresses of our choosing: demosite itself
// listens on ephemeral ports only.
type site struct {
	mu   sync.Mutex
	reqs []demosite.Request
}

func startSite(t *testing.T, hosts []string) *site {
	t.Helper()
	s := &site{}
	for _, host := range hosts {
		ip, _, err := net.SplitHostPort(host)
		if err != nil || !net.ParseIP(ip).IsLoopback() {
			t.Fatalf("event URL host %s is not a loopback address: the test serves only loopback hosts", host)
		}
		ln, err := net.Listen("tcp", host)
		if err != nil {
			t.Fatalf("serve the demo host %s that infra/events names: %v (is another test or program using it?)", host, err)
		}
		srv := &http.Server{Handler: s.handler(host), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return s
}

func (s *site) handler(host string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() {
			s.mu.Lock()
			s.reqs = append(s.reqs, demosite.Request{Host: host, Path: r.URL.Path, Start: start, End: time.Now()})
			s.mu.Unlock()
		}()
		if _, ok := demosite.PageIndex(r.URL.Path); !ok {
			http.NotFound(w, r) // robots.txt too: allow everything
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(demosite.Body(host, r.URL.Path)))
	})
}

func (s *site) requests() []demosite.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.reqs)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

func describe(reqs []demosite.Request, host string) string {
	var b strings.Builder
	for _, r := range reqs {
		if r.Host == host {
			fmt.Fprintf(&b, "  %s %s .. %s\n", r.Path, r.Start.Format("15:04:05.000"), r.End.Format("15:04:05.000"))
		}
	}
	return b.String()
}

// collector reads the output queue as a consumer would: it deletes what it
// has read and dedupes by result id.
type collector struct {
	mu      sync.Mutex
	results map[string]result.Result
	dups    int
	errs    []error
}

func collectResults(ctx context.Context, t *testing.T, client *sqs.Client, queueURL string) *collector {
	c := &collector{results: map[string]result.Result{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		for _, err := range c.errs {
			t.Errorf("output queue: %v", err)
		}
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			})
			if err != nil {
				if ctx.Err() == nil {
					c.fail(fmt.Errorf("receive: %w", err))
					time.Sleep(200 * time.Millisecond)
				}
				continue
			}
			var del []sqstypes.DeleteMessageBatchRequestEntry
			for i, m := range out.Messages {
				var r result.Result
				if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &r); err != nil {
					c.fail(fmt.Errorf("message %s is not a result: %w", aws.ToString(m.MessageId), err))
				} else {
					c.add(r)
				}
				del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
			}
			if len(del) > 0 {
				if _, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: del}); err != nil && ctx.Err() == nil {
					c.fail(fmt.Errorf("delete: %w", err))
				}
			}
		}
	}()
	return c
}

func (c *collector) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

func (c *collector) add(r result.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.results[r.ID]; ok {
		c.dups++
		return
	}
	c.results[r.ID] = r
}

func (c *collector) missing(want map[string]urlmsg.Message) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id, m := range want {
		if _, ok := c.results[id]; !ok {
			out = append(out, m.URL+" (id "+id+")")
		}
	}
	sort.Strings(out)
	return out
}

// waitFor reports whether every wanted id has a result, waiting up to d.
func (c *collector) waitFor(ctx context.Context, want map[string]urlmsg.Message, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if len(c.missing(want)) == 0 {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *collector) snapshot() map[string]result.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.results)
}

func (c *collector) duplicates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dups
}
