package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
)

// TestIdempotencyKeyUnderRIE drives the deployed wiring of POST /urls: the
// built ingest bootstrap under the emulator, against the stack on moto,
// gets the same request twice with one Idempotency-Key, as a client
// retrying after a lost answer sends it (API Gateway gives the retry a
// request id of its own). The second answer replays the first, ids and
// all, and each URL is queued once.
//
// It fails against an ingest main.go that builds its handler without the
// idempotency store (before wiring.Parts.IngestHandler): build that
// bootstrap (make build at the older commit) and run
//
//	E2E_INGEST_BOOTSTRAP=/path/to/ingest/bootstrap go test -run TestIdempotencyKeyUnderRIE ./infra/e2e/
func TestIdempotencyKeyUnderRIE(t *testing.T) {
	// Only bounds a hang (the test takes a few seconds).
	ctx, cancel := context.WithTimeout(t.Context(), hangLimit)
	defer cancel()
	motoSrv := startMoto(t, ctx)
	awsCfg, err := moto.AWSConfig(ctx, motoSrv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := stack.Load("")
	if err != nil {
		t.Fatal(err)
	}
	st, err := tpl.Deploy(ctx, awsCfg, stack.Options{Prefix: stack.UniquePrefix("e2e-idem"), ShardCount: 1})
	if err != nil {
		t.Fatalf("deploy the stack on moto: %v", err)
	}
	ingest := startFunction(t, ctx, st, "IngestFunction", bins.ingest, motoSrv.Endpoint, nil, 0)

	var req events.APIGatewayProxyRequest
	if err := json.Unmarshal(readEvent(t, "ingest-api.json"), &req); err != nil {
		t.Fatalf("ingest-api.json: %v", err)
	}
	post := func(requestID string) (events.APIGatewayProxyResponse, []string) {
		t.Helper()
		r := req
		r.Headers = map[string]string{"Content-Type": "application/json", ingesthandler.IdempotencyHeader: "retry-me-1"}
		r.MultiValueHeaders = nil
		r.RequestContext.RequestID = requestID
		ev, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var resp events.APIGatewayProxyResponse
		invokeJSON(t, ctx, ingest, "POST /urls "+requestID, ev, &resp)
		var body struct {
			Accepted int      `json:"accepted"`
			IDs      []string `json:"ids"`
		}
		if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
			t.Fatalf("POST /urls %s: body %q: %v", requestID, resp.Body, err)
		}
		if resp.StatusCode != http.StatusAccepted || body.Accepted != len(body.IDs) || len(body.IDs) == 0 {
			t.Fatalf("POST /urls %s: %d %s, want 202 with the accepted ids", requestID, resp.StatusCode, resp.Body)
		}
		return resp, body.IDs
	}
	first, firstIDs := post("first-" + time.Now().Format("150405.000"))
	second, secondIDs := post("retry-" + time.Now().Format("150405.000"))
	if first.Headers[ingesthandler.ReplayedHeader] != "" {
		t.Errorf("first answer has %s: %q, want none", ingesthandler.ReplayedHeader, first.Headers[ingesthandler.ReplayedHeader])
	}
	if got := second.Headers[ingesthandler.ReplayedHeader]; got != "true" {
		t.Errorf("second answer's %s is %q, want true (a replay); headers %v", ingesthandler.ReplayedHeader, got, second.Headers)
	}
	if !slices.Equal(firstIDs, secondIDs) {
		t.Errorf("second answer's ids %v, want the first answer's %v", secondIDs, firstIDs)
	}

	// Each URL is queued once, under the first answer's id: read back
	// from the table the function wrote.
	msgs, bad, err := urlmsg.Parse("api/check", []byte(req.Body))
	if err != nil || len(bad) > 0 {
		t.Fatalf("ingest-api.json body: %v %v", err, bad)
	}
	byHost := map[string][]string{}
	for i, m := range msgs {
		byHost[m.Host] = append(byHost[m.Host], firstIDs[i])
	}
	store := dynamo.New(dynamodb.NewFromConfig(awsCfg), st.TableName, time.Now)
	for host, ids := range byHost {
		h, err := store.Load(ctx, hostqueue.QueueKey(host, false), 10)
		if err != nil {
			t.Fatalf("load %s: %v", host, err)
		}
		var stored []string
		for _, e := range h.Head {
			stored = append(stored, e.ID)
		}
		if h.Pending != len(ids) || !slices.Equal(stored, ids) {
			t.Errorf("host %s queues %d urls %v, want each posted url once: %v", host, h.Pending, stored, ids)
		}
	}
	logReports(t, "ingest", ingest)
}
