package billing

import (
	"context"
	"maps"
	"slices"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// SQSChunkBytes is the payload size SQS bills as one request: a request
// carrying 100 KB is billed as two.
const SQSChunkBytes = 64 << 10

// EmptySuffix marks the line of ReceiveMessage calls that returned nothing.
const EmptySuffix = "(empty)"

// SQSLine is the usage of one SQS API on one queue.
type SQSLine struct {
	Op    string `json:"op"`
	Queue string `json:"queue"`
	// Requests are the calls made; Billed counts each 64 KB chunk of their
	// payloads (message bodies sent or received) as one request.
	Requests int `json:"requests"`
	Billed   int `json:"billed"`
	// Messages counts the entries sent, received or deleted.
	Messages int   `json:"messages"`
	Bytes    int64 `json:"bytes"`
}

// SQSCounter counts the SQS requests of the clients it is added to, by API
// and queue. It is safe for concurrent use.
type SQSCounter struct {
	// Names maps queue URLs to the names used in lines ("input", ...);
	// unnamed queues are reported by URL.
	names map[string]string

	mu    sync.Mutex
	lines map[[2]string]*SQSLine
}

// NewSQSCounter returns a counter; names maps queue URLs to short names.
func NewSQSCounter(names map[string]string) *SQSCounter {
	return &SQSCounter{names: maps.Clone(names), lines: map[[2]string]*SQSLine{}}
}

// Name sets the short name of a queue URL.
func (c *SQSCounter) Name(url, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = map[string]string{}
	}
	c.names[url] = name
}

// Option adds the counter to an SQS client: sqs.NewFromConfig(cfg, c.Option).
func (c *SQSCounter) Option(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("SQSCounter", c.handle), middleware.After)
	})
}

// Lines returns the counts so far, sorted by queue and API.
func (c *SQSCounter) Lines() []SQSLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []SQSLine
	for _, k := range slices.SortedFunc(maps.Keys(c.lines), func(a, b [2]string) int {
		if a[1] != b[1] {
			return cmpString(a[1], b[1])
		}
		return cmpString(a[0], b[0])
	}) {
		out = append(out, *c.lines[k])
	}
	return out
}

// Reset clears the counts.
func (c *SQSCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.lines)
}

func (c *SQSCounter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleInitialize(ctx, in)
	op := awsmiddleware.GetOperationName(ctx)
	var queue string
	msgs, bytes := 0, 0
	switch p := in.Parameters.(type) {
	case *sqs.SendMessageInput:
		queue, msgs, bytes = deref(p.QueueUrl), 1, len(deref(p.MessageBody))
	case *sqs.SendMessageBatchInput:
		queue, msgs = deref(p.QueueUrl), len(p.Entries)
		for _, e := range p.Entries {
			bytes += len(deref(e.MessageBody))
		}
	case *sqs.ReceiveMessageInput:
		queue = deref(p.QueueUrl)
		if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && err == nil {
			msgs = len(r.Messages)
			for _, m := range r.Messages {
				bytes += len(deref(m.Body))
			}
		}
		if msgs == 0 {
			// Empty polls cost by the hour, not by the message: keep
			// them apart.
			op += EmptySuffix
		}
	case *sqs.DeleteMessageInput:
		queue, msgs = deref(p.QueueUrl), 1
	case *sqs.DeleteMessageBatchInput:
		queue, msgs = deref(p.QueueUrl), len(p.Entries)
	case *sqs.ChangeMessageVisibilityInput:
		queue, msgs = deref(p.QueueUrl), 1
	case *sqs.ChangeMessageVisibilityBatchInput:
		queue, msgs = deref(p.QueueUrl), len(p.Entries)
	case *sqs.GetQueueAttributesInput:
		queue = deref(p.QueueUrl)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.names[queue]; ok {
		queue = n
	}
	k := [2]string{op, queue}
	l := c.lines[k]
	if l == nil {
		l = &SQSLine{Op: op, Queue: queue}
		c.lines[k] = l
	}
	l.Requests++
	l.Billed += max(1, ceilDiv(bytes, SQSChunkBytes))
	l.Messages += msgs
	l.Bytes += int64(bytes)
	return out, md, err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
