// Package backoff spaces out the attempts of an operation that may fail for
// a while (a write that lost a race, a queue that refused a batch):
// exponentially growing waits with full jitter, capped, for a bounded number
// of attempts, never past the caller's context.
//
// Full jitter (a uniform draw between zero and the step's cap) spreads
// contending callers out best for the fewest total attempts; see "Exponential
// Backoff And Jitter" on the AWS Architecture Blog.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Policy describes the waits. The zero Policy retries at once, until the
// context ends; set Base at least.
type Policy struct {
	// Base caps the first wait; the cap doubles with each retry.
	Base time.Duration
	// Max caps every wait; zero caps nothing beyond the doubling.
	Max time.Duration
	// Attempts bounds the calls Retry makes, the first included; zero
	// means until the context ends.
	Attempts int
	// Sleep waits d or until ctx ends, returning ctx.Err() then; nil uses
	// a timer. Tests inject a fake clock's Sleep here.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter draws a wait in [0, d]; nil draws uniformly (full jitter).
	// Tests pass one that returns d, for fixed waits.
	Jitter func(d time.Duration) time.Duration
}

// Cap is the largest wait before retry n (n = 1 before the second attempt):
// Base·2^(n-1), at most Max.
func (p Policy) Cap(n int) time.Duration {
	if n < 1 || p.Base <= 0 {
		return 0
	}
	d := p.Base
	for i := 1; i < n; i++ {
		if d > (1<<62)/2 || (p.Max > 0 && d >= p.Max) {
			break
		}
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	return d
}

// Delay is the wait before retry n: a draw in [0, Cap(n)].
func (p Policy) Delay(n int) time.Duration {
	c := p.Cap(n)
	if c <= 0 {
		return 0
	}
	if p.Jitter != nil {
		return min(max(p.Jitter(c), 0), c)
	}
	return rand.N(c + 1)
}

// Wait sleeps Delay(n), or less when ctx ends first, and then returns
// ctx.Err(): a caller must stop retrying on a non-nil error.
func (p Policy) Wait(ctx context.Context, n int) error {
	d := p.Delay(n)
	if p.Sleep != nil {
		return p.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

// Retry calls op until it returns nil, returns an error marked Permanent,
// has been called Attempts times, or ctx ends, waiting between calls. It
// returns nil, or op's last error; when ctx ended first, that error joined
// with ctx.Err() (or ctx.Err() alone if op never ran).
func (p Policy) Retry(ctx context.Context, op func(ctx context.Context) error) error {
	var last error
	for n := 0; p.Attempts <= 0 || n < p.Attempts; n++ {
		if n > 0 {
			if err := p.Wait(ctx, n); err != nil {
				return stopped(last, err)
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		last = op(ctx)
		if last == nil {
			return nil
		}
		var perm *permanent
		if errors.As(last, &perm) {
			return perm.err
		}
	}
	return last
}

func stopped(last, ctxErr error) error {
	if last == nil {
		return ctxErr
	}
	return fmt.Errorf("%w (retries stopped: %w)", last, ctxErr)
}

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: Retry returns err (unmarked)
// at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err: err}
}

// Sleep waits d or until ctx ends, and returns ctx.Err(): nil when the
// whole wait passed. A wait of zero or less only reports ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
