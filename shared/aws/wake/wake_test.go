package wake_test

// Wake-ups against a real moto server, on the wake queue template.yaml
// declares (created per test by internal/stack).

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/wake"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type env struct {
	t     *testing.T
	sqs   *sqs.Client
	queue string
	clock *clock
	q     *wake.Queue
}

func newEnv(t *testing.T, shards int) *env {
	t.Helper()
	st, cfg := stack.DeployForTest(t, stack.Options{})
	if st.WakeEventSource.QueueURL == "" {
		t.Fatal("the template has no wake queue on CheckFunction")
	}
	e := &env{t: t, sqs: sqs.NewFromConfig(cfg), queue: st.WakeEventSource.QueueURL, clock: &clock{now: time.Unix(1_800_000_000, 0)}}
	e.q = &wake.Queue{Client: e.sqs, URL: e.queue, ShardCount: shards, Now: e.clock.Now}
	return e
}

// received reads what is visible on the queue now (one long poll after the
// first empty answer) as shards, sorted, and deletes it.
func (e *env) received() []int {
	e.t.Helper()
	var shards []int
	for {
		out, err := e.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &e.queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			slices.Sort(shards)
			return shards
		}
		for _, m := range out.Messages {
			var msg wake.Message
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &msg); err != nil {
				e.t.Fatalf("wake-up body %q: %v", aws.ToString(m.Body), err)
			}
			shards = append(shards, msg.Shard)
			if _, err := e.sqs.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &e.queue, ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

// TestWakeOncePerShard: virtual shards map to their check shard
// (v % ShardCount), each woken once per call however many hosts it got.
func TestWakeOncePerShard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4)
	if err := e.q.Wake(t.Context(), []int{1, 5, 9, 2, 14}); err != nil {
		t.Fatal(err)
	}
	if got := e.received(); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("woke shards %v, want [1 2] (vshards 1,5,9 -> 1; 2,14 -> 2)", got)
	}
	if err := e.q.Wake(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if got := e.received(); len(got) != 0 {
		t.Errorf("no virtual shards woke %v", got)
	}
}

// TestWakeThrottled: a shard woken a moment ago is woken again once Every
// has passed (a delayed message), and only once however many batches come
// meanwhile; after Every a wake-up goes at once.
func TestWakeThrottled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	e.q.Every = 2 * time.Second
	if err := e.q.Wake(t.Context(), []int{0}); err != nil {
		t.Fatal(err)
	}
	e.clock.add(500 * time.Millisecond)
	for range 3 {
		if err := e.q.Wake(t.Context(), []int{0, 2}); err != nil {
			t.Fatal(err)
		}
	}
	// The first is visible at once; the second is delayed (whole seconds,
	// rounded up: 2 s).
	if got := e.received(); !slices.Equal(got, []int{0}) {
		t.Fatalf("visible at once: %v, want only the first wake-up of shard 0", got)
	}
	time.Sleep(2200 * time.Millisecond)
	if got := e.received(); !slices.Equal(got, []int{0}) {
		t.Errorf("after the delay: %v, want exactly one more wake-up of shard 0", got)
	}
	// Later than Every after the delayed one: at once again.
	e.clock.add(5 * time.Second)
	if err := e.q.Wake(t.Context(), []int{1}); err != nil {
		t.Fatal(err)
	}
	if err := e.q.Wake(t.Context(), []int{0}); err != nil {
		t.Fatal(err)
	}
	if got := e.received(); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("after Every: %v, want shards 0 and 1 at once", got)
	}
}

// TestWakeFailureForgotten: a wake-up that could not be sent is reported
// and does not hold back the next one.
func TestWakeFailureForgotten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4)
	good := e.q.URL
	e.q.URL = strings.TrimSuffix(good, "/") + "-missing"
	err := e.q.Wake(t.Context(), []int{3})
	if err == nil || !strings.Contains(err.Error(), "[3]") {
		t.Fatalf("wake to a missing queue: err = %v, want one naming shard 3", err)
	}
	e.q.URL = good
	if err := e.q.Wake(t.Context(), []int{3}); err != nil {
		t.Fatal(err)
	}
	if got := e.received(); !slices.Equal(got, []int{3}) {
		t.Errorf("after a failed wake-up: %v, want shard 3 woken at once", got)
	}
}
