package sqsout_test

// Integration tests of the publisher against a real moto server, on the
// output queue template.yaml declares (created per test by internal/stack).

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/sqsout"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// counting passes SendMessageBatch to the real client and counts the calls
// and the largest batch.
type counting struct {
	sqsout.Client
	calls      atomic.Int64
	maxEntries atomic.Int64
}

func (c *counting) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opt ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	c.calls.Add(1)
	for {
		m := c.maxEntries.Load()
		if int64(len(in.Entries)) <= m || c.maxEntries.CompareAndSwap(m, int64(len(in.Entries))) {
			break
		}
	}
	return c.Client.SendMessageBatch(ctx, in, opt...)
}

type env struct {
	t     *testing.T
	sqs   *sqs.Client
	queue string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, stack.Options{})
}

// newEnvWith deploys with opts (template parameters such as the output
// queue's OutputMaxMessageBytes).
func newEnvWith(t *testing.T, opts stack.Options) *env {
	t.Helper()
	st, cfg := stack.DeployForTest(t, opts)
	return &env{t: t, sqs: sqs.NewFromConfig(cfg), queue: st.OutputQueueURL}
}

// receive reads messages until it has want of them or the queue stays empty
// for a long poll after the deadline; it returns their raw bodies.
func (e *env) receive(want int) []string {
	e.t.Helper()
	var bodies []string
	deadline := time.Now().Add(20 * time.Second)
	for len(bodies) < want && time.Now().Before(deadline) {
		out, err := e.sqs.ReceiveMessage(e.t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: &e.queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 300,
		})
		if err != nil {
			e.t.Fatalf("receive: %v", err)
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
	}
	return bodies
}

// receiveNoMore checks that nothing beyond what was received is queued.
func (e *env) receiveNoMore() {
	e.t.Helper()
	out, err := e.sqs.ReceiveMessage(e.t.Context(), &sqs.ReceiveMessageInput{QueueUrl: &e.queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		e.t.Fatalf("receive: %v", err)
	}
	if len(out.Messages) > 0 {
		e.t.Errorf("%d messages more than published, first: %.200s", len(out.Messages), aws.ToString(out.Messages[0].Body))
	}
}

func decode(t *testing.T, bodies []string) map[string]result.Result {
	t.Helper()
	got := map[string]result.Result{}
	for _, b := range bodies {
		var r result.Result
		if err := json.Unmarshal([]byte(b), &r); err != nil {
			t.Fatalf("message is not a result: %v: %.200s", err, b)
		}
		if _, dup := got[r.ID]; dup {
			t.Errorf("result %s arrived twice", r.ID)
		}
		got[r.ID] = r
	}
	return got
}

func results(tag string, n int) []result.Result {
	statuses := []result.Status{result.StatusFetched, result.StatusFetchError, result.StatusDenied, result.StatusDropped, result.StatusNotModified}
	out := make([]result.Result, n)
	for i := range out {
		r := result.Result{
			ID: fmt.Sprintf("%s-%03d", tag, i), Host: "h.example", URL: fmt.Sprintf("https://h.example/%s/%d", tag, i),
			Status: statuses[i%len(statuses)], FetchedAt: time.UnixMilli(1_760_000_000_000 + int64(i)).UTC(),
		}
		if r.Status == result.StatusFetched {
			r.HTTPStatus = 200
			r.SetBody([]byte(fmt.Sprintf("<p>body %d \"quoted\" \u00e9\u20ac</p>\n", i)))
		}
		out[i] = r
	}
	return out
}

func TestPublishArrives(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := &counting{Client: e.sqs}
	p := sqsout.New(c, e.queue, sqsout.Options{})
	defer p.Close()
	sent := results("r", 25)

	if err := p.Publish(t.Context(), sent); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	// 25 results from one caller: two full batches and one of five.
	if c.calls.Load() != 3 || c.maxEntries.Load() != 10 {
		t.Errorf("%d SendMessageBatch calls, largest %d entries; want 3 and 10", c.calls.Load(), c.maxEntries.Load())
	}
	got := decode(t, e.receive(len(sent)))
	if len(got) != len(sent) {
		t.Errorf("received %d results, want %d", len(got), len(sent))
	}
	for _, want := range sent {
		r, ok := got[want.ID]
		if !ok {
			t.Errorf("result %s never arrived", want.ID)
			continue
		}
		if r.URL != want.URL || r.Status != want.Status || r.Data != want.Data || r.SHA256 != want.SHA256 || !r.FetchedAt.Equal(want.FetchedAt) || r.Truncated {
			t.Errorf("result %s arrived as %+v, sent %+v", want.ID, r, want)
		}
	}
	e.receiveNoMore()
}

// TestPublishCoalesces has 20 goroutines publish at once, as the check
// engine's host workers do: their results share batches.
func TestPublishCoalesces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := &counting{Client: e.sqs}
	// A longer linger than the default 20 ms, so that goroutines slowed by
	// -race on a loaded machine still meet in the same window; the code path
	// is the same.
	p := sqsout.New(c, e.queue, sqsout.Options{Linger: 200 * time.Millisecond})
	defer p.Close()

	const callers = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	var total atomic.Int64
	for i := range callers {
		rs := results(fmt.Sprintf("g%02d", i), 1+i%3)
		total.Add(int64(len(rs)))
		wg.Go(func() {
			<-start
			if err := p.Publish(t.Context(), rs); err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	n := int(total.Load())
	if limit := (n+9)/10 + 2; c.calls.Load() > int64(limit) {
		t.Errorf("%d results from %d callers took %d SendMessageBatch calls, want at most %d", n, callers, c.calls.Load(), limit)
	}
	if c.maxEntries.Load() > sqsout.MaxBatchEntries {
		t.Errorf("a batch had %d entries, over SQS's %d", c.maxEntries.Load(), sqsout.MaxBatchEntries)
	}
	got := decode(t, e.receive(n))
	if len(got) != n {
		t.Errorf("received %d results, want %d", len(got), n)
	}
	e.receiveNoMore()
	t.Logf("%d results from %d concurrent callers in %d SendMessageBatch calls", n, callers, c.calls.Load())
}

// TestPublishCutsBigBodies sends bodies larger than a message: each is cut
// to fit (Truncated), keeps the size and hash of the whole body, and the
// queue accepts it.
func TestPublishCutsBigBodies(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 7))
	text := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog.\n", (1<<20)/45+1))[:1<<20]
	multibyte := []byte(strings.Repeat("h\u00e9llo w\u00f6rld \u20ac\u20ac\u20ac \U0001F600\n", 40_000)) // > 1 MB, 2-4 byte runes
	binary := make([]byte, 1<<20)
	for i := range binary {
		binary[i] = byte(rng.UintN(256))
	}
	small := results("small", 1)[0]

	for _, tc := range []struct {
		name     string
		max      int
		wantSize int // every message body is at most this many bytes
	}{
		{"default 256 KiB", 0, sqsout.DefaultMaxMessageBytes},
		{"1 MiB", 1 << 20, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The queue's MaximumMessageSize is the template's
			// OutputMaxMessageBytes: the publisher's limit must match it.
			size := tc.max
			if size == 0 {
				size = sqsout.DefaultMaxMessageBytes
			}
			e := newEnvWith(t, stack.Options{TemplateParams: map[string]string{"OutputMaxMessageBytes": strconv.Itoa(size)}})
			c := &counting{Client: e.sqs}
			p := sqsout.New(c, e.queue, sqsout.Options{MaxMessageBytes: tc.max})
			defer p.Close()
			var sent []result.Result
			for _, b := range []struct {
				id   string
				body []byte
			}{{"text", text}, {"multibyte", multibyte}, {"binary", binary}} {
				r := result.Result{ID: b.id, Host: "h.example", URL: "https://h.example/" + b.id, Status: result.StatusFetched, HTTPStatus: 200}
				r.SetBody(b.body)
				sent = append(sent, r)
			}
			sent = append(sent, small)
			if err := p.Publish(t.Context(), sent); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			bodies := e.receive(len(sent))
			for _, b := range bodies {
				if len(b) > tc.wantSize {
					t.Errorf("a message of %d bytes, over %d", len(b), tc.wantSize)
				}
			}
			got := decode(t, bodies)
			for _, want := range sent[:3] {
				r, ok := got[want.ID]
				if !ok {
					t.Errorf("%s never arrived", want.ID)
					continue
				}
				if !r.Truncated || r.Bytes != want.Bytes || r.SHA256 != want.SHA256 || r.Encoding != want.Encoding {
					t.Errorf("%s: truncated %v, bytes %d, sha %s, encoding %q; want true, %d, %s, %q", want.ID, r.Truncated, r.Bytes, r.SHA256, r.Encoding, want.Bytes, want.SHA256, want.Encoding)
				}
				if len(r.Data) == 0 || !strings.HasPrefix(want.Data, r.Data) {
					t.Errorf("%s: Data is %d bytes and not a prefix of the body", want.ID, len(r.Data))
				}
				if len(r.Data) < tc.wantSize/2 {
					t.Errorf("%s: kept only %d bytes of data in a %d-byte message", want.ID, len(r.Data), tc.wantSize)
				}
			}
			if r, ok := got[small.ID]; !ok || r.Truncated || r.Data != small.Data {
				t.Errorf("small result next to big ones: %+v (found %v)", r, ok)
			}
			// Three messages near the size limit cannot share a batch.
			if c.calls.Load() < 3 {
				t.Errorf("%d SendMessageBatch calls for three near-limit messages", c.calls.Load())
			}
			e.receiveNoMore()
		})
	}
}

// TestPublishMissingQueue publishes to a queue that does not exist: Publish
// must fail, and promptly, not hang on retries.
func TestPublishMissingQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	missing := e.queue + "-missing"
	p := sqsout.New(e.sqs, missing, sqsout.Options{})
	defer p.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	start := time.Now()
	err := p.Publish(ctx, results("m", 3))
	took := time.Since(start)
	if err == nil {
		t.Fatal("Publish to a missing queue succeeded")
	}
	if ctx.Err() != nil {
		t.Fatalf("Publish returned only when its context ended (%v): %v", took, err)
	}
	if took > 15*time.Second {
		t.Errorf("Publish took %v to fail", took)
	}
	if !strings.Contains(err.Error(), "3 of 3 not sent") {
		t.Errorf("error %q does not say how many results were not sent", err)
	}
	t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
}

// TestPublishNoncharactersArrive: a result whose body and texts hold
// characters SQS refuses raw (U+FFFE, U+FFFF) reaches the queue as a
// message of SQS's character set only (moto does not check it, so the test
// does), and decodes to the body byte for byte.
func TestPublishNoncharactersArrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := sqsout.New(e.sqs, e.queue, sqsout.Options{})
	defer p.Close()
	const odd = "x\ufffey\uffffz"
	r := result.Result{ID: "n", Host: "h.example", URL: "https://h.example/" + odd, Status: result.StatusFetched, HTTPStatus: 200,
		Location: odd, ETag: odd, Error: odd, FetchedAt: time.Unix(1, 0).UTC()}
	r.SetBody([]byte("<p>" + odd + "</p>"))
	if err := p.Publish(t.Context(), []result.Result{r}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	bodies := e.receive(1)
	for _, b := range bodies {
		for _, c := range b {
			if c != 0x9 && c != 0xA && c != 0xD && (c < 0x20 || c > 0xD7FF && c < 0xE000 || c > 0xFFFD && c < 0x10000) {
				t.Fatalf("message holds %U, which SQS refuses: %q", c, b)
			}
		}
	}
	got := decode(t, bodies)["n"]
	if got.Data != r.Data || got.Location != odd || got.ETag != odd || got.Error != odd || got.URL != r.URL {
		t.Errorf("arrived as %+v, sent %+v", got, r)
	}
}
