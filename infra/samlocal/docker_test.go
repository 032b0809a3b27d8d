//go:build samlocal

// The tests in this file need Docker and an invoke image: `make sam-local`
// provisions both and runs them (go test -tags samlocal). They fail, never
// skip, when something is missing: run through the target, a skip would
// look like a pass.
package samlocal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/infra/samlocal"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

const (
	// fetchDelay is the FetchDelay parameter: the site must never see two
	// requests to one host closer than this.
	fetchDelay = 300 * time.Millisecond
	// checkRunSeconds keeps each check invocation short; the test invokes
	// it again until every URL has its result, as the schedule would.
	checkRunSeconds = "5"
	// maxCheckInvocations bounds those rounds (the URLs take two at most).
	maxCheckInvocations = 4
)

func TestSAMLocal(t *testing.T) {
	started := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 9*time.Minute)
	defer cancel()
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(root, samlocal.BuiltTemplate)
	if _, err := os.Stat(built); err != nil {
		t.Fatalf("%s is missing: run `make sam-build` (make sam-local does)", built)
	}
	if !samlocal.DockerAvailable(ctx) {
		t.Fatalf("no Docker daemon answers: run through `make sam-local`, which provisions one")
	}
	eventsDir := filepath.Join(root, "infra", "events")
	sqsEvent := filepath.Join(eventsDir, "ingest-sqs.json")
	partialEvent := filepath.Join(eventsDir, "ingest-sqs-partial-failure.json")
	checkEvent := filepath.Join(eventsDir, "check-shard-0.json")

	want := map[string]urlmsg.Message{}
	okIDs := expectedFromSQS(t, sqsEvent, want)
	if len(okIDs.failing) > 0 {
		t.Fatalf("ingest-sqs.json has invalid records %v: it is the happy path", okIDs.failing)
	}
	partial := expectedFromSQS(t, partialEvent, want)
	if len(partial.failing) != 1 {
		t.Fatalf("ingest-sqs-partial-failure.json has %d invalid records, want exactly 1", len(partial.failing))
	}

	site := startSite(t, hostsOf(t, sqsEvent, partialEvent))
	motoSrv, err := moto.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { motoSrv.Close() })
	awsCfg, err := moto.AWSConfig(ctx, motoSrv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.Load("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := tpl.Deploy(ctx, awsCfg, stack.Options{
		Prefix: stack.UniquePrefix("samlocal"), Stage: "dev", ShardCount: 1,
		ParamOverrides: map[string]string{"FetchDelay": fetchDelay.String(), "CheckHostPeriod": "2s"},
	})
	if err != nil {
		t.Fatalf("deploy the stack on moto: %v", err)
	}

	dir := t.TempDir()
	localTpl := filepath.Join(filepath.Dir(built), samlocal.LocalTemplateName)
	if err := samlocal.LocalTemplate(built, localTpl); err != nil {
		t.Fatal(err)
	}
	env, err := samlocal.EnvVars(st, motoSrv.Endpoint, map[string]map[string]string{
		// The template pins it to false so submitted URLs never reach
		// private addresses on AWS; these targets are loopback hosts, which
		// ingest would answer at once with "denied".
		"IngestFunction": {"ALLOW_PRIVATE_NETWORKS": "true"},
		"CheckFunction":  {"ALLOW_PRIVATE_NETWORKS": "true", "CHECK_RUN_SECONDS": checkRunSeconds},
	})
	if err != nil {
		t.Fatal(err)
	}
	envFile := filepath.Join(dir, "env.json")
	if err := samlocal.WriteJSON(envFile, env); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "sam.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("SAM and function output:\n%s", tail(string(b), 12000))
		}
	})
	sam, err := samlocal.NewSAM(root, localTpl, envFile, os.Getenv(samlocal.EnvImage), logFile)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := samlocal.NewAWSCLI(root, motoSrv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), st.TableName, time.Now)
	t.Logf("set up (moto, stack, site) in %v", time.Since(started).Round(time.Millisecond))

	// --- ingest: the happy SQS batch, then the one with a malformed record ---
	var resp events.SQSEventResponse
	invokeJSON(t, ctx, sam, "IngestFunction", sqsEvent, &resp)
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("ingest-sqs.json: batchItemFailures %+v, want none", resp.BatchItemFailures)
	}
	checkQueued(t, ctx, store, okIDs.ids, want)

	resp = events.SQSEventResponse{}
	invokeJSON(t, ctx, sam, "IngestFunction", partialEvent, &resp)
	var failing []string
	for _, f := range resp.BatchItemFailures {
		failing = append(failing, f.ItemIdentifier)
	}
	if !slices.Equal(failing, partial.failing) {
		t.Errorf("ingest-sqs-partial-failure.json: batchItemFailures %v, want exactly the malformed record %v", failing, partial.failing)
	}
	checkQueued(t, ctx, store, append(slices.Clone(okIDs.ids), partial.ids...), want)
	if t.Failed() {
		t.FailNow()
	}

	// --- check, until every URL's result is on the output queue ---
	results := map[string]result.Result{}
	runChecks(t, ctx, sam, cli, st, checkEvent, want, results)
	checkResults(t, want, results)
	checkPolite(t, site, want, partial.rejectedURLs)

	// --- POST /urls through sam local start-api ---
	port, err := samlocal.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	apiFrom := time.Now()
	api, err := sam.StartAPI(ctx, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	t.Logf("sam local start-api answers at %s after %v", api.URL, time.Since(apiFrom).Round(time.Millisecond))
	host2, host3 := "127.0.0.2:18080", "127.0.0.3:18080"
	apiWant := map[string]urlmsg.Message{}
	for _, c := range []struct {
		name, body string
		status     int
		accepted   int
	}{
		{"one object", `{"url": "http://` + host2 + `/page/20"}`, http.StatusAccepted, 1},
		{"an array", `[{"url": "http://` + host3 + `/page/20"}, "http://` + host2 + `/page/21", {"host": "` + host3 + `", "url": "http://` + host3 + `/page/21"}]`, http.StatusAccepted, 3},
		{"malformed JSON", `{"url": "http://` + host2 + `/page/22"`, http.StatusBadRequest, 0},
		{"oversized body", oversized(), http.StatusRequestEntityTooLarge, 0},
	} {
		began := time.Now()
		status, body := curlPost(t, ctx, api.URL+"/urls", c.body)
		t.Logf("POST /urls %s (%d bytes): %d %s in %v", c.name, len(c.body), status, tail(body, 200), time.Since(began).Round(time.Millisecond))
		if status != c.status {
			t.Errorf("POST /urls %s: status %d %s, want %d", c.name, status, tail(body, 300), c.status)
			continue
		}
		if c.status != http.StatusAccepted {
			continue
		}
		var ans struct {
			Accepted int      `json:"accepted"`
			IDs      []string `json:"ids"`
		}
		if err := json.Unmarshal([]byte(body), &ans); err != nil || ans.Accepted != c.accepted || len(ans.IDs) != c.accepted {
			t.Errorf("POST /urls %s: answer %s (%v), want %d accepted with their ids", c.name, body, err, c.accepted)
			continue
		}
		// Which id is which URL: the items, in order, as the answer lists them.
		msgs, _, err := urlmsg.Parse("x", []byte(c.body))
		if err != nil || len(msgs) != len(ans.IDs) {
			t.Fatalf("re-parse %s: %v", c.name, err)
		}
		for i, id := range ans.IDs {
			m := msgs[i]
			m.ID = id
			apiWant[id] = m
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	runChecks(t, ctx, sam, cli, st, checkEvent, apiWant, results)
	checkResults(t, apiWant, results)
	all := maps.Clone(want)
	maps.Copy(all, apiWant)
	checkPolite(t, site, all, partial.rejectedURLs)
	t.Logf("sam local end to end in %v", time.Since(started).Round(time.Millisecond))
}

type expected struct {
	ids          []string // accepted ids, in event order
	failing      []string // message ids of the records that must fail
	rejectedURLs []string // URLs of those records: never fetched
}

// urlPattern finds URLs in raw event text, even in a malformed record.
var urlPattern = regexp.MustCompile(`https?://[^"\\\s]+`)

// expectedFromSQS computes what ingest must queue from an SQS event file
// with the parser the function uses, so ids match exactly.
func expectedFromSQS(t *testing.T, path string, want map[string]urlmsg.Message) expected {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var e expected
	for _, r := range ev.Records {
		ms, bad, err := urlmsg.Parse(r.MessageId, []byte(r.Body))
		if err != nil || len(bad) > 0 {
			e.failing = append(e.failing, r.MessageId)
			e.rejectedURLs = append(e.rejectedURLs, urlPattern.FindAllString(r.Body, -1)...)
			continue
		}
		for _, m := range ms {
			want[m.ID] = m
			e.ids = append(e.ids, m.ID)
		}
	}
	return e
}

func hostsOf(t *testing.T, paths ...string) []string {
	t.Helper()
	set := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range urlPattern.FindAllString(string(b), -1) {
			if u, err := url.Parse(m); err == nil {
				set[u.Host] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func invokeJSON(t *testing.T, ctx context.Context, sam *samlocal.SAM, fn, event string, out any) {
	t.Helper()
	began := time.Now()
	answer, err := sam.Invoke(ctx, fn, event)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sam local invoke %s -e %s: %s (%v)", fn, filepath.Base(event), answer, time.Since(began).Round(time.Millisecond))
	if err := json.Unmarshal(answer, out); err != nil {
		t.Fatalf("%s answer %q: %v", fn, answer, err)
	}
}

// checkQueued reads each host's queue from the table and wants exactly the
// ids ingest accepted for it, in order.
func checkQueued(t *testing.T, ctx context.Context, store *dynamo.Store, ids []string, want map[string]urlmsg.Message) {
	t.Helper()
	byHost := map[string][]string{}
	for _, id := range ids {
		m := want[id]
		key := hostqueue.QueueKey(m.Host, false)
		byHost[key] = append(byHost[key], id)
	}
	for key, wantIDs := range byHost {
		h, err := store.Load(ctx, key, 1000)
		if err != nil {
			t.Errorf("table: host %s: %v", key, err)
			continue
		}
		var got []string
		for _, e := range h.Head {
			got = append(got, e.ID)
		}
		if h.Pending != len(wantIDs) || !slices.Equal(got, wantIDs) {
			t.Errorf("table: host %s queues %d %v, want %d %v", key, h.Pending, got, len(wantIDs), wantIDs)
		}
		if h.Due.IsZero() {
			t.Errorf("table: host %s has work but is not in the due index", key)
		}
	}
}

// runChecks invokes the check function until every wanted id has a result,
// reading the output queue with the AWS CLI after each invocation.
func runChecks(t *testing.T, ctx context.Context, sam *samlocal.SAM, cli *samlocal.AWSCLI, st *stack.Stack, event string, want map[string]urlmsg.Message, results map[string]result.Result) {
	t.Helper()
	missing := func() []string {
		var out []string
		for id, m := range want {
			if _, ok := results[id]; !ok {
				out = append(out, m.URL)
			}
		}
		sort.Strings(out)
		return out
	}
	for i := 1; len(missing()) > 0; i++ {
		if i > maxCheckInvocations {
			t.Fatalf("after %d check invocations no result for %v", maxCheckInvocations, missing())
		}
		var summary map[string]any
		invokeJSON(t, ctx, sam, "CheckFunction", event, &summary)
		// Results are sent before the invocation ends; one empty receive
		// after the last message means the queue holds no more.
		for {
			msgs, err := cli.Receive(ctx, st.OutputQueueURL, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				var r result.Result
				if err := json.Unmarshal([]byte(m.Body), &r); err != nil {
					t.Fatalf("output message %s is not a result: %v: %q", m.MessageID, err, m.Body)
				}
				if prev, dup := results[r.ID]; dup && prev.Status == result.StatusFetched {
					t.Logf("duplicate result %s (delivery is at least once)", r.ID)
					continue
				}
				results[r.ID] = r
			}
		}
	}
}

func checkResults(t *testing.T, want map[string]urlmsg.Message, results map[string]result.Result) {
	t.Helper()
	for id, m := range want {
		r := results[id]
		u, err := url.Parse(m.URL)
		if err != nil {
			t.Fatal(err)
		}
		body := demosite.Body(m.Host, u.Path)
		if r.Status != result.StatusFetched || r.HTTPStatus != http.StatusOK || r.URL != m.URL || r.Host != m.Host || r.Data != body {
			t.Errorf("result %s: status %s, http %d, url %s, host %s, data %q, error %q; want fetched, 200, %s, %s, %q",
				id, r.Status, r.HTTPStatus, r.URL, r.Host, r.Data, r.Error, m.URL, m.Host, body)
		}
	}
}

func checkPolite(t *testing.T, s *site, want map[string]urlmsg.Message, rejected []string) {
	t.Helper()
	reqs := s.requests()
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
	for _, raw := range rejected {
		u, _ := url.Parse(raw)
		if n := seen[u.Host+u.Path]; n != 0 {
			t.Errorf("%s came in the failing record but was requested %d times", raw, n)
		}
	}
	gaps := demosite.Gaps(reqs)
	if len(gaps) == 0 {
		t.Errorf("no host got two requests: the politeness check checked nothing")
	}
	for _, h := range slices.Sorted(maps.Keys(gaps)) {
		g := gaps[h]
		t.Logf("site: host %s saw %d requests, smallest gap %v", h, g.Requests, g.Min.Round(time.Millisecond))
		if g.Min < fetchDelay {
			t.Errorf("host %s: two requests %v apart, want at least %v", h, g.Min, fetchDelay)
		}
	}
}

// oversized is a valid JSON array just above the 1 MiB the API accepts.
func oversized() string {
	var b strings.Builder
	b.WriteString(`["http://127.0.0.2:18080/page/99"`)
	for b.Len() < 1<<20+16 {
		b.WriteString(`, "http://127.0.0.2:18080/page/99"`)
	}
	b.WriteString("]")
	return b.String()
}

// curlPost posts body with curl, as docs/local-mode.md shows.
func curlPost(t *testing.T, ctx context.Context, target, body string) (int, string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "curl", "-sS", "-X", "POST", "-H", "Content-Type: application/json",
		"--data-binary", "@"+f, "-w", "\n%{http_code}", target)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("curl %s: %v: %s", target, err, errb.String())
	}
	s := strings.TrimRight(out.String(), "\n")
	i := strings.LastIndexByte(s, '\n')
	var code int
	fmt.Sscan(s[i+1:], &code)
	return code, s[:max(i, 0)]
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// site serves the demo pages on the fixed loopback addresses the events
// name, and logs every request with the server's own clock.
type site struct {
	mu   sync.Mutex
	reqs []demosite.Request
}

func startSite(t *testing.T, hosts []string) *site {
	t.Helper()
	s := &site{}
	for _, host := range hosts {
		ln, err := listenPatiently(t, host)
		if err != nil {
			t.Fatalf("serve the demo host %s that infra/events names: %v", host, err)
		}
		srv := &http.Server{Handler: s.handler(host), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	return s
}

// listenPatiently binds a fixed address, waiting up to two minutes while
// another test holds it: infra/e2e serves the same addresses (the events
// name them), and on a shared machine it may be running.
func listenPatiently(t *testing.T, addr string) (net.Listener, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for logged := false; ; {
		ln, err := net.Listen("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			return ln, err
		}
		if !logged {
			t.Logf("%s is taken (%v); waiting for it", addr, err)
			logged = true
		}
		time.Sleep(time.Second)
	}
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
