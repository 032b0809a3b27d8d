// Package faults makes a local run hostile, reproducibly from a seed: it
// kills invocations at random points, injects DynamoDB throttling, 5xx
// errors, conditional-check conflicts and lost responses (a write applied
// whose caller sees an error) and SQS partial batch failures through SDK
// middleware, duplicates schedule deliveries and redelivers input
// messages. It exists to prove the guarantees under the failures AWS
// really produces; production code never imports it.
//
// Decisions are a pure function of (seed, kind, n) where n counts the
// decisions of that kind, so a seed always yields the same fault plan; with
// concurrent goroutines the n-th decision can fall on a different request
// from run to run, but the number and mix of faults stay the same.
package faults

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	stypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/urldownloader/urldownloader/shared/engine"
)

// Kind names one kind of injected fault.
type Kind string

// The kinds of fault, as the run summary reports them.
const (
	CheckCrashMidBatch      Kind = "check-crash-mid-batch"
	CheckCrashBeforePublish Kind = "check-crash-before-publish"
	CheckCrashAfterPublish  Kind = "check-crash-after-publish"
	IngestCrash             Kind = "ingest-crash"
	DynamoThrottle          Kind = "dynamodb-throttle"
	DynamoServerError       Kind = "dynamodb-5xx"
	DynamoConflict          Kind = "dynamodb-conflict"
	// DynamoLostResponse: a write is applied and its answer lost; the
	// SDK's retryer sends it again, so a conditional write then fails its
	// condition against itself, as on AWS after a 5xx or a reset
	// connection that came after the write was taken.
	DynamoLostResponse Kind = "dynamodb-lost-response"
	// DynamoLostResponseToCaller: a write is applied and the caller sees
	// an error (the SDK's retries ran out, or its context ended).
	DynamoLostResponseToCaller Kind = "dynamodb-lost-response-to-caller"
	SQSPartialFailure          Kind = "sqs-partial-failure"
	DuplicateSchedule          Kind = "duplicate-schedule"
	InputRedelivery            Kind = "input-redelivery"
)

// Injector decides and counts faults. A nil *Injector injects nothing.
type Injector struct {
	seed uint64
	rate float64
	// only, when set, limits the faults to these kinds (see Only).
	only map[Kind]bool

	mu     sync.Mutex
	n      map[Kind]uint64
	counts map[Kind]int
}

// New returns an injector that fires each kind of fault with probability
// rate at each opportunity.
func New(seed int64, rate float64) *Injector {
	return &Injector{seed: uint64(seed), rate: rate, n: map[Kind]uint64{}, counts: map[Kind]int{}}
}

// Only returns an injector with the same seed and rate that injects only
// the given kinds: a test of one fault's handling.
func (in *Injector) Only(kinds ...Kind) *Injector {
	out := New(int64(in.seed), in.rate)
	out.only = map[Kind]bool{}
	for _, k := range kinds {
		out.only[k] = true
	}
	return out
}

// String describes the injector for logs.
func (in *Injector) String() string {
	return fmt.Sprintf("faults(seed=%d, rate=%g)", in.seed, in.rate)
}

// draw returns the next uniform number in [0,1) of a kind.
func (in *Injector) draw(kind Kind) float64 {
	in.mu.Lock()
	n := in.n[kind]
	in.n[kind]++
	in.mu.Unlock()
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], in.seed)
	binary.LittleEndian.PutUint64(b[8:], n)
	h.Write(b[:])
	h.Write([]byte(kind))
	return float64(h.Sum64()>>11) / (1 << 53)
}

// Fire decides whether a fault of kind happens now, and counts it.
func (in *Injector) Fire(kind Kind, scale float64) bool {
	if in == nil || in.rate <= 0 || (in.only != nil && !in.only[kind]) {
		return false
	}
	if in.draw(kind) >= in.rate*scale {
		return false
	}
	in.Count(kind)
	return true
}

// Count records a fault injected by the caller.
func (in *Injector) Count(kind Kind) {
	in.mu.Lock()
	in.counts[kind]++
	in.mu.Unlock()
}

// Pick returns a deterministic number in [0, n) for kind's next decision.
func (in *Injector) Pick(kind Kind, n int) int {
	return int(in.draw(kind+"/pick") * float64(n))
}

// Counts returns how many faults of each kind were injected.
func (in *Injector) Counts() map[Kind]int {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.counts)
}

// Summary formats the counts as "kind=n ..." in a fixed order.
func (in *Injector) Summary() string {
	c := in.Counts()
	var parts []string
	total := 0
	for _, k := range slices.Sorted(maps.Keys(c)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
		total += c[k]
	}
	return fmt.Sprintf("injected %d faults: %s", total, strings.Join(parts, " "))
}

// CheckCrash plans one check invocation: with probability rate it dies at
// a random point (mid-batch, before publishing, or between publishing and
// the state update), after a random number of passes through that point.
// The returned context carries the plan for the check engine.
func (in *Injector) CheckCrash(ctx context.Context) context.Context {
	if in == nil || in.only != nil || in.draw("check-invocation") >= in.rate {
		return ctx
	}
	points := []struct {
		point engine.CrashPoint
		kind  Kind
	}{{engine.CrashFetched, CheckCrashMidBatch}, {engine.CrashBeforePublish, CheckCrashBeforePublish}, {engine.CrashAfterPublish, CheckCrashAfterPublish}}
	chosen := points[in.Pick("check-invocation", len(points))]
	after := 1 + in.Pick("check-invocation-after", 20)
	var mu sync.Mutex
	seen := 0
	return engine.WithCrash(ctx, func(point engine.CrashPoint, _ string) bool {
		if point != chosen.point {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		seen++
		if seen == after {
			in.Count(chosen.kind)
			return true
		}
		return false
	})
}

// injectedError is a service error as the SDK's retryer classifies them.
type injectedError struct {
	code   string
	status int
	what   string // what happened, when more than the code says
}

func (e *injectedError) Error() string {
	if e.what != "" {
		return fmt.Sprintf("injected fault: %s: %s (HTTP %d)", e.what, e.code, e.status)
	}
	return fmt.Sprintf("injected fault: %s (HTTP %d)", e.code, e.status)
}
func (e *injectedError) ErrorCode() string             { return e.code }
func (e *injectedError) ErrorMessage() string          { return "injected fault" }
func (e *injectedError) ErrorFault() smithy.ErrorFault { return smithy.FaultServer }
func (e *injectedError) HTTPStatusCode() int           { return e.status }

// lostResponse is the error of a write that was applied: a 500 after the
// write was taken, which the retryer retries like any 5xx.
func lostResponse() error {
	return &injectedError{code: "InternalServerError", status: 500, what: "response lost after the write was applied"}
}

// DynamoDBOptions adds the DynamoDB faults to a client: throttling, server
// errors and lost responses inside the SDK's retry loop (so they are
// retried as on AWS), lost responses that reach the caller, and
// conditional-check failures on conditional writes before they are sent
// (so the store's own conflict handling runs).
func (in *Injector) DynamoDBOptions(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("InjectConflict",
			func(ctx context.Context, i middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if conditional(i.Parameters) && in.Fire(DynamoConflict, 1) {
					return middleware.InitializeOutput{}, middleware.Metadata{}, &dtypes.ConditionalCheckFailedException{Message: aws.String("injected conflict")}
				}
				return next.HandleInitialize(ctx, i)
			}), middleware.After); err != nil {
			return err
		}
		// Outside the retry loop: the write, retries and all, went
		// through, and the caller sees an error.
		if err := st.Initialize.Add(middleware.InitializeMiddlewareFunc("InjectLostResponseToCaller",
			func(ctx context.Context, i middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, i)
				if err == nil && isWrite(i.Parameters) && in.Fire(DynamoLostResponseToCaller, 0.5) {
					return middleware.InitializeOutput{}, md, lostResponse()
				}
				return out, md, err
			}), middleware.After); err != nil {
			return err
		}
		return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("InjectServerFault",
			func(ctx context.Context, f middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if in.Fire(DynamoThrottle, 0.5) {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, &injectedError{code: "ThrottlingException", status: 400}
				}
				if in.Fire(DynamoServerError, 0.5) {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, &injectedError{code: "InternalServerError", status: 500}
				}
				out, md, err := next.HandleFinalize(ctx, f)
				// Inside the retry loop: the retryer sends the applied
				// write again.
				if err == nil && isWriteOperation(ctx) && in.Fire(DynamoLostResponse, 0.5) {
					return middleware.FinalizeOutput{}, md, lostResponse()
				}
				return out, md, err
			}), middleware.After)
	})
}

// isWrite reports whether an operation's input is a single-item write.
func isWrite(params any) bool {
	switch params.(type) {
	case *dynamodb.PutItemInput, *dynamodb.DeleteItemInput:
		return true
	}
	return false
}

// isWriteOperation is isWrite inside the retry loop, where the request is
// already serialised and only the operation's name is at hand.
func isWriteOperation(ctx context.Context) bool {
	switch awsmiddleware.GetOperationName(ctx) {
	case "PutItem", "DeleteItem":
		return true
	}
	return false
}

func conditional(params any) bool {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		return in.ConditionExpression != nil
	case *dynamodb.DeleteItemInput:
		return in.ConditionExpression != nil
	case *dynamodb.UpdateItemInput:
		return in.ConditionExpression != nil
	}
	return false
}

// SQSOptions adds partial batch failures to a client's SendMessageBatch:
// some entries are not sent and come back in Failed (a server-side fault),
// as SQS reports them.
func (in *Injector) SQSOptions(o *sqs.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("InjectPartialFailure",
			func(ctx context.Context, i middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				req, ok := i.Parameters.(*sqs.SendMessageBatchInput)
				if !ok || len(req.Entries) == 0 || !in.Fire(SQSPartialFailure, 1) {
					return next.HandleInitialize(ctx, i)
				}
				fail := 1 + in.Pick(SQSPartialFailure, len(req.Entries))
				cp := *req
				cp.Entries = req.Entries[fail:]
				var failed []stypes.BatchResultErrorEntry
				for _, e := range req.Entries[:fail] {
					failed = append(failed, stypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("injected partial failure"), SenderFault: false})
				}
				out := middleware.InitializeOutput{Result: &sqs.SendMessageBatchOutput{}}
				var md middleware.Metadata
				if len(cp.Entries) > 0 {
					i.Parameters = &cp
					var err error
					out, md, err = next.HandleInitialize(ctx, i)
					if err != nil {
						return out, md, err
					}
				}
				res := out.Result.(*sqs.SendMessageBatchOutput)
				res.Failed = append(res.Failed, failed...)
				return out, md, nil
			}), middleware.After)
	})
}
