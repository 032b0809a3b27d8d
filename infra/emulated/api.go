package emulated

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/apigw"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
)

// apiConcurrency is how many POST /urls requests Post has in flight, each
// its own ingest invocation as behind API Gateway.
const apiConcurrency = 8

// Invoke hands an SQS event straight to the ingest handler, as one ingest
// invocation by the input queue's mapping (without the queue).
func (p *Pipeline) Invoke(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return p.ingest.HandleSQS(ctx, ev)
}

// Post hands items to the ingest function the way POST /urls does (API
// Gateway's proxy event, at most urlmsg.MaxItems per request, a few
// requests at once). It returns once every item is stored or refused: the
// synchronous path, with no batching window in front of the store.
func (p *Pipeline) Post(ctx context.Context, items []urlmsg.Input) (Sent, error) {
	sent := Sent{Expected: map[string]urlmsg.Message{}}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, apiConcurrency)
	var wg sync.WaitGroup
	n := 0
	for chunk := range slices.Chunk(items, urlmsg.MaxItems) {
		body, err := json.Marshal(chunk)
		if err != nil {
			return sent, fmt.Errorf("encode request: %w", err)
		}
		n++
		id := fmt.Sprintf("%s-post-%d", p.opts.Prefix, p.posts.Add(1))
		offset := (n - 1) * urlmsg.MaxItems
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			status, answer, err := p.postOne(ctx, id, body)
			var out ingesthandler.APIResponse
			if err == nil {
				err = json.Unmarshal(answer, &out)
			}
			// The IDs the handler gave, recomputed from the same body.
			msgs, _, perr := urlmsg.Parse("api/"+id, body)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("POST /urls %s: %w", id, err))
				return
			case status != http.StatusAccepted:
				errs = append(errs, fmt.Errorf("POST /urls %s: status %d: %s", id, status, answer))
				return
			case perr != nil:
				errs = append(errs, fmt.Errorf("re-parse request %s: %w", id, perr))
				return
			}
			accepted := map[string]bool{}
			for _, a := range out.IDs {
				accepted[a] = true
			}
			for _, m := range msgs {
				if accepted[m.ID] {
					sent.Expected[m.ID] = m
				}
			}
			for _, e := range out.Errors {
				if e.Index >= 0 {
					e.Index += offset
				}
				sent.Rejected = append(sent.Rejected, e)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sent, err
	}
	if len(sent.Expected)+len(sent.Rejected) != len(items) {
		return sent, fmt.Errorf("POST /urls: %d of %d items neither accepted nor refused", len(items)-len(sent.Expected)-len(sent.Rejected), len(items))
	}
	return sent, nil
}

// postOne is one POST /urls of body with request id id, through the same
// translation to and from API Gateway's event as APIHandler: the status
// and body a client would read.
func (p *Pipeline) postOne(ctx context.Context, id string, body []byte) (int, []byte, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/urls", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	r.Header.Set("Content-Type", "application/json")
	resp, err := p.ingest.HandleAPI(ctx, apigw.Request(r, body, apigw.Route{Resource: "/urls", Stage: "local", RequestID: id, Arrived: time.Now()}))
	if err != nil {
		return 0, nil, err
	}
	rec := httptest.NewRecorder()
	if err := apigw.WriteResponse(rec, resp); err != nil {
		return 0, nil, err
	}
	return rec.Code, rec.Body.Bytes(), nil
}
