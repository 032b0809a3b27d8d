package ingesthandler_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// flakyLoader fails until ok is set, as SSM does during an outage.
type flakyLoader struct{ ok atomic.Bool }

func (l *flakyLoader) Load(context.Context) (map[string]string, error) {
	if !l.ok.Load() {
		return nil, errors.New("ThrottlingException: rate exceeded")
	}
	return map[string]string{params.NamePersistLimit: "4000"}, nil
}

// TestIngestWaitsForParameters: a cold instance that cannot read its
// parameters hands every batch back instead of ingesting on the defaults
// (PersistLimit 1000 against the operator's 4000 would evict accepted URLs),
// and ingests with the operator's values once they are read.
func TestIngestWaitsForParameters(t *testing.T) {
	loader := &flakyLoader{}
	cache := params.NewCache(loader, time.Second, nil, nil)
	ing := &fakeIngester{}
	var log bytes.Buffer
	h := newHandler(ing, &log)
	h.Params, h.ParamsReady = cache.Get, cache.WaitLoaded

	// The handler's own wait is 10 s; the invocation's deadline cuts it.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	resp, err := h.HandleSQS(ctx, sqsEvent(`"http://a.example/1"`, `["http://b.example/1","http://a.example/2"]`))
	cancel()
	if err != nil {
		t.Fatalf("HandleSQS: %v", err)
	}
	if got, want := failureIDs(resp), []string{"m0", "m1"}; !slices.Equal(got, want) {
		t.Errorf("batch item failures %v, want every record handed back %v", got, want)
	}
	if len(ing.calls) != 0 {
		t.Errorf("Ingest called %d times before the parameters were read; want none", len(ing.calls))
	}
	if !strings.Contains(log.String(), "parameters not read yet") {
		t.Errorf("log does not say why the batch was handed back:\n%s", log.String())
	}

	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	api, err := h.HandleAPI(ctx, events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Body: `"http://a.example/3"`})
	cancel()
	if err != nil {
		t.Fatalf("HandleAPI: %v", err)
	}
	if api.StatusCode != http.StatusServiceUnavailable || !strings.Contains(api.Body, "retry") {
		t.Errorf("POST /urls before the parameters were read: %d %s, want 503 asking to retry", api.StatusCode, api.Body)
	}

	loader.ok.Store(true)
	resp, err = h.HandleSQS(context.Background(), sqsEvent(`"http://a.example/1"`))
	if err != nil {
		t.Fatalf("HandleSQS: %v", err)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("batch item failures %v after the parameters were read, want none", failureIDs(resp))
	}
	if len(ing.params) != 1 || ing.params[0].PersistLimit != 4000 {
		t.Errorf("ingest params %+v, want the operator's PersistLimit 4000", ing.params)
	}
}
