// Package apigw translates an HTTP request into the event API Gateway's
// REST API hands a Lambda proxy integration, and the function's answer
// back into an HTTP response, as API Gateway does. Local mode's serve and
// the emulated stack's API both put the ingest handler behind it, so the
// handler sees on one machine the event it sees deployed.
//
// The event's shape and the merge of the answer's headers follow
// https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-lambda-proxy-integrations.html
package apigw

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// Route is what API Gateway adds to a request: the resource it matched,
// the stage, the request id and when the request arrived.
type Route struct {
	// Resource is the resource's path template ("/urls").
	Resource string
	Stage    string
	// RequestID is the request's id; empty: a fresh random one.
	RequestID string
	// Arrived is the request's arrival (requestTimeEpoch, from which API
	// Gateway counts its 29 s integration timeout).
	Arrived time.Time
}

// Request is the proxy event API Gateway builds for r with body, the
// request's body as read (the caller bounds it). Headers and query
// parameters keep every value (multiValue*) and the last one (the single
// maps). A body that is not UTF-8 arrives base64-encoded, as API Gateway
// passes a binary media type, so no byte is lost.
func Request(r *http.Request, body []byte, rt Route) events.APIGatewayProxyRequest {
	id := rt.RequestID
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		id = hex.EncodeToString(b[:])
	}
	ev := events.APIGatewayProxyRequest{
		Resource:          rt.Resource,
		Path:              r.URL.Path,
		HTTPMethod:        r.Method,
		Headers:           map[string]string{},
		MultiValueHeaders: map[string][]string{},
		Body:              string(body),
		RequestContext: events.APIGatewayProxyRequestContext{
			RequestID:        id,
			Stage:            rt.Stage,
			HTTPMethod:       r.Method,
			Path:             r.URL.Path,
			ResourcePath:     rt.Resource,
			RequestTimeEpoch: rt.Arrived.UnixMilli(),
			Identity:         events.APIGatewayRequestIdentity{SourceIP: sourceIP(r.RemoteAddr), UserAgent: r.UserAgent()},
		},
	}
	if !utf8.Valid(body) {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	for k, vs := range r.Header {
		ev.Headers[k] = vs[len(vs)-1]
		ev.MultiValueHeaders[k] = slices.Clone(vs)
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

// sourceIP is the address part of a RemoteAddr ("host:port").
func sourceIP(remote string) string {
	if i := strings.LastIndexByte(remote, ':'); i >= 0 {
		return strings.Trim(remote[:i], "[]")
	}
	return remote
}

// ErrMalformed is returned by WriteResponse for an answer API Gateway
// cannot turn into a response (no status code, a body that is not the
// base64 it claims to be): it answers 502 for those.
var ErrMalformed = errors.New("malformed Lambda proxy response")

// WriteResponse writes resp to w as API Gateway does: the headers of
// both maps merged (a value in both appears once), the body decoded when
// base64-encoded. A malformed answer becomes API Gateway's 502, and the
// error says why.
func WriteResponse(w http.ResponseWriter, resp events.APIGatewayProxyResponse) error {
	body := []byte(resp.Body)
	var err error
	switch {
	case resp.StatusCode < 100 || resp.StatusCode > 599:
		err = fmt.Errorf("%w: status code %d", ErrMalformed, resp.StatusCode)
	case resp.IsBase64Encoded:
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			err = fmt.Errorf("%w: body is not base64: %v", ErrMalformed, err)
		}
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"message": "Internal server error"}`))
		return err
	}
	h := w.Header()
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for k, v := range resp.Headers {
		if !slices.Contains(h.Values(k), v) {
			h.Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
	return nil
}
