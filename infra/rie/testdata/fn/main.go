// Command fn is a Lambda function for the rie package's tests: the event's
// "op" picks a behaviour (answer, fail, sleep, panic, exit, show env).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Event selects what the function does.
type Event struct {
	Op    string `json:"op"`
	Sleep string `json:"sleep"`
	// Bytes is what the "fill" op writes to a file in os.TempDir().
	Bytes int `json:"bytes"`
}

// Answer is the function's successful response.
type Answer struct {
	Op          string            `json:"op"`
	RequestID   string            `json:"requestId"`
	FunctionARN string            `json:"functionArn"`
	DeadlineIn  float64           `json:"deadlineIn"` // seconds
	Env         map[string]string `json:"env,omitempty"`
	PID         int               `json:"pid"`
}

// sink keeps the "alloc" op's memory alive.
var sink []byte

func handle(ctx context.Context, ev Event) (Answer, error) {
	lc, _ := lambdacontext.FromContext(ctx)
	dl, _ := ctx.Deadline()
	fmt.Printf("fn stdout: op=%s\n", ev.Op)
	fmt.Fprintf(os.Stderr, "fn stderr: op=%s\n", ev.Op)
	a := Answer{Op: ev.Op, RequestID: lc.AwsRequestID, FunctionARN: lc.InvokedFunctionArn, DeadlineIn: time.Until(dl).Seconds(), PID: os.Getpid()}
	switch ev.Op {
	case "fail":
		return a, errors.New("failed on purpose")
	case "panic":
		panic("panicked on purpose")
	case "exit":
		os.Exit(3)
	case "sleep":
		d, err := time.ParseDuration(ev.Sleep)
		if err != nil {
			return a, err
		}
		time.Sleep(d)
	case "env":
		a.Env = map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			a.Env[k] = v
		}
	case "fill":
		f, err := os.CreateTemp("", "fill-*")
		if err != nil {
			return a, err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if _, err := f.Write(make([]byte, ev.Bytes)); err != nil {
			return a, fmt.Errorf("fill %s: %w", os.TempDir(), err)
		}
		if err := f.Sync(); err != nil {
			return a, fmt.Errorf("fill %s: %w", os.TempDir(), err)
		}
	case "alloc":
		// Touch every page so the resident set grows.
		sink = make([]byte, 64<<20)
		for i := range sink {
			sink[i] = 1
		}
	}
	return a, nil
}

func main() { lambda.Start(handle) }
