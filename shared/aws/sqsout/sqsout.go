// Package sqsout sends results to the SQS output queue. Results from
// concurrent callers are coalesced into SendMessageBatch calls of up to ten
// entries, because SQS bills per request: a host that finishes one URL should
// not cost a request of its own when other hosts finish at the same moment.
package sqsout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/urldownloader/urldownloader/shared/domain/backoff"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// Client is the part of *sqs.Client the publisher uses.
type Client interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

var _ Client = (*sqs.Client)(nil)

var _ hostqueue.Publisher = (*Publisher)(nil)

const (
	// MaxBatchEntries is SQS's limit of entries per batch.
	MaxBatchEntries = 10
	// DefaultMaxMessageBytes is the message (and batch) size limit used: the
	// historical 256 KiB, which every SQS endpoint and emulator accepts.
	DefaultMaxMessageBytes = 256 << 10
	maxSendAttempts        = 6
)

// sendRetry spaces out the attempts at a batch SQS failed in part or whole.
var sendRetry = backoff.Policy{Base: 100 * time.Millisecond, Max: 2 * time.Second, Attempts: maxSendAttempts}

// Options tune a Publisher.
type Options struct {
	// MaxMessageBytes caps one message and one batch; zero means the default.
	MaxMessageBytes int
	// Linger is how long a partial batch waits for more results; zero means
	// 100ms. It trades a little latency for fewer requests: the check engine
	// publishes while a host's delay runs anyway, so with delays of 250ms
	// and more the wait costs no throughput.
	Linger time.Duration
	// OnRetry, when set, is told how many messages are sent again after
	// SQS failed them or their whole batch (the PublishRetries metric).
	OnRetry func(n int)
}

type job struct {
	res  result.Result
	body []byte
	// replaced: body is no longer res but the error result sent in its
	// place after SQS refused it (see replace).
	replaced bool
	done     chan error
}

// Publisher sends results to one queue. It is safe for concurrent use.
type Publisher struct {
	client   Client
	queueURL string
	max      int
	linger   time.Duration
	onRetry  func(n int)

	mu      sync.Mutex
	pending []*job
	size    int
	timer   *time.Timer
	seq     uint64
	sends   sync.WaitGroup
}

// New returns a publisher to queueURL.
func New(client Client, queueURL string, opts Options) *Publisher {
	p := &Publisher{client: client, queueURL: queueURL, max: opts.MaxMessageBytes, linger: opts.Linger, onRetry: opts.OnRetry}
	if p.max <= 0 {
		p.max = DefaultMaxMessageBytes
	}
	if p.linger <= 0 {
		p.linger = 100 * time.Millisecond
	}
	return p
}

// Publish sends results and returns when all are on the queue, or with an
// error that says how many were not (those must be treated as unsent).
func (p *Publisher) Publish(ctx context.Context, results []result.Result) error {
	if len(results) == 0 {
		return nil
	}
	jobs := make([]*job, 0, len(results))
	// Leave room for the batch's own framing in the size limit.
	limit := p.max - 1024
	for _, r := range results {
		b, err := result.Encode(r, limit)
		if err != nil {
			return err
		}
		j := &job{res: r, body: b, done: make(chan error, 1)}
		jobs = append(jobs, j)
		p.enqueue(j)
	}
	var failed int
	var first error
	for _, j := range jobs {
		select {
		case err := <-j.done:
			if err != nil {
				failed++
				if first == nil {
					first = err
				}
			}
		case <-ctx.Done():
			return fmt.Errorf("publish %d results: %w", len(results), ctx.Err())
		}
	}
	if failed > 0 {
		return fmt.Errorf("publish results: %d of %d not sent: %w", failed, len(results), first)
	}
	return nil
}

func (p *Publisher) enqueue(j *job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pending) > 0 && p.size+len(j.body) > p.max-1024 {
		p.flushLocked()
	}
	p.pending = append(p.pending, j)
	p.size += len(j.body)
	if len(p.pending) >= MaxBatchEntries {
		p.flushLocked()
		return
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(p.linger, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.timer = nil
			p.flushLocked()
		})
	}
}

func (p *Publisher) flushLocked() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	if len(p.pending) == 0 {
		return
	}
	batch := p.pending
	p.pending, p.size = nil, 0
	p.seq++
	seq := p.seq
	p.sends.Add(1)
	go func() {
		defer p.sends.Done()
		p.send(batch, seq)
	}()
}

// send delivers one batch, retrying the entries SQS reports as failed with
// a growing pause. An entry SQS refuses as final (the sender's fault: a
// character outside SQS's set, a message too large) is replaced once by an
// error result for its URL (see replace), so the URL still ends and its
// host is not held behind it; a replacement refused too fails its job. A
// whole call refused for its content is sent again one entry a call, to
// find the entry at fault.
func (p *Publisher) send(batch []*job, seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	left := map[string]*job{}
	for i, j := range batch {
		left[strconv.FormatUint(seq, 36)+"-"+strconv.Itoa(i)] = j
	}
	var lastErr error
	single := false // send one entry a call
	for attempt := 0; attempt < maxSendAttempts && len(left) > 0; attempt++ {
		if attempt > 0 {
			if sendRetry.Wait(ctx, attempt) != nil {
				break // the batch's time is up: lastErr says why
			}
			if p.onRetry != nil {
				p.onRetry(len(left))
			}
		}
		ids := slices.Sorted(maps.Keys(left))
		chunk := len(ids)
		if single {
			chunk = 1
		}
		for c := range slices.Chunk(ids, chunk) {
			if err := p.sendChunk(ctx, left, c); err != nil {
				lastErr = err
				if len(c) > 1 && refusedContent(err) {
					single = true
				}
			}
		}
	}
	if lastErr == nil {
		lastErr = errors.New("send results: gave up")
	}
	for _, j := range left {
		j.done <- lastErr
	}
}

// sendChunk sends the entries ids of left in one call and removes from left
// those that are done (sent, or failed for good). Its error is the last
// failure seen.
func (p *Publisher) sendChunk(ctx context.Context, left map[string]*job, ids []string) error {
	entries := make([]types.SendMessageBatchRequestEntry, 0, len(ids))
	for _, id := range ids {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(string(left[id].body))})
	}
	out, err := p.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &p.queueURL, Entries: entries})
	if err != nil {
		err = fmt.Errorf("send batch of %d results: %w", len(entries), err)
		if len(ids) == 1 && refusedContent(err) {
			p.refused(left, ids[0], err)
		}
		return err
	}
	for _, ok := range out.Successful {
		if j := left[aws.ToString(ok.Id)]; j != nil {
			j.done <- nil
			delete(left, aws.ToString(ok.Id))
		}
	}
	var lastErr error
	for _, f := range out.Failed {
		err := fmt.Errorf("sqs refused result: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		lastErr = err
		if f.SenderFault {
			p.refused(left, aws.ToString(f.Id), err)
		}
	}
	return lastErr
}

// refused handles an entry SQS refused as final: its first refusal replaces
// it by an error result, sent at the next attempt; a replacement refused
// fails the job.
func (p *Publisher) refused(left map[string]*job, id string, why error) {
	j := left[id]
	if j == nil {
		return
	}
	if !j.replaced {
		if b, err := result.Encode(replacement(j.res, why), p.max-1024); err == nil {
			j.body, j.replaced = b, true
			return
		}
	}
	j.done <- why
	delete(left, id)
}

// maxReasonBytes bounds the refusal quoted in a replacement's error.
const maxReasonBytes = 512

// replacement is the result sent for r's URL when SQS refused r itself as
// final: the URL's terminal result is then an error that says so, not a
// URL left queued to be fetched (and refused) again forever, holding its
// host's queue behind it. It keeps what identifies the URL and the answer
// and drops what SQS may have refused (the body and the server's texts).
func replacement(r result.Result, why error) result.Result {
	reason := why.Error()
	if len(reason) > maxReasonBytes {
		reason = strings.ToValidUTF8(reason[:maxReasonBytes], "") + "..."
	}
	return result.Result{
		ID: r.ID, Host: r.Host, URL: r.URL, Status: result.StatusFetchError, HTTPStatus: r.HTTPStatus,
		FetchedAt: r.FetchedAt, Attempts: r.Attempts,
		Error: fmt.Sprintf("output queue refused the %s result: %s; this error replaces it", r.Status, reason),
	}
}

// contentCodes are the error codes by which SQS refuses a call for what
// its messages hold, not for the queue or the caller (SendMessageBatch,
// "Errors", in the SQS API reference).
var contentCodes = map[string]bool{
	"InvalidMessageContents":                        true,
	"BatchRequestTooLong":                           true,
	"AWS.SimpleQueueService.BatchRequestTooLong":    true,
	"MessageTooLong":                                true,
	"InvalidParameterValue":                         true,
	"AWS.SimpleQueueService.InvalidMessageContents": true,
}

// refusedContent reports whether err is SQS refusing a call's content.
func refusedContent(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && contentCodes[api.ErrorCode()]
}

// Close waits for batches in flight.
func (p *Publisher) Close() {
	p.mu.Lock()
	p.flushLocked()
	p.mu.Unlock()
	p.sends.Wait()
}
