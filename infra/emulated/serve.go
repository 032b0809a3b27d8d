package emulated

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/apigw"
)

// Serve runs the deployment's event sources until ctx ends, as AWS would
// run them for a deployed stack: the input queue's event source mapping
// (ingest), the wake queue's mapping and one schedule per shard (check).
// Unlike Run it does not read the output queue: results stay there for
// whoever consumes them (the AWS CLI, a user's program).
func (p *Pipeline) Serve(ctx context.Context) {
	c := &collector{want: map[string]bool{}, seen: map[string]int{}, report: Report{}}
	var wg sync.WaitGroup
	wg.Add(2 + p.svc.Config.ShardCount)
	go func() { defer wg.Done(); p.pollInput(ctx, c) }()
	go func() { defer wg.Done(); p.ServeWakes(ctx) }()
	for s := 0; s < p.svc.Config.ShardCount; s++ {
		go func() { defer wg.Done(); p.schedule(ctx, s, c) }()
	}
	wg.Wait()
}

// APIHandler serves POST /urls as API Gateway's proxy integration does for
// the ingest function: each request becomes an APIGatewayProxyRequest for
// the ingest handler, and its answer is written back (both through
// shared/runtime/apigw, as local mode's serve does). There is no IAM:
// anyone who reaches the listener can submit URLs.
func (p *Pipeline) APIHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/urls", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			// What API Gateway answers for a method with no integration.
			http.Error(w, `{"message":"Missing Authentication Token"}`, http.StatusForbidden)
			return
		}
		// One byte over the limit is enough for the handler to answer 413;
		// the rest is never read into memory.
		body, err := io.ReadAll(io.LimitReader(r.Body, urlmsg.MaxPayloadBytes+1))
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		ev := apigw.Request(r, body, apigw.Route{Resource: "/urls", Stage: "local", Arrived: time.Now()})
		resp, err := p.ingest.HandleAPI(r.Context(), ev)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := apigw.WriteResponse(w, resp); err != nil {
			p.log.ErrorContext(r.Context(), "answer POST /urls", "error", err)
		}
	})
	return mux
}
