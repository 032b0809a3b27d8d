package checkhandler_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// TestHandleReportsFailedCalls: a run whose store or publish calls failed
// after their retries fails the invocation (Lambda's Errors metric, the
// errors alarm); one without, or with only local errors, does not.
func TestHandleReportsFailedCalls(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sum     engine.Summary
		wantErr bool
	}{
		{"clean", engine.Summary{Requests: 5}, false},
		{"store or publish errors", engine.Summary{Errors: 2}, true},
		{"local errors only", engine.Summary{Errors: 3, LocalErrors: 3}, false},
		{"both", engine.Summary{Errors: 4, LocalErrors: 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(&fakeRunner{run: func(engine.RunRequest) (engine.Summary, error) { return tc.sum, nil }}, nil)
			_, err := h.Handle(context.Background(), shard(1))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Handle: error %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

// failingStore is a working store whose due-host lookups fail, as during a
// DynamoDB outage.
type failingStore struct{ *sqlite.Store }

func (failingStore) DueHosts(context.Context, int, time.Time, int) ([]string, error) {
	return nil, errors.New("injected: service unavailable")
}

// TestHandleFailingStore runs the real engine on a store that fails: the
// invocation returns an error, and its metrics are flushed all the same.
func TestHandleFailingStore(t *testing.T) {
	st, err := sqlite.NewMemory(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out metrics.Buffer
	rec := metrics.New(&out, "test", nil, nil)
	var logs bytes.Buffer
	eng := &engine.Engine{
		Store: failingStore{st}, Publisher: nil,
		Fetcher: func(params.Params) engine.Fetcher { return nil },
		Params:  func(context.Context) params.Params { return params.Defaults() },
		Clock:   engine.RealClock{}, Log: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: rec,
	}
	h := &checkhandler.Handler{Runner: eng, ShardCount: 1, Run: 300 * time.Millisecond, Now: time.Now,
		Log: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: rec}
	rec.Add(metrics.Requests, 1) // something for Flush to write
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sum, err := h.Handle(ctx, shard(0))
	if err == nil {
		t.Fatalf("Handle on a failing store: no error (summary %+v)", sum)
	}
	if sum.Errors == 0 || !strings.Contains(err.Error(), "failed after retries") {
		t.Fatalf("Handle: %v, summary %+v", err, sum)
	}
	docs, err := metrics.Parse(bytes.NewReader(out.Bytes()))
	if err != nil || len(docs) == 0 {
		t.Fatalf("metrics not flushed: %d documents, %v", len(docs), err)
	}
}
