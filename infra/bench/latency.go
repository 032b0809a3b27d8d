package main

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// latencies records how many requests a client made to the emulator and
// how long they took, to show when moto is what holds a run back.
type latencies struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *latencies) middleware(st *middleware.Stack) error {
	return st.Initialize.Add(middleware.InitializeMiddlewareFunc("BenchLatency", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		t0 := time.Now()
		out, md, err := next.HandleInitialize(ctx, in)
		d := time.Since(t0)
		l.mu.Lock()
		l.ds = append(l.ds, d)
		l.mu.Unlock()
		return out, md, err
	}), middleware.Before)
}

func (l *latencies) dynamo(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, l.middleware) }

// Latency summarises a latencies.
type Latency struct {
	Requests       int
	Mean, P50, P99 time.Duration
}

func (l *latencies) summary() Latency {
	l.mu.Lock()
	ds := slices.Clone(l.ds)
	l.mu.Unlock()
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{Requests: len(ds), Mean: sum / time.Duration(len(ds)), P50: ds[len(ds)/2], P99: ds[min(len(ds)-1, len(ds)*99/100)]}
}
