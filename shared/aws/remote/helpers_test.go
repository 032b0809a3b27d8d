package remote

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/domain/backoff"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// fastRetry keeps the tests' retries short; the waits themselves are the
// real ones (backoff.Sleep).
var fastRetry = backoff.Policy{Base: time.Millisecond, Max: 10 * time.Millisecond, Attempts: 8}

// recordingSQS forwards to moto, records every SendMessageBatch call and
// can fail entries or stop the run at a chosen call.
type recordingSQS struct {
	*sqs.Client
	mu    sync.Mutex
	calls [][]string // entry bodies per call, as sent
	// fail, if set, says whether entry e of call c (both from 0) fails
	// without being sent, and whether as the sender's fault.
	fail func(call, entry int) (failed, senderFault bool)
	// after, if set, runs after call c was answered.
	after func(call int)
	// ambiguous are the bodies of calls whose outcome the sender could not
	// know: the SDK sent them more than once (a reset connection lost an
	// answer) or gave up with an error. Those may be on the queue twice,
	// as on SQS; nothing else may.
	ambiguous []string
}

// mayRepeat returns the URLs of the ambiguous calls' messages.
func (r *recordingSQS) mayRepeat(t *testing.T) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return urlsOf(t, r.ambiguous)
}

func (r *recordingSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	r.mu.Lock()
	call := len(r.calls)
	var bodies []string
	for _, e := range in.Entries {
		bodies = append(bodies, aws.ToString(e.MessageBody))
	}
	r.calls = append(r.calls, bodies)
	r.mu.Unlock()

	fwd := *in
	fwd.Entries = nil
	var failed []sqstypes.BatchResultErrorEntry
	for i, e := range in.Entries {
		if r.fail != nil {
			if f, sender := r.fail(call, i); f {
				failed = append(failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected"), SenderFault: sender})
				continue
			}
		}
		fwd.Entries = append(fwd.Entries, e)
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(fwd.Entries) > 0 {
		res, err := r.Client.SendMessageBatch(ctx, &fwd, opts...)
		if attempts, ok := retry.GetAttemptResults(resultMetadata(res)); err != nil || ok && len(attempts.Results) > 1 {
			r.mu.Lock()
			for _, e := range fwd.Entries {
				r.ambiguous = append(r.ambiguous, aws.ToString(e.MessageBody))
			}
			r.mu.Unlock()
		}
		if err != nil {
			return nil, err
		}
		out = res
	}
	out.Failed = append(out.Failed, failed...)
	if r.after != nil {
		r.after(call)
	}
	return out, nil
}

// drain receives and deletes everything on a queue, until it has been
// empty for a few polls, and returns the bodies. The strict layer's
// redelivery of deleted messages is turned off for the queue (the tests
// count copies); a receive whose answer a reset connection lost leaves its
// messages invisible, so drain polls until they are visible again.
func drain(t *testing.T, c *sqs.Client, queue string) []string {
	t.Helper()
	name := queue[strings.LastIndex(queue, "/")+1:]
	if err := moto.SetStrictQueue(t.Context(), aws.ToString(c.Options().BaseEndpoint), name, map[string]any{moto.KnobSQSRedeliverShare: 0}); err != nil {
		t.Fatal(err)
	}
	const visibility = 10 * time.Second
	var bodies []string
	var lostAt time.Time
	for empty := 0; empty < 3 || time.Since(lostAt) <= visibility; {
		out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: &queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: int32(visibility / time.Second)})
		if err != nil {
			t.Fatalf("drain %s: %v", queue, err)
		}
		if attempts, ok := retry.GetAttemptResults(out.ResultMetadata); ok && len(attempts.Results) > 1 {
			lostAt = time.Now()
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if _, err := c.DeleteMessageBatch(t.Context(), &sqs.DeleteMessageBatchInput{QueueUrl: &queue, Entries: del}); err != nil {
			t.Fatalf("drain %s: %v", queue, err)
		}
	}
	return bodies
}

// urlsOf parses queue messages with ingest's parser and counts each URL.
func urlsOf(t *testing.T, bodies []string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, b := range bodies {
		good, bad, err := urlmsg.Parse("m", []byte(b))
		if err != nil || len(bad) > 0 {
			t.Fatalf("ingest would refuse a message: %v %v", err, bad)
		}
		for _, g := range good {
			seen[g.URL]++
		}
	}
	return seen
}

// writeList writes n URLs over hosts hosts, interleaved, with a comment
// and a blank line, and returns its path and the URLs.
func writeList(t *testing.T, n, hosts int) (string, []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# a list\n\n")
	var urls []string
	for i := range n {
		u := fmt.Sprintf("http://h%d.example/page/%d?q=%s", i%hosts, i, strings.Repeat("x", i%40))
		urls = append(urls, u)
		if i%3 == 0 {
			fmt.Fprintf(&b, "{\"url\": %q}\n", u)
		} else {
			b.WriteString(u + "\n")
		}
	}
	path := filepath.Join(t.TempDir(), "urls.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, urls
}

// exactlyOnce fails t unless seen holds every URL of want once, and no
// other; a URL in mayRepeat (recordingSQS.mayRepeat) may be there twice.
func exactlyOnce(t *testing.T, seen map[string]int, want []string, mayRepeat ...map[string]int) {
	t.Helper()
	for _, u := range want {
		n := seen[u]
		repeatable := false
		for _, m := range mayRepeat {
			repeatable = repeatable || m[u] > 0
		}
		if n != 1 && !(repeatable && n == 2) {
			t.Fatalf("%s on the queue %d times, want once (twice at most if its send was ambiguous: %v)", u, n, repeatable)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d distinct URLs on the queue, want %d", len(seen), len(want))
	}
}

// resultMetadata is out's ResultMetadata, or none for a nil out.
func resultMetadata(out *sqs.SendMessageBatchOutput) middleware.Metadata {
	if out == nil {
		return middleware.Metadata{}
	}
	return out.ResultMetadata
}
