package config_test

import (
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/urldownloader/urldownloader/shared/aws/config"
)

// TestRetryerBounds: a throttled call is retried up to RetryMaxAttempts
// with pauses that grow and are capped, so its total wait is bounded (17 s).
func TestRetryerBounds(t *testing.T) {
	r := config.Retryer()
	if r.MaxAttempts() != config.RetryMaxAttempts {
		t.Fatalf("MaxAttempts = %d, want %d", r.MaxAttempts(), config.RetryMaxAttempts)
	}
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException"}
	if !r.IsErrorRetryable(throttle) {
		t.Fatal("a throttle is not retried")
	}
	for range 200 {
		var total time.Duration
		for attempt := 1; attempt < r.MaxAttempts(); attempt++ {
			d, err := r.RetryDelay(attempt, throttle)
			if err != nil {
				t.Fatal(err)
			}
			if d < 0 || d > config.RetryMaxBackoff {
				t.Fatalf("pause after attempt %d = %v, want within [0, %v]", attempt, d, config.RetryMaxBackoff)
			}
			total += d
		}
		if total > 17*time.Second {
			t.Fatalf("a call waits %v in all, want at most 17s", total)
		}
	}
}
