package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/backoff"
)

// sleeps records the waits asked for and never sleeps; it ends ctx's wait
// as a real sleep would.
type sleeps struct{ got []time.Duration }

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.got = append(s.got, d)
	return ctx.Err()
}

func fullWait(d time.Duration) time.Duration { return d }

func TestCap(t *testing.T) {
	p := backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		name string
		n    int
		want time.Duration
	}{
		{"before the first retry: none", 0, 0},
		{"first retry: Base", 1, 100 * time.Millisecond},
		{"doubles", 3, 400 * time.Millisecond},
		{"capped by Max", 5, time.Second},
		{"no overflow far out", 200, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Cap(tc.n); got != tc.want {
				t.Errorf("Cap(%d) = %v, want %v", tc.n, got, tc.want)
			}
		})
	}
	if got := (backoff.Policy{Base: time.Hour}).Cap(100); got <= 0 {
		t.Errorf("uncapped Cap(100) = %v, want positive (no overflow)", got)
	}
}

func TestDelayIsFullJitter(t *testing.T) {
	p := backoff.Policy{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	low := false
	for range 1000 {
		d := p.Delay(3)
		if d < 0 || d > 40*time.Millisecond {
			t.Fatalf("Delay(3) = %v, want in [0, 40ms]", d)
		}
		if d < 10*time.Millisecond {
			low = true
		}
	}
	if !low {
		t.Error("1000 draws never below a quarter of the cap: not full jitter")
	}
	p.Jitter = func(d time.Duration) time.Duration { return 2 * d }
	if got := p.Delay(1); got != 10*time.Millisecond {
		t.Errorf("a Jitter beyond the cap gives %v, want it clamped to 10ms", got)
	}
}

func TestRetry(t *testing.T) {
	boom := errors.New("boom")
	fatal := errors.New("fatal")
	for _, tc := range []struct {
		name      string
		attempts  int
		fails     int // op fails this many times, then succeeds
		permanent bool
		wantCalls int
		wantErr   error
		wantWaits []time.Duration
	}{
		{"first try", 5, 0, false, 1, nil, nil},
		{"succeeds on the third", 5, 2, false, 3, nil, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{"bounded attempts", 3, 10, false, 3, boom, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{"permanent stops at once", 5, 10, true, 1, fatal, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s sleeps
			p := backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second, Attempts: tc.attempts, Sleep: s.sleep, Jitter: fullWait}
			calls := 0
			err := p.Retry(context.Background(), func(context.Context) error {
				calls++
				if calls <= tc.fails {
					if tc.permanent {
						return backoff.Permanent(fatal)
					}
					return boom
				}
				return nil
			})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.permanent && err != fatal {
				t.Errorf("err = %#v, want the unmarked error", err)
			}
			if calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", calls, tc.wantCalls)
			}
			if len(s.got) != len(tc.wantWaits) {
				t.Fatalf("waits = %v, want %v", s.got, tc.wantWaits)
			}
			for i := range s.got {
				if s.got[i] != tc.wantWaits[i] {
					t.Errorf("waits = %v, want %v", s.got, tc.wantWaits)
				}
			}
		})
	}
}

func TestRetryStopsWithTheContext(t *testing.T) {
	boom := errors.New("boom")
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	p := backoff.Policy{Base: time.Hour} // unbounded attempts: only ctx ends it
	start := time.Now()
	err := p.Retry(ctx, func(context.Context) error {
		calls++
		cancel()
		return boom
	})
	if !errors.Is(err, boom) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want boom and context.Canceled", err)
	}
	if calls != 1 {
		t.Errorf("calls = %d, want 1", calls)
	}
	if time.Since(start) > time.Second {
		t.Errorf("Retry waited %v after its context ended", time.Since(start))
	}
	if err := p.Retry(ctx, func(context.Context) error { t.Error("op called on an ended context"); return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Retry on an ended context = %v, want context.Canceled", err)
	}
}

func TestSleep(t *testing.T) {
	if err := backoff.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := backoff.Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Sleep past the deadline = %v", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("Sleep outlived its context by %v", time.Since(start))
	}
	if err := (backoff.Policy{Base: time.Hour}).Wait(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on an ended context = %v", err)
	}
}
