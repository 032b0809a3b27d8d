package ingesthandler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// slowStore is a hostqueue.Appender whose appends take a while (or, block,
// until their context ends), recording the hosts it wrote.
type slowStore struct {
	take  time.Duration
	block bool

	mu      sync.Mutex
	written map[string]bool
}

func (s *slowStore) Append(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
	if s.block {
		<-ctx.Done()
		return hostqueue.AppendResult{}, ctx.Err()
	}
	select {
	case <-time.After(s.take):
	case <-ctx.Done():
		return hostqueue.AppendResult{}, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = map[string]bool{}
	}
	s.written[req.Key] = true
	return hostqueue.AppendResult{Appended: len(req.Entries)}, nil
}

func (s *slowStore) wrote(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written[host]
}

// oneHostPerRecord is an SQS batch of n records, each one URL of its own
// host (h<i>.example).
func oneHostPerRecord(n int) events.SQSEvent {
	var bodies []string
	for i := range n {
		b, _ := json.Marshal(map[string]string{"url": fmt.Sprintf("http://h%d.example/", i)})
		bodies = append(bodies, string(b))
	}
	return sqsEvent(bodies...)
}

// TestIngestWatchesItsDeadline: a batch that cannot be written before the
// invocation's deadline is answered in time (2 s before it), with the
// records whose hosts were not written as batch item failures, which SQS
// redelivers; no record is both written and failed, none is neither. A
// write that hangs is cut off and fails its record, not the answer.
func TestIngestWatchesItsDeadline(t *testing.T) {
	tests := []struct {
		name  string
		store *slowStore
		// left is the time from the call to the deadline: no write starts
		// in its last 5 s, writes end 2 s before it.
		left        time.Duration
		wantWritten func(n int) bool
	}{
		{"slow writes: the rest handed back", &slowStore{take: 200 * time.Millisecond}, 6 * time.Second,
			func(n int) bool { return n >= 2 && n < 30 }},
		{"a write that hangs is cut off", &slowStore{block: true}, 5500 * time.Millisecond,
			func(n int) bool { return n == 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// On virtual time (a synctest bubble): the answer's margin is
			// exact, whatever the machine's load.
			synctest.Test(t, func(t *testing.T) { watchDeadline(t, tc.store, tc.left, tc.wantWritten) })
		})
	}
}

func watchDeadline(t *testing.T, store *slowStore, left time.Duration, wantWritten func(int) bool) {
	const records = 30
	h := newHandler(&hostqueue.Ingester{Store: store, Publisher: nopPublisher{}, Now: time.Now, Concurrency: 2}, nil)
	start := time.Now()
	deadline := start.Add(left)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	resp, err := h.HandleSQS(ctx, oneHostPerRecord(records))
	answered := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if late := answered.Sub(deadline.Add(-2 * time.Second)); late > 0 {
		t.Errorf("answered %v before the deadline, want at least 2s (%v late)", deadline.Sub(answered), late)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	written := 0
	for i := range records {
		id, host := fmt.Sprintf("m%d", i), fmt.Sprintf("h%d.example", i)
		switch w := store.wrote(host); {
		case w && failed[id]:
			t.Errorf("record %s: written and handed back", id)
		case !w && !failed[id]:
			t.Errorf("record %s: neither written nor handed back: lost", id)
		case w:
			written++
		}
	}
	if !wantWritten(written) {
		t.Errorf("%d of %d records written in %v", written, records, answered.Sub(start))
	}
}

// TestAPIAnswersWithinGatewayTimeout: POST /urls works within API
// Gateway's 29 s whatever the function's timeout: its writes end 2 s before
// that and none starts in the last 5 s; items not queued in time get 503.
func TestAPIAnswersWithinGatewayTimeout(t *testing.T) {
	var gotDeadline, gotUntil time.Time
	ing := &fakeIngester{}
	ing.ingest = func(msgs []urlmsg.Message) hostqueue.IngestResult {
		return hostqueue.IngestResult{Failed: map[int]error{1: fmt.Errorf("append: %w", hostqueue.ErrNoTime)}, Appended: len(msgs) - 1}
	}
	h := newHandler(deadlineSpy{ing: ing, deadline: &gotDeadline, until: &gotUntil}, nil)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the function's timeout
	defer cancel()
	resp, err := h.HandleAPI(ctx, events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Body: `["http://a.example/", "http://b.example/"]`})
	if err != nil {
		t.Fatal(err)
	}
	if d := gotDeadline.Sub(start); d < 26500*time.Millisecond || d > 27500*time.Millisecond {
		t.Errorf("writes bounded %v after the request, want 27s (API Gateway's 29s less 2s to answer)", d)
	}
	if d := gotUntil.Sub(start); d < 23500*time.Millisecond || d > 24500*time.Millisecond {
		t.Errorf("no write starts after %v, want 24s", d)
	}
	var body struct {
		Accepted int `json:"accepted"`
		Errors   []urlmsg.ItemError
	}
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || body.Accepted != 1 || len(body.Errors) != 1 || body.Errors[0].URL != "http://b.example/" {
		t.Errorf("answer %d %s, want 503 with b.example listed to retry", resp.StatusCode, resp.Body)
	}
}

// deadlineSpy records the deadline and Until each Ingest call got.
type deadlineSpy struct {
	ing             *fakeIngester
	deadline, until *time.Time
}

func (s deadlineSpy) Ingest(ctx context.Context, p hostqueue.IngestParams, msgs []urlmsg.Message) hostqueue.IngestResult {
	*s.deadline, _ = ctx.Deadline()
	*s.until = p.Until
	return s.ing.Ingest(ctx, p, msgs)
}

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, []result.Result) error { return nil }

// TestAPIDeadlineFromRequestArrival: API Gateway's 29 s count from the
// request's arrival (RequestTimeEpoch), so a request that waited 20 s for a
// cold start leaves the writes 7 s, not 27; one stamped in the future
// (clocks apart), not stamped, or replayed long after (a saved event, as
// sam local invoke -e sends) counts from now.
func TestAPIDeadlineFromRequestArrival(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond) // whole milliseconds, as RequestTimeEpoch
	tests := []struct {
		name      string
		arrived   time.Time
		wantWrite time.Duration // from now to the end of the writes
	}{
		{"arrived 20s ago", now.Add(-20 * time.Second), 7 * time.Second},
		{"arrived 28s ago", now.Add(-28 * time.Second), -time.Second},
		{"arrived now", now, 27 * time.Second},
		{"stamped 5s ahead", now.Add(5 * time.Second), 27 * time.Second},
		{"not stamped", time.Time{}, 27 * time.Second},
		{"replayed an hour later", now.Add(-time.Hour), 27 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var gotDeadline, gotUntil time.Time
			h := newHandler(deadlineSpy{ing: &fakeIngester{}, deadline: &gotDeadline, until: &gotUntil}, nil)
			h.Now = func() time.Time { return now }
			ev := events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Body: `["http://a.example/"]`}
			if !tc.arrived.IsZero() {
				ev.RequestContext.RequestTimeEpoch = tc.arrived.UnixMilli()
			}
			if _, err := h.HandleAPI(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if d := gotDeadline.Sub(now); d != tc.wantWrite {
				t.Errorf("writes end %v after now, want %v", d, tc.wantWrite)
			}
			if d := gotUntil.Sub(now); d != tc.wantWrite-3*time.Second {
				t.Errorf("no write starts after %v, want %v", d, tc.wantWrite-3*time.Second)
			}
		})
	}
}
