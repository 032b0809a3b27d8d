package apigw_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/runtime/apigw"
)

// TestRequest builds the event API Gateway's proxy integration hands the
// function: every query value and header value kept, the last one in the
// single maps, a body that is not UTF-8 base64-encoded.
func TestRequest(t *testing.T) {
	arrived := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		target  string
		headers [][2]string
		body    []byte
		check   func(t *testing.T, ev events.APIGatewayProxyRequest)
	}{
		{
			name: "query string", target: "/urls?dry=1&note=a%20b",
			check: func(t *testing.T, ev events.APIGatewayProxyRequest) {
				if ev.QueryStringParameters["dry"] != "1" || ev.QueryStringParameters["note"] != "a b" {
					t.Errorf("query %v, want dry=1 and note=a b", ev.QueryStringParameters)
				}
			},
		},
		{
			name: "repeated query keys", target: "/urls?x=1&x=2",
			check: func(t *testing.T, ev events.APIGatewayProxyRequest) {
				if ev.QueryStringParameters["x"] != "2" || !slices.Equal(ev.MultiValueQueryStringParameters["x"], []string{"1", "2"}) {
					t.Errorf("query %v / %v, want x=2 and x=[1 2]", ev.QueryStringParameters, ev.MultiValueQueryStringParameters)
				}
			},
		},
		{
			name: "multi-value headers", target: "/urls",
			headers: [][2]string{{"X-Trace", "a"}, {"X-Trace", "b"}, {"Idempotency-Key", "k1"}},
			check: func(t *testing.T, ev events.APIGatewayProxyRequest) {
				if ev.Headers["X-Trace"] != "b" || !slices.Equal(ev.MultiValueHeaders["X-Trace"], []string{"a", "b"}) || ev.Headers["Idempotency-Key"] != "k1" {
					t.Errorf("headers %v / %v", ev.Headers, ev.MultiValueHeaders)
				}
			},
		},
		{
			name: "text body as is", target: "/urls", body: []byte(`[{"url":"https://bücher.example/"}]`),
			check: func(t *testing.T, ev events.APIGatewayProxyRequest) {
				if ev.IsBase64Encoded || ev.Body != `[{"url":"https://bücher.example/"}]` {
					t.Errorf("body %q base64 %v, want the text as is", ev.Body, ev.IsBase64Encoded)
				}
			},
		},
		{
			name: "binary body base64", target: "/urls", body: []byte{0x1f, 0x8b, 0xff, 0x00},
			check: func(t *testing.T, ev events.APIGatewayProxyRequest) {
				got, err := base64.StdEncoding.DecodeString(ev.Body)
				if !ev.IsBase64Encoded || err != nil || !bytes.Equal(got, []byte{0x1f, 0x8b, 0xff, 0x00}) {
					t.Errorf("body %q base64 %v, want the bytes base64-encoded", ev.Body, ev.IsBase64Encoded)
				}
			},
		},
		{
			name: "context", target: "/urls",
			check: func(t *testing.T, ev events.APIGatewayProxyRequest) {
				rc := ev.RequestContext
				if ev.HTTPMethod != http.MethodPost || ev.Path != "/urls" || ev.Resource != "/urls" || rc.Stage != "local" ||
					rc.RequestID != "req-1" || rc.Identity.SourceIP != "::1" || rc.RequestTimeEpoch != arrived.UnixMilli() {
					t.Errorf("event %+v", ev)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tt.target, bytes.NewReader(tt.body))
			r.RemoteAddr = "[::1]:5555"
			for _, h := range tt.headers {
				r.Header.Add(h[0], h[1])
			}
			tt.check(t, apigw.Request(r, tt.body, apigw.Route{Resource: "/urls", Stage: "local", RequestID: "req-1", Arrived: arrived}))
		})
	}
}

// TestFreshRequestIDs: without a request id each event gets its own.
func TestFreshRequestIDs(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/urls", nil)
	a, b := apigw.Request(r, nil, apigw.Route{}), apigw.Request(r, nil, apigw.Route{})
	if a.RequestContext.RequestID == "" || a.RequestContext.RequestID == b.RequestContext.RequestID {
		t.Errorf("request ids %q and %q, want fresh ones", a.RequestContext.RequestID, b.RequestContext.RequestID)
	}
}

// TestWriteResponse writes the function's answer as API Gateway does:
// both header maps merged, the body decoded from base64, a malformed
// answer a 502.
func TestWriteResponse(t *testing.T) {
	tests := []struct {
		name      string
		resp      events.APIGatewayProxyResponse
		code      int
		body      string
		headers   map[string][]string
		malformed bool
	}{
		{
			name: "single headers",
			resp: events.APIGatewayProxyResponse{StatusCode: 202, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"accepted":1}`},
			code: 202, body: `{"accepted":1}`, headers: map[string][]string{"Content-Type": {"application/json"}},
		},
		{
			name: "multi-value headers",
			resp: events.APIGatewayProxyResponse{StatusCode: 409,
				MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}, "Vary": {"Origin"}},
				Headers:           map[string]string{"Vary": "Origin", "Retry-After": "3"}},
			code: 409, headers: map[string][]string{"Set-Cookie": {"a=1", "b=2"}, "Vary": {"Origin"}, "Retry-After": {"3"}},
		},
		{
			name: "same header, different values in both maps",
			resp: events.APIGatewayProxyResponse{StatusCode: 200,
				MultiValueHeaders: map[string][]string{"X-Note": {"a"}}, Headers: map[string]string{"X-Note": "b"}},
			code: 200, headers: map[string][]string{"X-Note": {"a", "b"}},
		},
		{
			name: "base64 body",
			resp: events.APIGatewayProxyResponse{StatusCode: 200, IsBase64Encoded: true, Body: base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff})},
			code: 200, body: string([]byte{0, 1, 2, 0xff}),
		},
		{
			name: "invalid base64",
			resp: events.APIGatewayProxyResponse{StatusCode: 200, IsBase64Encoded: true, Body: "not base64!"},
			code: http.StatusBadGateway, body: `{"message": "Internal server error"}`, malformed: true,
		},
		{
			name: "no status code",
			resp: events.APIGatewayProxyResponse{Body: "{}"},
			code: http.StatusBadGateway, body: `{"message": "Internal server error"}`, malformed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			err := apigw.WriteResponse(rec, tt.resp)
			if errors.Is(err, apigw.ErrMalformed) != tt.malformed {
				t.Fatalf("error %v, malformed %v wanted", err, tt.malformed)
			}
			if rec.Code != tt.code || rec.Body.String() != tt.body {
				t.Errorf("answer %d %q, want %d %q", rec.Code, rec.Body.String(), tt.code, tt.body)
			}
			for k, want := range tt.headers {
				if got := rec.Header().Values(k); !slices.Equal(got, want) {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
		})
	}
}
