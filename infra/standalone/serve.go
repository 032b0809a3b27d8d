package standalone

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/urlmsg"
)

// Handler serves POST /urls as API Gateway does for the ingest function:
// each request becomes an APIGatewayProxyRequest for the ingest handler's
// HandleAPI, and its response is written back. There is no IAM here:
// anyone who can reach the listener can submit URLs.
func (rt *Runtime) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/urls", rt.serveURLs)
	return mux
}

func (rt *Runtime) serveURLs(w http.ResponseWriter, r *http.Request) {
	// One byte over the limit is enough for the handler to answer 413;
	// the rest is never read into memory.
	body, err := io.ReadAll(io.LimitReader(r.Body, urlmsg.MaxPayloadBytes+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := rt.ingest.HandleAPI(r.Context(), apiRequest(r, body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
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
}

// apiRequest is the proxy event API Gateway would build for r (REST API,
// proxy integration). Each request gets a fresh request id, which seeds the
// ids of its URLs ("api/<request id>").
func apiRequest(r *http.Request, body []byte) events.APIGatewayProxyRequest {
	var id [16]byte
	_, _ = rand.Read(id[:])
	reqID := hex.EncodeToString(id[:])
	ev := events.APIGatewayProxyRequest{
		Resource:          "/urls",
		Path:              r.URL.Path,
		HTTPMethod:        r.Method,
		Headers:           map[string]string{},
		MultiValueHeaders: map[string][]string{},
		Body:              string(body),
		RequestContext: events.APIGatewayProxyRequestContext{
			RequestID:        reqID,
			Stage:            "local",
			HTTPMethod:       r.Method,
			Path:             r.URL.Path,
			ResourcePath:     "/urls",
			RequestTimeEpoch: time.Now().UnixMilli(),
			Identity:         events.APIGatewayRequestIdentity{SourceIP: sourceIP(r.RemoteAddr), UserAgent: r.UserAgent()},
		},
	}
	for k, vs := range r.Header {
		ev.Headers[k] = vs[len(vs)-1]
		ev.MultiValueHeaders[k] = vs
	}
	if q := r.URL.Query(); len(q) > 0 {
		ev.QueryStringParameters = map[string]string{}
		ev.MultiValueQueryStringParameters = map[string][]string{}
		for k, vs := range q {
			ev.QueryStringParameters[k] = vs[len(vs)-1]
			ev.MultiValueQueryStringParameters[k] = vs
		}
	}
	return ev
}

func sourceIP(remote string) string {
	if i := strings.LastIndexByte(remote, ':'); i >= 0 {
		return strings.Trim(remote[:i], "[]")
	}
	return remote
}
