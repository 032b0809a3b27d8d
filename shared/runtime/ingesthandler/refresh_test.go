package ingesthandler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// TestRefreshBoundsAreTheRunningParameters: both entrances judge an
// item's refresh against the parameters in force, not the defaults.
func TestRefreshBoundsAreTheRunningParameters(t *testing.T) {
	ing := &fakeIngester{}
	h := newHandler(ing, nil)
	h.Params = func(context.Context) params.Params {
		p := testParams()
		p.MinRefresh = 2 * time.Hour
		p.MaxRefresh = 3 * time.Hour
		return p
	}
	ev := apiRequest(t)
	ev.Body = `[{"url": "http://a.example/1", "refresh": "1h"}, {"url": "http://a.example/2", "refresh": "150m"}]`
	resp, err := h.HandleAPI(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	body := decodeAPI(t, resp)
	if body.Accepted != 1 || len(body.Errors) != 1 || !strings.Contains(body.Errors[0].Error, "below MinRefresh (2h0m0s)") {
		t.Fatalf("POST /urls: accepted %d, errors %+v; want the 1h item refused naming MinRefresh", body.Accepted, body.Errors)
	}
	sqs, err := h.HandleSQS(context.Background(), sqsEvent(`{"url": "http://a.example/3", "refresh": "4h"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(sqs.BatchItemFailures) != 1 {
		t.Fatalf("SQS record with refresh above MaxRefresh: failures %+v, want it refused", sqs.BatchItemFailures)
	}
}

// TestRefreshRefusedByIngestIsNotRetried: an item ingest refuses as
// invalid (a refreshing URL beyond MaxRefreshPerHost, or where refresh
// is not kept) is listed as an error to fix, not one to retry: the answer
// is not 503.
func TestRefreshRefusedByIngestIsNotRetried(t *testing.T) {
	ing := &fakeIngester{ingest: func(msgs []urlmsg.Message) hostqueue.IngestResult {
		return hostqueue.IngestResult{Failed: map[int]error{1: fmt.Errorf("a.example: %w (100)", hostqueue.ErrRefreshCap)}, Appended: 1}
	}}
	h := newHandler(ing, nil)
	ev := apiRequest(t)
	ev.Body = `[{"url": "http://a.example/1"}, {"url": "http://a.example/2", "refresh": "1h"}]`
	resp, err := h.HandleAPI(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	body := decodeAPI(t, resp)
	if resp.StatusCode != 202 || body.Accepted != 1 || len(body.Errors) != 1 ||
		strings.Contains(body.Errors[0].Error, "retry") || !strings.Contains(body.Errors[0].Error, "MaxRefreshPerHost") {
		t.Errorf("status %d accepted %d errors %+v, want 202, 1, the refresh refused naming MaxRefreshPerHost, no retry", resp.StatusCode, body.Accepted, body.Errors)
	}
}
