package ingesthandler_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

type fakeWaker struct {
	calls [][]int
	err   error
}

func (f *fakeWaker) Wake(_ context.Context, vshards []int) error {
	f.calls = append(f.calls, slices.Clone(vshards))
	return f.err
}

// TestWakeAfterIngest: both event sources wake the shards whose hosts the
// batch activated, once per batch; no activation, no wake-up; a wake-up that
// fails is logged and the stored URLs are still accepted.
func TestWakeAfterIngest(t *testing.T) {
	activate := func(msgs []urlmsg.Message) hostqueue.IngestResult {
		return hostqueue.IngestResult{Failed: map[int]error{}, Appended: len(msgs), Activated: []int{3, 7}}
	}
	sqsEv := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m1", Body: `{"url":"http://a.example/1"}`, EventSource: "aws:sqs"},
		{MessageId: "m2", Body: `{"url":"http://b.example/1"}`, EventSource: "aws:sqs"},
	}}
	api := events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Body: `[{"url":"http://a.example/2"}]`}

	t.Run("sqs", func(t *testing.T) {
		w := &fakeWaker{}
		h := newHandler(&fakeIngester{ingest: activate}, nil)
		h.Waker = w
		resp, err := h.HandleSQS(context.Background(), sqsEv)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("HandleSQS: %v %+v", err, resp)
		}
		if len(w.calls) != 1 || !slices.Equal(w.calls[0], []int{3, 7}) {
			t.Errorf("wake calls %v, want one with [3 7]", w.calls)
		}
	})
	t.Run("api", func(t *testing.T) {
		w := &fakeWaker{}
		h := newHandler(&fakeIngester{ingest: activate}, nil)
		h.Waker = w
		resp, err := h.HandleAPI(context.Background(), api)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("HandleAPI: %v %d %s", err, resp.StatusCode, resp.Body)
		}
		if len(w.calls) != 1 || !slices.Equal(w.calls[0], []int{3, 7}) {
			t.Errorf("wake calls %v, want one with [3 7]", w.calls)
		}
	})
	t.Run("nothing activated", func(t *testing.T) {
		w := &fakeWaker{}
		h := newHandler(&fakeIngester{}, nil)
		h.Waker = w
		if _, err := h.HandleSQS(context.Background(), sqsEv); err != nil {
			t.Fatal(err)
		}
		if len(w.calls) != 0 {
			t.Errorf("woke %v although no host became active", w.calls)
		}
	})
	t.Run("wake fails", func(t *testing.T) {
		w := &fakeWaker{err: errors.New("wake queue down")}
		var log bytes.Buffer
		h := newHandler(&fakeIngester{ingest: activate}, &log)
		h.Waker = w
		resp, err := h.HandleSQS(context.Background(), sqsEv)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Errorf("a failed wake-up failed the batch: %v %+v (the URLs are stored; the schedule comes)", err, resp)
		}
		if !strings.Contains(log.String(), "wake queue down") {
			t.Errorf("the failed wake-up is not logged:\n%s", log.String())
		}
	})
}
