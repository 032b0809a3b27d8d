package ingesthandler_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
)

// fakeIngester records every call; ingest decides the outcome (all queued
// when nil).
type fakeIngester struct {
	ingest func(msgs []urlmsg.Message) hostqueue.IngestResult

	mu     sync.Mutex
	calls  [][]urlmsg.Message
	params []hostqueue.IngestParams
}

func (f *fakeIngester) Ingest(_ context.Context, p hostqueue.IngestParams, msgs []urlmsg.Message) hostqueue.IngestResult {
	f.mu.Lock()
	f.calls = append(f.calls, slices.Clone(msgs))
	f.params = append(f.params, p)
	f.mu.Unlock()
	if f.ingest == nil {
		return hostqueue.IngestResult{Failed: map[int]error{}, Appended: len(msgs)}
	}
	return f.ingest(msgs)
}

func (f *fakeIngester) all() []urlmsg.Message {
	var out []urlmsg.Message
	for _, c := range f.calls {
		out = append(out, c...)
	}
	return out
}

var errThrottled = errors.New("ProvisionedThroughputExceededException")

// failHost fails every message of one host, as the real Ingester does when
// that host's Append fails.
func failHost(host string) func([]urlmsg.Message) hostqueue.IngestResult {
	return func(msgs []urlmsg.Message) hostqueue.IngestResult {
		res := hostqueue.IngestResult{Failed: map[int]error{}}
		for i, m := range msgs {
			if m.Host == host {
				res.Failed[i] = fmt.Errorf("append urls to %s: %w", host, errThrottled)
				continue
			}
			res.Appended++
		}
		return res
	}
}

func testParams() params.Params {
	p := params.Defaults()
	p.PersistLimit = 77
	p.CheckHostPeriod = 3 * time.Second
	return p
}

func newHandler(ing ingesthandler.Ingester, log *bytes.Buffer) *ingesthandler.Handler {
	if log == nil {
		log = &bytes.Buffer{}
	}
	return &ingesthandler.Handler{
		Ingester: ing,
		Params:   func(context.Context) params.Params { return testParams() },
		Log:      slog.New(slog.NewJSONHandler(log, nil)),
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sqsBatch(t *testing.T) events.SQSEvent {
	t.Helper()
	var ev events.SQSEvent
	if err := json.Unmarshal(readFile(t, "sqs-batch.json"), &ev); err != nil {
		t.Fatalf("decode testdata/sqs-batch.json: %v", err)
	}
	return ev
}

func apiRequest(t *testing.T) events.APIGatewayProxyRequest {
	t.Helper()
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(readFile(t, "apigw-post-urls.json"), &ev); err != nil {
		t.Fatalf("decode testdata/apigw-post-urls.json: %v", err)
	}
	return ev
}

func failureIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// The records of testdata/sqs-batch.json, in order.
const (
	recGood1     = "0b3c1a2e-1111-4d7e-9a1b-000000000001" // one object, a.example
	recMalformed = "0b3c1a2e-1111-4d7e-9a1b-000000000002" // JSON cut short
	recBadItem   = "0b3c1a2e-1111-4d7e-9a1b-000000000003" // array with an ftp:// item among two good ones
	recGood2     = "0b3c1a2e-1111-4d7e-9a1b-000000000004" // array: c.example and a.example
	recFailHost  = "0b3c1a2e-1111-4d7e-9a1b-000000000005" // fail.example, whose append the fake fails
)

func TestHandleSQSBatch(t *testing.T) {
	ing := &fakeIngester{ingest: failHost("fail.example")}
	var log bytes.Buffer
	h := newHandler(ing, &log)
	resp, err := h.HandleSQS(context.Background(), sqsBatch(t))
	if err != nil {
		t.Fatalf("HandleSQS: %v", err)
	}
	if got, want := failureIDs(resp), []string{recMalformed, recBadItem, recFailHost}; !slices.Equal(got, want) {
		t.Errorf("batch item failures %v, want %v", got, want)
	}
	if len(ing.calls) != 1 {
		t.Fatalf("Ingest called %d times, want once for the whole batch", len(ing.calls))
	}
	want := []urlmsg.Message{
		{ID: urlmsg.MakeID(recGood1, 0, "http://a.example/1"), Host: "a.example", URL: "http://a.example/1"},
		{ID: urlmsg.MakeID(recGood2, 0, "http://c.example/1"), Host: "c.example", URL: "http://c.example/1"},
		{ID: urlmsg.MakeID(recGood2, 1, "http://a.example/3"), Host: "a.example", URL: "http://a.example/3"},
		{ID: urlmsg.MakeID(recFailHost, 0, "http://fail.example/1"), Host: "fail.example", URL: "http://fail.example/1", ETag: `"v1"`},
	}
	if got := ing.all(); !slices.Equal(got, want) {
		t.Errorf("ingested\n%+v\nwant\n%+v", got, want)
	}
	for _, m := range ing.all() {
		if m.Host == "b.example" {
			t.Errorf("ingested %s from the record with an invalid item; the record must be all or nothing", m.URL)
		}
	}
	if p := ing.params[0]; p.PersistLimit != 77 || p.ByDomain || !slices.Equal(p.AllowedPorts, []int{80, 443}) {
		t.Errorf("ingest params %+v, want the runtime parameters (PersistLimit 77, per host, ports 80 and 443)", p)
	}
	for _, id := range []string{recMalformed, recBadItem} {
		if !strings.Contains(log.String(), id) {
			t.Errorf("rejected record %s not logged:\n%s", id, log.String())
		}
	}
	if !strings.Contains(log.String(), "ftp") || !strings.Contains(log.String(), "item 1") {
		t.Errorf("log does not say which item of %s was bad:\n%s", recBadItem, log.String())
	}
}

func sqsEvent(bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: b, EventSource: "aws:sqs"})
	}
	return ev
}

func TestHandleSQSCases(t *testing.T) {
	tests := []struct {
		name       string
		ev         events.SQSEvent
		ingest     func([]urlmsg.Message) hostqueue.IngestResult
		byDomain   bool
		wantFailed []string
		wantURLs   []string // ingested, in order; nil means Ingest not called
	}{
		{
			name:     "all good",
			ev:       sqsEvent(`{"url":"http://a.example/"}`, `["http://b.example/","http://c.example/"]`),
			wantURLs: []string{"http://a.example/", "http://b.example/", "http://c.example/"},
		},
		{
			name:       "all bad: no ingest call",
			ev:         sqsEvent(`not json`, `[]`, `{"url":"javascript:alert(1)"}`, ``),
			wantFailed: []string{"m0", "m1", "m2", "m3"},
		},
		{
			name:       "a record with two hosts fails when one host fails",
			ev:         sqsEvent(`{"url":"http://a.example/1"}`, `["http://b.example/1","http://a.example/2"]`, `{"url":"http://b.example/2"}`),
			ingest:     failHost("a.example"),
			wantFailed: []string{"m0", "m1"},
			wantURLs:   []string{"http://a.example/1", "http://b.example/1", "http://a.example/2", "http://b.example/2"},
		},
		{
			name:       "every host fails",
			ev:         sqsEvent(`{"url":"http://a.example/1"}`, `{"url":"http://a.example/2"}`),
			ingest:     failHost("a.example"),
			wantFailed: []string{"m0", "m1"},
			wantURLs:   []string{"http://a.example/1", "http://a.example/2"},
		},
		{
			name:       "unknown field fails the record",
			ev:         sqsEvent(`{"url":"http://a.example/","priority":9}`, `{"url":"http://b.example/"}`),
			wantFailed: []string{"m0"},
			wantURLs:   []string{"http://b.example/"},
		},
		{
			name:       "too many items fails the record",
			ev:         sqsEvent("["+strings.TrimSuffix(strings.Repeat(`"http://a.example/",`, urlmsg.MaxItems+1), ",")+"]", `"http://b.example/"`),
			wantFailed: []string{"m0"},
			wantURLs:   []string{"http://b.example/"},
		},
		{
			name:     "domain queue mode passed on",
			ev:       sqsEvent(`"http://www.example.com/"`),
			byDomain: true,
			wantURLs: []string{"http://www.example.com/"},
		},
		{
			name: "empty batch",
			ev:   events.SQSEvent{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := &fakeIngester{ingest: tt.ingest}
			h := newHandler(ing, nil)
			if tt.byDomain {
				h.Params = func(context.Context) params.Params {
					p := testParams()
					p.QueueMode = params.QueueByDomain
					return p
				}
			}
			resp, err := h.HandleSQS(context.Background(), tt.ev)
			if err != nil {
				t.Fatalf("HandleSQS: %v", err)
			}
			if got := failureIDs(resp); !slices.Equal(got, tt.wantFailed) {
				t.Errorf("failures %v, want %v", got, tt.wantFailed)
			}
			if tt.wantURLs == nil {
				if len(ing.calls) != 0 {
					t.Errorf("Ingest called with %+v; nothing valid to queue", ing.calls)
				}
				return
			}
			var urls []string
			for _, m := range ing.all() {
				urls = append(urls, m.URL)
			}
			if !slices.Equal(urls, tt.wantURLs) {
				t.Errorf("ingested %v, want %v", urls, tt.wantURLs)
			}
			if got := ing.params[0].ByDomain; got != tt.byDomain {
				t.Errorf("ByDomain = %v, want %v", got, tt.byDomain)
			}
		})
	}
}

func decodeAPI(t *testing.T, resp events.APIGatewayProxyResponse) ingesthandler.APIResponse {
	t.Helper()
	if ct := resp.Headers["Content-Type"]; ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var body ingesthandler.APIResponse
	dec := json.NewDecoder(strings.NewReader(resp.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Fatalf("response body is not an APIResponse: %v\n%s", err, resp.Body)
	}
	return body
}

const apiRequestID = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"

func TestHandleAPIAccepted(t *testing.T) {
	ing := &fakeIngester{}
	h := newHandler(ing, nil)
	resp, err := h.HandleAPI(context.Background(), apiRequest(t))
	if err != nil {
		t.Fatalf("HandleAPI: %v", err)
	}
	if resp.StatusCode != 202 {
		t.Fatalf("status %d, want 202: %s", resp.StatusCode, resp.Body)
	}
	body := decodeAPI(t, resp)
	src := "api/" + apiRequestID
	wantIDs := []string{
		urlmsg.MakeID(src, 0, "http://a.example/1"),
		urlmsg.MakeID(src, 2, "https://b.example/2"),
		urlmsg.MakeID(src, 4, "http://xn--bcher-kva.example/3"),
	}
	if body.Accepted != 3 || !slices.Equal(body.IDs, wantIDs) {
		t.Errorf("accepted %d ids %v, want 3 %v", body.Accepted, body.IDs, wantIDs)
	}
	var idx []int
	for _, e := range body.Errors {
		idx = append(idx, e.Index)
	}
	if !slices.Equal(idx, []int{1, 3}) {
		t.Fatalf("item errors at %v, want [1 3]: %+v", idx, body.Errors)
	}
	if !strings.Contains(body.Errors[0].Error, "scheme must be http or https") || !strings.Contains(body.Errors[1].Error, "user-info") {
		t.Errorf("item errors do not say what is wrong: %+v", body.Errors)
	}
	if len(ing.calls) != 1 || len(ing.calls[0]) != 3 {
		t.Errorf("Ingest calls %+v, want one with the 3 valid items", ing.calls)
	}
}

func TestHandleAPIStatuses(t *testing.T) {
	tests := []struct {
		name        string
		edit        func(*events.APIGatewayProxyRequest)
		ingest      func([]urlmsg.Message) hostqueue.IngestResult
		wantCode    int
		wantMessage string // substring of the response message
		wantIngest  bool
	}{
		{
			name:        "GET not allowed",
			edit:        func(ev *events.APIGatewayProxyRequest) { ev.HTTPMethod = "GET"; ev.Body = "" },
			wantCode:    405,
			wantMessage: "use POST",
		},
		{
			name:        "PUT not allowed",
			edit:        func(ev *events.APIGatewayProxyRequest) { ev.HTTPMethod = "PUT" },
			wantCode:    405,
			wantMessage: "use POST",
		},
		{
			name:        "malformed JSON",
			edit:        func(ev *events.APIGatewayProxyRequest) { ev.Body = `[{"url": "http://a.example/"}` },
			wantCode:    400,
			wantMessage: "not a JSON array",
		},
		{
			name:        "empty body",
			edit:        func(ev *events.APIGatewayProxyRequest) { ev.Body = "" },
			wantCode:    400,
			wantMessage: "payload is empty",
		},
		{
			name:        "empty array",
			edit:        func(ev *events.APIGatewayProxyRequest) { ev.Body = "[]" },
			wantCode:    400,
			wantMessage: "empty array",
		},
		{
			name: "too many items",
			edit: func(ev *events.APIGatewayProxyRequest) {
				ev.Body = "[" + strings.TrimSuffix(strings.Repeat(`"http://a.example/",`, urlmsg.MaxItems+1), ",") + "]"
			},
			wantCode:    400,
			wantMessage: "the limit is 1000",
		},
		{
			name: "body over 1 MiB",
			edit: func(ev *events.APIGatewayProxyRequest) {
				ev.Body = `"http://a.example/` + strings.Repeat("a", urlmsg.MaxPayloadBytes) + `"`
			},
			wantCode:    413,
			wantMessage: "at most 1048576: split the list into requests of at most 1048576 bytes, or send it through the SQS input queue",
		},
		{
			name: "base64 body of 4 MiB, near what Lambda takes",
			edit: func(ev *events.APIGatewayProxyRequest) {
				ev.Body = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte(`"http://a.example/",`), 4<<20/19))
				ev.IsBase64Encoded = true
			},
			wantCode:    413,
			wantMessage: "split the list",
		},
		{
			name: "base64 body over 1 MiB decoded",
			edit: func(ev *events.APIGatewayProxyRequest) {
				ev.Body = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte(" "), urlmsg.MaxPayloadBytes+1))
				ev.IsBase64Encoded = true
			},
			wantCode:    413,
			wantMessage: "body is 1048577 bytes, a request takes at most 1048576: split the list",
		},
		{
			name: "base64 body",
			edit: func(ev *events.APIGatewayProxyRequest) {
				ev.Body = base64.StdEncoding.EncodeToString([]byte(`["http://a.example/1","http://b.example/2"]`))
				ev.IsBase64Encoded = true
			},
			wantCode:   202,
			wantIngest: true,
		},
		{
			name: "invalid base64",
			edit: func(ev *events.APIGatewayProxyRequest) {
				ev.Body = "not*base64"
				ev.IsBase64Encoded = true
			},
			wantCode:    400,
			wantMessage: "base64",
		},
		{
			name:        "invalid UTF-8",
			edit:        func(ev *events.APIGatewayProxyRequest) { ev.Body = "\"http://a.example/\xff\"" },
			wantCode:    400,
			wantMessage: "UTF-8",
		},
		{
			name:       "ingest fails some items",
			ingest:     failHost("b.example"),
			wantCode:   503,
			wantIngest: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := &fakeIngester{ingest: tt.ingest}
			h := newHandler(ing, nil)
			ev := apiRequest(t)
			if tt.edit != nil {
				tt.edit(&ev)
			}
			resp, err := h.HandleAPI(context.Background(), ev)
			if err != nil {
				t.Fatalf("HandleAPI returned an error (API Gateway would answer 502): %v", err)
			}
			if resp.StatusCode != tt.wantCode {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.wantCode, resp.Body)
			}
			body := decodeAPI(t, resp)
			if !strings.Contains(body.Message, tt.wantMessage) {
				t.Errorf("message %q does not contain %q", body.Message, tt.wantMessage)
			}
			if strings.HasPrefix(body.Message, urlmsg.ErrInvalid.Error()) {
				t.Errorf("message %q starts with the internal error prefix", body.Message)
			}
			if got := len(ing.calls) > 0; got != tt.wantIngest {
				t.Errorf("Ingest called: %v, want %v", got, tt.wantIngest)
			}
			if tt.wantCode >= 400 && tt.wantCode != 503 && body.Accepted != 0 {
				t.Errorf("accepted %d on a rejected request", body.Accepted)
			}
		})
	}
}

func TestHandleAPIPartialFailure(t *testing.T) {
	ing := &fakeIngester{ingest: failHost("b.example")}
	h := newHandler(ing, nil)
	resp, err := h.HandleAPI(context.Background(), apiRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503: %s", resp.StatusCode, resp.Body)
	}
	body := decodeAPI(t, resp)
	src := "api/" + apiRequestID
	wantIDs := []string{urlmsg.MakeID(src, 0, "http://a.example/1"), urlmsg.MakeID(src, 4, "http://xn--bcher-kva.example/3")}
	if body.Accepted != 2 || !slices.Equal(body.IDs, wantIDs) {
		t.Errorf("accepted %d %v, want 2 %v (b.example not queued)", body.Accepted, body.IDs, wantIDs)
	}
	var notQueued []urlmsg.ItemError
	for _, e := range body.Errors {
		if strings.Contains(e.Error, "not queued, retry") {
			notQueued = append(notQueued, e)
		}
	}
	if len(notQueued) != 1 || notQueued[0].URL != "https://b.example/2" || !strings.Contains(notQueued[0].Error, errThrottled.Error()) {
		t.Errorf("not-queued errors %+v, want one for https://b.example/2 with the cause", notQueued)
	}
	if len(body.Errors) != 3 {
		t.Errorf("errors %+v, want the 2 invalid items and the 1 not queued", body.Errors)
	}
}

func TestHandleAPIRequestIDFallback(t *testing.T) {
	ing := &fakeIngester{}
	h := newHandler(ing, nil)
	ev := apiRequest(t)
	ev.RequestContext.RequestID = ""
	ev.Body = `"http://a.example/"`
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-req-9"})
	resp, err := h.HandleAPI(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	body := decodeAPI(t, resp)
	if want := urlmsg.MakeID("api/lambda-req-9", 0, "http://a.example/"); !slices.Equal(body.IDs, []string{want}) {
		t.Errorf("ids %v, want [%s] seeded by the Lambda request id", body.IDs, want)
	}
}

func TestHandleDispatch(t *testing.T) {
	tests := []struct {
		name    string
		raw     []byte
		want    string // "sqs", "api" or an error substring
		wantErr bool
	}{
		{"SQS batch file", readFile(t, "sqs-batch.json"), "sqs", false},
		{"API Gateway file", readFile(t, "apigw-post-urls.json"), "api", false},
		{"not JSON", []byte(`{"Records":`), "not JSON", true},
		{"empty object", []byte(`{}`), "unknown event", true},
		{"S3 records", []byte(`{"Records":[{"eventSource":"aws:s3","s3":{}}]}`), "unknown event", true},
		{"empty records", []byte(`{"Records":[]}`), "unknown event", true},
		{"schedule event", []byte(`{"shard":0}`), "unknown event", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ing := &fakeIngester{ingest: failHost("fail.example")}
			h := newHandler(ing, nil)
			out, err := h.Handle(context.Background(), json.RawMessage(tt.raw))
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Handle = %v, %v; want an error containing %q", out, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			switch r := out.(type) {
			case events.SQSEventResponse:
				if tt.want != "sqs" {
					t.Fatalf("got an SQS response for %s", tt.name)
				}
				if got := failureIDs(r); !slices.Equal(got, []string{recMalformed, recBadItem, recFailHost}) {
					t.Errorf("failures %v", got)
				}
			case events.APIGatewayProxyResponse:
				if tt.want != "api" {
					t.Fatalf("got an API response for %s", tt.name)
				}
				if r.StatusCode != 202 {
					t.Errorf("status %d: %s", r.StatusCode, r.Body)
				}
			default:
				t.Fatalf("Handle returned %T", out)
			}
			// The response must marshal to the shape AWS expects.
			b, err := json.Marshal(out)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "sqs" && !bytes.Contains(b, []byte(`"batchItemFailures":[{"itemIdentifier":"`)) {
				t.Errorf("SQS response JSON %s lacks batchItemFailures", b)
			}
			if tt.want == "api" && !bytes.Contains(b, []byte(`"statusCode":202`)) {
				t.Errorf("API response JSON %s lacks statusCode", b)
			}
		})
	}
}
