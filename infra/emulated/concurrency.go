package emulated

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
)

// EnvLambdaConcurrency names the environment variable that sets the
// account's Lambda concurrency for a pipeline whose Options leave it zero,
// beside the strict layer's MOTO_STRICT_* knobs (internal/moto).
const EnvLambdaConcurrency = "MOTO_STRICT_LAMBDA_CONCURRENCY"

// DefaultLambdaConcurrency is AWS's default concurrent executions quota per
// account and Region; new accounts may get less
// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html).
const DefaultLambdaConcurrency = 1000

// concurrency is the account's Lambda concurrency: every invocation of
// either function (scheduled or duplicated check runs, wake-ups, ingest
// batches) holds a slot while it runs; one that finds none is refused, as
// Lambda refuses it with TooManyRequestsException (429, reason
// ConcurrentInvocationLimitExceeded,
// https://docs.aws.amazon.com/lambda/latest/api/API_Invoke.html), and its
// caller retries later, as EventBridge and the event source mappings do.
type concurrency struct {
	slots     chan struct{}
	throttled atomic.Int64
}

func newConcurrency(n int) *concurrency {
	return &concurrency{slots: make(chan struct{}, n)}
}

// lambdaConcurrency resolves Options.LambdaConcurrency: the option, else
// the environment, else AWS's default.
func lambdaConcurrency(opt int) (int, error) {
	if opt > 0 {
		return opt, nil
	}
	if v := os.Getenv(EnvLambdaConcurrency); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s=%q: want a whole number of at least 1", EnvLambdaConcurrency, v)
		}
		return n, nil
	}
	return DefaultLambdaConcurrency, nil
}

// acquire takes a slot for one invocation; false means Lambda would have
// throttled it. The caller must call release after a true.
func (c *concurrency) acquire() bool {
	select {
	case c.slots <- struct{}{}:
		return true
	default:
		c.throttled.Add(1)
		return false
	}
}

func (c *concurrency) release() { <-c.slots }

// Throttles counts the invocations refused for want of concurrency so far.
func (p *Pipeline) Throttles() int64 { return p.lambda.throttled.Load() }
