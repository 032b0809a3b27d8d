package ingesthandler_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
)

// idemBody holds three valid URLs (two of a.example, one of b.example)
// and one invalid item.
const idemBody = `["http://a.example/1", "http://a.example/2", "ftp://a.example/x", "http://b.example/1"]`

// idemEnv is the handler over the real Ingester and the SQLite store (host
// queues and idempotency records in one, as in local mode), on a clock
// the test moves.
type idemEnv struct {
	t     *testing.T
	h     *ingesthandler.Handler
	store queueAndKeys
	ing   *hostqueue.Ingester
	mu    sync.Mutex
	now   time.Time
	seq   int
}

// queueAndKeys is a store of both host queues and idempotency records.
type queueAndKeys interface {
	hostqueue.Queues
	hostqueue.IdempotencyStore
}

func newIdemEnv(t *testing.T) *idemEnv {
	t.Helper()
	return newIdemEnvOn(t, func(clock func() time.Time) queueAndKeys {
		s, err := sqlite.NewMemory(clock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func newIdemEnvOn(t *testing.T, open func(clock func() time.Time) queueAndKeys) *idemEnv {
	t.Helper()
	e := &idemEnv{t: t, now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	s := open(e.clock)
	e.store = s
	e.ing = &hostqueue.Ingester{Store: s, Publisher: &recordingPublisher{got: map[string]result.Result{}}, Now: e.clock}
	e.h = newHandler(e.ing, nil)
	e.h.Idempotency = &ingesthandler.Idempotency{Store: s, Now: e.clock}
	return e
}

func (e *idemEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *idemEnv) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

// post sends body with the key (none when empty) as caller user, under a
// new request id each time, as a client's retry arrives.
func (e *idemEnv) post(body, key, user string) (events.APIGatewayProxyResponse, ingesthandler.APIResponse) {
	e.t.Helper()
	e.mu.Lock()
	e.seq++
	reqID := fmt.Sprintf("req-%d", e.seq)
	e.mu.Unlock()
	ev := events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Body: body, Headers: map[string]string{"Content-Type": "application/json"}}
	if key != "" {
		ev.Headers["idempotency-key"] = key // any case, as HTTP allows
	}
	ev.RequestContext.RequestID = reqID
	ev.RequestContext.Identity.UserArn = "arn:aws:iam::123456789012:user/" + user
	resp, err := e.h.HandleAPI(context.Background(), ev)
	if err != nil {
		e.t.Fatalf("HandleAPI: %v", err)
	}
	return resp, decodeAPI(e.t, resp)
}

// pending returns the URLs queued for each host.
func (e *idemEnv) pending(hosts ...string) []int {
	e.t.Helper()
	var out []int
	for _, h := range hosts {
		st, err := e.store.Load(context.Background(), h, 0)
		switch {
		case err == nil:
			out = append(out, st.Pending)
		case strings.Contains(err.Error(), hostqueue.ErrNotFound.Error()):
			out = append(out, 0)
		default:
			e.t.Fatalf("load %s: %v", h, err)
		}
	}
	return out
}

func TestIdempotentRetryGetsTheFirstAnswer(t *testing.T) {
	e := newIdemEnv(t)
	first, a := e.post(idemBody, "order-42", "alice")
	if first.StatusCode != http.StatusAccepted || a.Accepted != 3 || len(a.Errors) != 1 {
		t.Fatalf("first answer %d %+v, want 202 with 3 accepted and 1 item error", first.StatusCode, a)
	}
	if first.Headers[ingesthandler.ReplayedHeader] != "" {
		t.Errorf("first answer marked replayed")
	}
	e.advance(time.Hour)
	again, b := e.post(idemBody, "order-42", "alice")
	if again.StatusCode != first.StatusCode || again.Body != first.Body {
		t.Errorf("retry answered %d %s\nwant the first answer %d %s", again.StatusCode, again.Body, first.StatusCode, first.Body)
	}
	if again.Headers[ingesthandler.ReplayedHeader] != "true" || !slices.Equal(a.IDs, b.IDs) {
		t.Errorf("retry: replayed=%q ids %v, want true and %v", again.Headers[ingesthandler.ReplayedHeader], b.IDs, a.IDs)
	}
	if got := e.pending("a.example", "b.example"); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("pending %v, want [2 1]: each URL queued once", got)
	}
	// A body that differs only in bytes is another body.
	resp, _ := e.post(idemBody+" ", "order-42", "alice")
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("same key, other body: %d %s, want 422", resp.StatusCode, resp.Body)
	}
	if got := e.pending("a.example", "b.example"); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("pending after the refused body %v, want [2 1]", got)
	}
}

// TestIdempotentRetryOnDynamoDB: the deployed store, on moto, keeps the
// same promise.
func TestIdempotentRetryOnDynamoDB(t *testing.T) {
	e := newIdemEnvOn(t, func(clock func() time.Time) queueAndKeys {
		st, cfg := stack.DeployForTest(t, stack.Options{})
		// The store's TTLs come from the test's clock: the strict layer's
		// TTL reaper judges them on it (moto.WithClock), not the machine's.
		db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, moto.WithClock(clock)) })
		return dynamo.New(db, st.TableName, clock)
	})
	first, a := e.post(idemBody, "order-42", "alice")
	again, b := e.post(idemBody, "order-42", "alice")
	if first.StatusCode != http.StatusAccepted || again.Body != first.Body || !slices.Equal(a.IDs, b.IDs) || len(a.IDs) != 3 {
		t.Errorf("answers %d %s and %d %s: want one 202 answer twice", first.StatusCode, first.Body, again.StatusCode, again.Body)
	}
	if got := e.pending("a.example", "b.example"); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("pending %v, want [2 1]: each URL queued once", got)
	}
	if resp, _ := e.post(`"http://a.example/3"`, "order-42", "alice"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("same key, other body: %d, want 422", resp.StatusCode)
	}
}

func TestWithoutTheHeaderEveryRequestQueues(t *testing.T) {
	for name, configure := range map[string]func(*idemEnv){
		"no header":                func(*idemEnv) {},
		"header ignored, no store": func(e *idemEnv) { e.h.Idempotency = nil },
	} {
		t.Run(name, func(t *testing.T) {
			e := newIdemEnv(t)
			configure(e)
			key := ""
			if e.h.Idempotency == nil {
				key = "order-42"
			}
			_, a := e.post(idemBody, key, "alice")
			_, b := e.post(idemBody, key, "alice")
			if a.Accepted != 3 || b.Accepted != 3 || slices.Equal(a.IDs, b.IDs) {
				t.Errorf("answers %v and %v: want 3 accepted each, under new ids", a.IDs, b.IDs)
			}
			if got := e.pending("a.example", "b.example"); !slices.Equal(got, []int{4, 2}) {
				t.Errorf("pending %v, want [4 2]: queued twice, as before", got)
			}
		})
	}
}

func TestIdempotencyKeysAreTheCallers(t *testing.T) {
	e := newIdemEnv(t)
	_, a := e.post(idemBody, "k", "alice")
	_, b := e.post(idemBody, "k", "bob")
	if slices.Equal(a.IDs, b.IDs) {
		t.Errorf("bob's request replayed alice's answer")
	}
	if got := e.pending("a.example"); got[0] != 4 {
		t.Errorf("pending %v, want 4: two callers, two requests", got)
	}
}

func TestIdempotencyWindowEnds(t *testing.T) {
	e := newIdemEnv(t)
	e.post(idemBody, "k", "alice")
	e.advance(ingesthandler.DefaultIdempotencyWindow)
	resp, body := e.post(`"http://c.example/1"`, "k", "alice")
	if resp.StatusCode != http.StatusAccepted || body.Accepted != 1 || resp.Headers[ingesthandler.ReplayedHeader] != "" {
		t.Errorf("after the window: %d %+v, want a new request accepted", resp.StatusCode, body)
	}
}

func TestIdempotencyKeyMustBeVisibleASCII(t *testing.T) {
	e := newIdemEnv(t)
	for name, key := range map[string]string{"too long": strings.Repeat("k", 256), "space": "a b", "non-ASCII": "ключ"} {
		t.Run(name, func(t *testing.T) {
			if resp, _ := e.post(idemBody, key, "alice"); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("key %q: %d %s, want 400", key, resp.StatusCode, resp.Body)
			}
		})
	}
	if got := e.pending("a.example"); got[0] != 0 {
		t.Errorf("pending %v, want nothing queued", got)
	}
}

// hookIngester runs before on each call, then the real Ingester, failing
// the messages fail picks.
type hookIngester struct {
	real   ingesthandler.Ingester
	calls  int
	before func(call int)
	fail   func(call int, m urlmsg.Message) bool
}

func (f *hookIngester) Ingest(ctx context.Context, p hostqueue.IngestParams, msgs []urlmsg.Message) hostqueue.IngestResult {
	f.calls++
	if f.before != nil {
		f.before(f.calls)
	}
	var pass []urlmsg.Message
	var idx []int
	failed := map[int]error{}
	for i, m := range msgs {
		if f.fail != nil && f.fail(f.calls, m) {
			failed[i] = errThrottled
			continue
		}
		pass = append(pass, m)
		idx = append(idx, i)
	}
	res := f.real.Ingest(ctx, p, pass)
	out := res
	out.Failed = failed
	for i, err := range res.Failed {
		out.Failed[idx[i]] = err
	}
	return out
}

func TestIdempotentRetryWhileTheFirstRuns(t *testing.T) {
	e := newIdemEnv(t)
	var during events.APIGatewayProxyResponse
	e.h.Ingester = &hookIngester{real: e.ing, before: func(call int) {
		if call == 1 {
			during, _ = e.post(idemBody, "k", "alice")
		}
	}}
	first, a := e.post(idemBody, "k", "alice")
	if during.StatusCode != http.StatusConflict || during.Headers["Retry-After"] == "" {
		t.Errorf("retry during the first: %d %v %s, want 409 with Retry-After", during.StatusCode, during.Headers, during.Body)
	}
	if first.StatusCode != http.StatusAccepted || a.Accepted != 3 {
		t.Errorf("first: %d %+v", first.StatusCode, a)
	}
	if _, b := e.post(idemBody, "k", "alice"); !slices.Equal(a.IDs, b.IDs) {
		t.Errorf("retry after the first: ids %v, want %v", b.IDs, a.IDs)
	}
	if got := e.pending("a.example", "b.example"); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("pending %v, want [2 1]", got)
	}
}

func TestIdempotentRetryQueuesOnlyWhatFailed(t *testing.T) {
	e := newIdemEnv(t)
	hook := &hookIngester{real: e.ing, fail: func(call int, m urlmsg.Message) bool {
		return call == 1 && m.Host == "b.example"
	}}
	e.h.Ingester = hook
	first, a := e.post(idemBody, "k", "alice")
	if first.StatusCode != http.StatusServiceUnavailable || a.Accepted != 2 || !strings.Contains(first.Body, "same Idempotency-Key") {
		t.Fatalf("first: %d %s, want 503 with 2 accepted and a hint to retry with the key", first.StatusCode, first.Body)
	}
	if got := e.pending("a.example", "b.example"); !slices.Equal(got, []int{2, 0}) {
		t.Fatalf("pending after the partial failure %v, want [2 0]", got)
	}
	retry, b := e.post(idemBody, "k", "alice")
	if retry.StatusCode != http.StatusAccepted || b.Accepted != 3 || len(b.Errors) != 1 || !slices.Equal(b.IDs[:2], a.IDs) {
		t.Errorf("retry: %d %+v, want 202 with the first two ids and b.example's", retry.StatusCode, b)
	}
	if got := e.pending("a.example", "b.example"); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("pending after the retry %v, want [2 1]: nothing queued twice", got)
	}
	if hook.calls != 2 {
		t.Errorf("%d ingest calls, want 2", hook.calls)
	}
	// Done now: a third attempt replays without ingesting.
	third, c := e.post(idemBody, "k", "alice")
	if third.Body != retry.Body || third.Headers[ingesthandler.ReplayedHeader] != "true" || hook.calls != 2 || !slices.Equal(c.IDs, b.IDs) {
		t.Errorf("third: %s (replayed %q, %d calls), want the retry's answer replayed", third.Body, third.Headers[ingesthandler.ReplayedHeader], hook.calls)
	}
}
