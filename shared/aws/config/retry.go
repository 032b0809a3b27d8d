package config

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// The SDK retry policy of every AWS client, in the functions and against
// the emulators alike (internal/moto), so tests meet the retries AWS
// deployments make.
const (
	// RetryMaxAttempts bounds the attempts of one call, the first included.
	RetryMaxAttempts = 10
	// RetryMaxBackoff caps one pause. The standard retryer's pause before
	// retry i (from 0) is a uniform draw in [0, min(base x 2^i,
	// RetryMaxBackoff)), base 1 s after a throttle and 50 ms after another
	// retryable error: a call so waits at most 1+2+2x7 = 17 s in all,
	// about half that on average, and its context's deadline ends it
	// sooner.
	RetryMaxBackoff = 2 * time.Second
)

// RetryOptions sets the downloader's retry policy on the SDK's standard
// retryer: jittered exponential pauses, RetryMaxAttempts, and no retry
// token bucket. The default bucket (500 tokens, 5 a retry) is shared by
// every call of a client: one client serves a check function's ~200
// workers, and about 100 throttled retries (a hot partition, a new
// on-demand table warming up) empty it, after which every retryable error
// fails at once with "retry quota exceeded" (aws-sdk-go-v2#1665) and
// becomes a failed commit or a batch handed back. A throttle is AWS asking
// to slow down, not a failure: it is paused on, never turned into an error
// while attempts remain. The bound on a call's attempts and pauses is what
// keeps retries from storming.
func RetryOptions(o *retry.StandardOptions) {
	o.MaxAttempts = RetryMaxAttempts
	o.MaxBackoff = RetryMaxBackoff
	o.RateLimiter = ratelimit.None
}

// Retryer returns a retryer with RetryOptions, for aws.Config.Retryer;
// opts run after them (tests shorten the pauses).
func Retryer(opts ...func(*retry.StandardOptions)) aws.Retryer {
	return retry.NewStandard(append([]func(*retry.StandardOptions){RetryOptions}, opts...)...)
}
