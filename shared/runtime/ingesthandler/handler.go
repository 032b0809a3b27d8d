// Package handler translates the ingest function's events (SQS batches and
// API Gateway POST /urls) into one domain call: validate, group by host,
// append to the hosts' queues.
package ingesthandler

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// Ingester is the domain service the handler calls.
type Ingester interface {
	Ingest(ctx context.Context, p hostqueue.IngestParams, msgs []urlmsg.Message) hostqueue.IngestResult
}

var _ Ingester = (*hostqueue.Ingester)(nil)

// Waker asks the check function to run the shards that own the given
// virtual shards now, instead of at their next scheduled minute.
type Waker interface {
	Wake(ctx context.Context, vshards []int) error
}

// Handler serves both event sources with one code path.
type Handler struct {
	Ingester Ingester
	Params   func(ctx context.Context) params.Params
	// ParamsReady, when set, must return nil before a batch is ingested:
	// it waits for the first successful read of the parameters. Nil means
	// the parameters are always ready (tests, fixed parameters).
	//
	// Ingest must not run on built-in defaults the operator did not
	// choose: with a default PersistLimit below the operator's it would
	// evict accepted URLs as dropped, and with the default QueueMode it
	// would queue URLs where the operator's pacing does not apply; neither
	// can be undone. A batch that arrives while the parameters cannot be
	// read is handed back instead (SQS redelivers it, POST /urls answers
	// 503), which costs only delay.
	ParamsReady func(ctx context.Context) error
	// Waker is told which shards got hosts with new work; nil: none (the
	// schedule still runs every shard once a minute).
	Waker Waker
	// Idempotency serves POST /urls requests that carry an
	// Idempotency-Key header (see Idempotency); nil: the header is ignored.
	Idempotency *Idempotency
	Log         *slog.Logger
	// Metrics receives URLsAccepted, URLsRejected and URLsEvicted;
	// HandleSQS and HandleAPI flush it once per invocation. Nil records
	// nothing.
	Metrics *metrics.Recorder
	// Now is the clock POST /urls measures its deadline on (see
	// apiDeadline); nil: time.Now.
	Now func() time.Time
	// Resolver, when set, resolves each batch's hosts so that they are
	// placed in the virtual shard of their server's address
	// (hostqueue.Place): every name of one server is then worked by one
	// check invocation at a time, whose gate paces the server. Nil places
	// every host by name (local mode: one process works every shard).
	Resolver Resolver
	// PlaceBudget bounds a batch's lookups; zero: DefaultPlaceBudget.
	PlaceBudget time.Duration
}

func (h *Handler) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

// ingest runs one domain call and wakes the shards it gave work. A failed
// wake-up is logged, never fails the batch: the URLs are stored, and the
// schedule comes within a minute. Hosts it had no time to write before
// ctx's deadline are in Failed (see timeBox).
func (h *Handler) ingest(ctx context.Context, msgs []urlmsg.Message) hostqueue.IngestResult {
	wctx, cancel, until := timeBox(ctx)
	defer cancel()
	if err := h.ready(wctx); err != nil {
		failed := make(map[int]error, len(msgs))
		for i := range msgs {
			failed[i] = err
		}
		return hostqueue.IngestResult{Failed: failed}
	}
	p := h.Params(ctx)
	ip := ingestParams(p)
	ip.Until = until
	ip.Shards = h.place(wctx, msgs, ip.ByDomain, p.ExemptPrefixes())
	res := h.Ingester.Ingest(wctx, ip, msgs)
	if h.Log.Enabled(ctx, slog.LevelDebug) {
		// One line per URL at debug level: its id, traced to its result.
		for i, m := range msgs {
			if err, failed := res.Failed[i]; failed {
				h.Log.DebugContext(ctx, "url not queued", "id", m.ID, "host", m.Host, "url", m.URL, "error", err)
			} else {
				h.Log.DebugContext(ctx, "url accepted", "id", m.ID, "host", m.Host, "url", m.URL)
			}
		}
	}
	h.Metrics.Add(metrics.URLsAccepted, float64(len(msgs)-len(res.Failed)))
	h.Metrics.Add(metrics.URLsEvicted, float64(res.Evicted))
	if h.Waker != nil && len(res.Activated) > 0 {
		ctx, cancel := wakeBox(ctx)
		defer cancel()
		if err := h.Waker.Wake(ctx, res.Activated); err != nil {
			h.Log.WarnContext(ctx, "wake check", "error", err)
		}
	}
	return res
}

// Ingest queues messages a caller parsed itself, as HandleSQS queues a
// batch's valid records (parameters, deadline, metrics, wake-ups), and says
// what became of each: for a producer that handles a URL not queued itself
// (local mode's input holds back what a full queue cannot take).
func (h *Handler) Ingest(ctx context.Context, msgs []urlmsg.Message) hostqueue.IngestResult {
	return h.ingest(ctx, msgs)
}

// paramsWait bounds how long one invocation waits for its first parameter
// read: long enough to ride out a slow cold start, short enough to hand a
// batch back well inside the function's timeout.
const paramsWait = 10 * time.Second

// ready waits (bounded) until the parameters have been read once.
func (h *Handler) ready(ctx context.Context) error {
	if h.ParamsReady == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, paramsWait)
	defer cancel()
	if err := h.ParamsReady(wctx); err != nil {
		return fmt.Errorf("parameters not read yet, batch handed back: %w", err)
	}
	return nil
}

// Handle accepts any event and dispatches on its shape, because one function
// is wired to both the SQS queue and the API.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
		HTTPMethod string `json:"httpMethod"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("ingest: event is not JSON: %w", err)
	}
	switch {
	case len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs":
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("ingest: decode SQS event: %w", err)
		}
		return h.HandleSQS(ctx, ev)
	case probe.HTTPMethod != "":
		var ev events.APIGatewayProxyRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("ingest: decode API Gateway event: %w", err)
		}
		return h.HandleAPI(ctx, ev)
	default:
		return nil, errors.New("ingest: unknown event: want an SQS batch or an API Gateway request")
	}
}

// HandleSQS queues a batch. A record is all or nothing: if any item in it is
// invalid, none is queued and the record is reported failed, so after the
// queue's maxReceiveCount it lands whole in the dead-letter queue for
// inspection. Records whose hosts could not be written are reported failed
// and retried by SQS; the rest of the batch proceeds. A URL denied at ingest
// (its host an address the deployment may not reach) is not a failure: its
// denied result is on the output queue.
func (h *Handler) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	defer func() {
		if err := h.Metrics.Flush(); err != nil {
			h.Log.ErrorContext(ctx, "write metrics", "error", err)
		}
	}()
	var msgs []urlmsg.Message
	var owner []int // record index of each message
	failed := map[int]bool{}
	for i, rec := range ev.Records {
		ms, bad, err := urlmsg.ParseLimited(rec.MessageId, []byte(rec.Body), urlmsg.LimitsOf(h.Params(ctx)))
		if err == nil && len(bad) > 0 {
			err = fmt.Errorf("%d of %d items invalid, first: item %d: %s", len(bad), len(bad)+len(ms), bad[0].Index, bad[0].Error)
		}
		if err != nil {
			// All or nothing: every item of the record is refused (an
			// unreadable record counts as one).
			h.Metrics.Add(metrics.URLsRejected, float64(max(1, len(bad)+len(ms))))
			failed[i] = true
			h.Log.ErrorContext(ctx, "reject record", "messageId", rec.MessageId, "receiveCount", rec.Attributes["ApproximateReceiveCount"], "error", err)
			continue
		}
		for _, m := range ms {
			msgs = append(msgs, m)
			owner = append(owner, i)
		}
	}
	if len(msgs) > 0 {
		res := h.ingest(ctx, msgs)
		logged := map[string]bool{}
		for mi, err := range res.Failed {
			failed[owner[mi]] = true
			if !logged[err.Error()] {
				logged[err.Error()] = true
				h.Log.ErrorContext(ctx, "queue urls", "messageId", ev.Records[owner[mi]].MessageId, "host", msgs[mi].Host, "id", msgs[mi].ID, "error", err)
			}
		}
		h.Log.InfoContext(ctx, "ingested", "records", len(ev.Records), "urls", len(msgs), "appended", res.Appended, "evicted", res.Evicted, "denied", res.Denied, "failedRecords", len(failed), "requestId", requestID(ctx))
	}
	var out events.SQSEventResponse
	for i, rec := range ev.Records {
		if failed[i] {
			out.BatchItemFailures = append(out.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return out, nil
}

// APIResponse is the body of POST /urls answers.
type APIResponse struct {
	// Accepted counts the URLs that will end in a result on the output
	// queue, one per ID in IDs: those queued and those Denied.
	Accepted int `json:"accepted"`
	// Denied counts the accepted URLs already answered with a denied
	// result: their host is an address the deployment may not reach
	// (loopback, private, a port not allowed), so they were not queued.
	Denied  int                `json:"denied,omitempty"`
	IDs     []string           `json:"ids,omitempty"`
	Errors  []urlmsg.ItemError `json:"errors,omitempty"`
	Message string             `json:"message,omitempty"`
}

// HandleAPI serves POST /urls: 202 with the accepted count and per-item
// errors when at least one item was accepted; 400 when none was (every
// item is listed with what is wrong) or the body is not JSON; 413 above
// the size limit; 503 when some valid items could not be queued (they are
// listed, retry them), whatever else was accepted. With an
// Idempotency-Key header, see Idempotency (also 409 and 422).
func (h *Handler) HandleAPI(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	defer func() {
		if err := h.Metrics.Flush(); err != nil {
			h.Log.ErrorContext(ctx, "write metrics", "error", err)
		}
	}()
	if ev.HTTPMethod != http.MethodPost {
		return reply(http.StatusMethodNotAllowed, APIResponse{Message: "use POST with a JSON object or array of {\"host\", \"url\"}"}), nil
	}
	ctx, cancel := context.WithDeadline(ctx, apiDeadline(ev, h.now()))
	defer cancel()
	if key, ok := idempotencyKey(ev); ok && h.Idempotency != nil {
		return h.handleIdempotent(ctx, ev, key), nil
	}
	body, refused := requestBody(ev)
	if refused != nil {
		return *refused, nil
	}
	id := ev.RequestContext.RequestID
	if id == "" {
		id = requestID(ctx)
	}
	msgs, bad, err := urlmsg.ParseLimited("api/"+id, body, urlmsg.LimitsOf(h.Params(ctx)))
	if err != nil {
		return parseRefused(err), nil
	}
	h.Metrics.Add(metrics.URLsRejected, float64(len(bad)))
	resp := APIResponse{Errors: bad}
	code := http.StatusAccepted
	if len(msgs) > 0 {
		res := h.ingest(ctx, msgs)
		index := itemIndexes(msgs, bad)
		for i, m := range msgs {
			if err, ok := res.Failed[i]; ok {
				if errors.Is(err, urlmsg.ErrInvalid) {
					// Refused for good (a refreshing URL beyond
					// MaxRefreshPerHost): fix it, do not retry it.
					resp.Errors = append(resp.Errors, urlmsg.ItemError{Index: index[i], URL: m.URL, Error: err.Error()})
					continue
				}
				code = http.StatusServiceUnavailable
				resp.Errors = append(resp.Errors, urlmsg.ItemError{Index: index[i], URL: m.URL, Error: "not queued, retry: " + err.Error()})
				continue
			}
			resp.Accepted++
			resp.IDs = append(resp.IDs, m.ID)
		}
		resp.Denied = res.Denied
		if code != http.StatusAccepted {
			h.Log.ErrorContext(ctx, "queue urls from api", "failed", len(res.Failed), "requestId", id)
		}
	}
	return reply(settle(code, &resp)), nil
}

// requestBody returns the body of a POST /urls, its base64 undone, or the
// answer refusing it: 413 when it is larger than a payload may be, 400
// when its base64 is broken.
func requestBody(ev events.APIGatewayProxyRequest) ([]byte, *events.APIGatewayProxyResponse) {
	if !ev.IsBase64Encoded {
		if len(ev.Body) > urlmsg.MaxPayloadBytes {
			r := tooLarge(len(ev.Body))
			return nil, &r
		}
		return []byte(ev.Body), nil
	}
	if n := base64.StdEncoding.DecodedLen(len(ev.Body)); n > urlmsg.MaxPayloadBytes+2 {
		r := tooLarge(n)
		return nil, &r
	}
	b, err := base64.StdEncoding.DecodeString(ev.Body)
	if err != nil {
		r := reply(http.StatusBadRequest, APIResponse{Message: "body is not valid base64"})
		return nil, &r
	}
	if len(b) > urlmsg.MaxPayloadBytes {
		r := tooLarge(len(b))
		return nil, &r
	}
	return b, nil
}

// tooLarge is the 413 for a body of n bytes, saying what to do instead. A
// body above about 6 MB never reaches the function (Lambda's synchronous
// payload limit, the event carrying the body, see "Lambda quotas"):
// API Gateway answers that one itself.
func tooLarge(n int) events.APIGatewayProxyResponse {
	return reply(http.StatusRequestEntityTooLarge, APIResponse{Message: fmt.Sprintf(
		"body is %d bytes, a request takes at most %d: split the list into requests of at most %d bytes, "+
			"or send it through the SQS input queue", n, urlmsg.MaxPayloadBytes, urlmsg.MaxPayloadBytes)})
}

// parseRefused is the answer to a body urlmsg.Parse refused.
func parseRefused(err error) events.APIGatewayProxyResponse {
	return reply(http.StatusBadRequest, APIResponse{Message: strings.TrimPrefix(err.Error(), urlmsg.ErrInvalid.Error()+": ")})
}

// settle turns "nothing accepted" into a 400: a 202 must mean that
// something will come out, and a producer that reads only the status
// would otherwise take a request of typos for a success. A 503 stays a
// 503: its items are to be retried as they are.
func settle(code int, resp *APIResponse) (int, APIResponse) {
	if code == http.StatusAccepted && resp.Accepted == 0 {
		resp.Message = noneAccepted
		return http.StatusBadRequest, *resp
	}
	return code, *resp
}

// noneAccepted is the message of a 400 whose items were all refused.
const noneAccepted = "no item was accepted: each error names an item by its index and says what to change"

// itemIndexes returns the payload index of each message Parse accepted:
// the indexes its item errors do not take, in order.
func itemIndexes(msgs []urlmsg.Message, bad []urlmsg.ItemError) []int {
	out := make([]int, 0, len(msgs))
	b := 0
	for i := 0; len(out) < len(msgs); i++ {
		if b < len(bad) && bad[b].Index == i {
			b++
			continue
		}
		out = append(out, i)
	}
	return out
}

func ingestParams(p params.Params) hostqueue.IngestParams {
	return hostqueue.IngestParams{PersistLimit: p.PersistLimit, ByDomain: p.QueueMode == params.QueueByDomain, AllowedPorts: p.Ports(), RefreshCap: p.MaxRefreshPerHost}
}

func reply(code int, body APIResponse) events.APIGatewayProxyResponse {
	b, _ := json.Marshal(body)
	resp := events.APIGatewayProxyResponse{
		StatusCode: code,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(b),
	}
	if code == http.StatusServiceUnavailable {
		// Items not queued (no time left, a full queue held back) are
		// worth sending again soon.
		resp.Headers["Retry-After"] = "1"
	}
	return resp
}

func requestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		return lc.AwsRequestID
	}
	return ""
}
