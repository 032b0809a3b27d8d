// Package wake asks the check function to run a shard now, through the wake
// queue the check function is subscribed to. The schedule invokes each
// shard once a minute and an idle run ends at once (Lambda bills the time),
// so without a wake-up a URL for an idle shard would wait up to a minute;
// with it, the first request follows the ingest within about a second.
package wake

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Sender is the part of the SQS client the queue uses.
type Sender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Message is the body of one wake-up: the check function's shard.
type Message struct {
	Shard int `json:"shard"`
}

// DefaultEvery is the least time between two wake-ups of one shard sent by
// one process.
const DefaultEvery = 5 * time.Second

// Queue sends wake-ups. A shard woken less than Every ago is woken again
// once that time is up (an SQS message delay), never more often: a wake-up
// that finds a live run costs a Lambda invocation and a failed lease write
// per virtual shard, so a stream of new hosts must not send one per batch.
// Safe for concurrent use.
type Queue struct {
	Client     Sender
	URL        string
	ShardCount int
	Now        func() time.Time
	// Every is the least time between two wake-ups of one shard from this
	// process; zero means DefaultEvery.
	Every time.Duration

	mu sync.Mutex
	// last is, by shard, when the latest wake-up was sent for (a delayed
	// one: in the future).
	last map[int]time.Time
}

// Wake wakes the check shards owning the given virtual shards.
func (q *Queue) Wake(ctx context.Context, vshards []int) error {
	if len(vshards) == 0 {
		return nil
	}
	every := q.Every
	if every <= 0 {
		every = DefaultEvery
	}
	now := q.Now()
	var shards []int
	for _, v := range vshards {
		if s := v % max(1, q.ShardCount); !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	slices.Sort(shards)
	var send []pending
	q.mu.Lock()
	if q.last == nil {
		q.last = map[int]time.Time{}
	}
	for _, s := range shards {
		l, ok := q.last[s]
		at := now
		switch {
		case !ok || !now.Before(l.Add(every)):
		case !l.Before(now):
			// A delayed wake-up is still to come: it covers this one.
			continue
		default:
			// Woken a moment ago: that run may already be ending, so
			// wake again, but not before every has passed.
			at = l.Add(every)
		}
		send = append(send, pending{shard: s, at: at, prev: l, had: ok})
		q.last[s] = at
	}
	q.mu.Unlock()

	var failed []string
	for batch := range slices.Chunk(send, 10) {
		entries := make([]sqstypes.SendMessageBatchRequestEntry, len(batch))
		for i, p := range batch {
			body, _ := json.Marshal(Message{Shard: p.shard})
			// SQS delays in whole seconds, rounded up so the wake-up never
			// comes early.
			delay := int32((p.at.Sub(now) + time.Second - 1) / time.Second)
			entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(body)), DelaySeconds: delay}
		}
		out, err := q.Client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q.URL, Entries: entries})
		if err != nil {
			q.forget(batch...)
			for _, p := range batch {
				failed = append(failed, strconv.Itoa(p.shard))
			}
			continue
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			if i >= 0 && i < len(batch) {
				q.forget(batch[i])
				failed = append(failed, strconv.Itoa(batch[i].shard)+" ("+aws.ToString(f.Code)+")")
			}
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("wake check shards %v: not sent; the schedule runs them within a minute", failed)
	}
	return nil
}

// pending is one wake-up to send: for shard, due at at; prev is what the
// shard's next time was before, restored if the send fails.
type pending struct {
	shard int
	at    time.Time
	prev  time.Time
	had   bool
}

// forget undoes the bookkeeping of wake-ups that were not sent, so they do
// not hold back the next ones.
func (q *Queue) forget(ps ...pending) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range ps {
		if q.last[p.shard].Equal(p.at) {
			if p.had {
				q.last[p.shard] = p.prev
			} else {
				delete(q.last, p.shard)
			}
		}
	}
}
