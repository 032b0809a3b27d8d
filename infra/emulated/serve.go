package emulated

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
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
// the ingest handler, and its answer is written back. There is no IAM:
// anyone who reaches the listener can submit URLs. (shared/runtime/localmode has
// the same adapter for local mode's own handler.)
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
		resp, err := p.ingest.HandleAPI(r.Context(), proxyRequest(r, body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		out := []byte(resp.Body)
		if resp.IsBase64Encoded {
			if out, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
				http.Error(w, "handler answered invalid base64", http.StatusInternalServerError)
				return
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(out)
	})
	return mux
}

// proxyRequest is the event API Gateway builds for r; a fresh request id
// seeds the ids of its URLs.
func proxyRequest(r *http.Request, body []byte) events.APIGatewayProxyRequest {
	var id [16]byte
	_, _ = rand.Read(id[:])
	ev := events.APIGatewayProxyRequest{
		Resource: "/urls", Path: r.URL.Path, HTTPMethod: r.Method, Body: string(body),
		Headers: map[string]string{}, MultiValueHeaders: map[string][]string{},
		RequestContext: events.APIGatewayProxyRequestContext{
			RequestID: hex.EncodeToString(id[:]), Stage: "local", HTTPMethod: r.Method,
			Path: r.URL.Path, ResourcePath: "/urls", RequestTimeEpoch: time.Now().UnixMilli(),
			Identity: events.APIGatewayRequestIdentity{UserAgent: r.UserAgent(),
				SourceIP: strings.Trim(r.RemoteAddr[:max(strings.LastIndexByte(r.RemoteAddr, ':'), 0)], "[]")},
		},
	}
	for k, vs := range r.Header {
		ev.Headers[k] = vs[len(vs)-1]
		ev.MultiValueHeaders[k] = vs
	}
	return ev
}
