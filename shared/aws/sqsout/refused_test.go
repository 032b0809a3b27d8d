package sqsout_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/urldownloader/urldownloader/shared/aws/sqsout"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// refusing stands in for SQS refusing messages as final, which moto never
// does: it refuses every message containing poison, per entry (as
// SendMessageBatch reports a bad entry) or, with wholeCall, the whole call.
// It records what it took.
type refusing struct {
	poison    string
	wholeCall bool

	mu    sync.Mutex
	calls int
	taken []string
}

func (f *refusing) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if strings.Contains(aws.ToString(e.MessageBody), f.poison) {
			if f.wholeCall {
				return nil, &smithy.GenericAPIError{Code: "InvalidMessageContents", Message: "Invalid characters found", Fault: smithy.FaultClient}
			}
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidMessageContents"),
				Message: aws.String("Invalid characters found"), SenderFault: true})
		}
	}
	for _, e := range in.Entries {
		if !strings.Contains(aws.ToString(e.MessageBody), f.poison) {
			f.taken = append(f.taken, aws.ToString(e.MessageBody))
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m")})
		}
	}
	return out, nil
}

// TestPublishReplacesARefusedResult: a result SQS refuses as final (here
// for its body) ends its URL all the same, with an error result that says
// so, sent in its place; the results beside it go out as they were, and
// Publish succeeds, so the host's commit passes the URL.
func TestPublishReplacesARefusedResult(t *testing.T) {
	for _, whole := range []bool{false, true} {
		name := map[bool]string{false: "entry refused", true: "call refused"}[whole]
		t.Run(name, func(t *testing.T) {
			c := &refusing{poison: "POISON", wholeCall: whole}
			p := sqsout.New(c, "q", sqsout.Options{Linger: time.Millisecond})
			defer p.Close()
			rs := []result.Result{
				{ID: "a", Host: "h", URL: "http://h/a", Status: result.StatusFetched, HTTPStatus: 200, Data: "fine"},
				{ID: "b", Host: "h", URL: "http://h/b", Status: result.StatusFetched, HTTPStatus: 200, Data: "a POISON body", ETag: "e"},
				{ID: "c", Host: "h", URL: "http://h/c", Status: result.StatusFetched, HTTPStatus: 200, Data: "fine too"},
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := p.Publish(ctx, rs); err != nil {
				t.Fatalf("Publish: %v; want the refused result replaced", err)
			}
			got := map[string]result.Result{}
			for _, b := range c.taken {
				var r result.Result
				if err := json.Unmarshal([]byte(b), &r); err != nil {
					t.Fatal(err)
				}
				got[r.ID] = r
			}
			if len(c.taken) != 3 || got["a"].Data != "fine" || got["c"].Data != "fine too" {
				t.Fatalf("sent %q, want a and c as they were and one result for b", c.taken)
			}
			b := got["b"]
			if b.Status != result.StatusFetchError || b.URL != "http://h/b" || b.HTTPStatus != 200 || b.Data != "" || b.ETag != "" ||
				!strings.Contains(b.Error, "output queue refused the fetched result") || !strings.Contains(b.Error, "InvalidMessageContents") {
				t.Errorf("b sent as %+v, want a fetch_error naming the refusal, without the body", b)
			}
		})
	}
}

// TestPublishGivesUpOnARefusedReplacement: when even the replacement is
// refused, Publish fails after a bounded number of calls instead of
// retrying forever.
func TestPublishGivesUpOnARefusedReplacement(t *testing.T) {
	c := &refusing{poison: "http://h/"} // in the URL: the replacement carries it too
	p := sqsout.New(c, "q", sqsout.Options{Linger: time.Millisecond})
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := p.Publish(ctx, []result.Result{{ID: "a", Host: "h", URL: "http://h/a", Status: result.StatusFetched}})
	if err == nil || !strings.Contains(err.Error(), "InvalidMessageContents") {
		t.Fatalf("Publish = %v, want the refusal", err)
	}
	if c.calls != 2 {
		t.Errorf("%d calls, want 2 (the result, then its replacement)", c.calls)
	}
}
