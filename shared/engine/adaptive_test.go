package engine_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestSlowResponsesStretchTheGap: after a response that took 0.6 s the
// next request waits at least DelayFactor x 0.6 s, whatever FetchDelay
// says; MaxDelay caps that wait.
func TestSlowResponsesStretchTheGap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		factor   float64
		maxDelay time.Duration
		wantGap  time.Duration
	}{
		{"factor 1", 1, time.Minute, 600 * time.Millisecond},
		{"default factor 2", 2, time.Minute, 1200 * time.Millisecond},
		{"capped by MaxDelay", 5, time.Second, time.Second},
		{"factor 0: FetchDelay only", 0, time.Minute, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.FetchDelay = 100 * time.Millisecond
				p.DelayFactor, p.MaxDelay = tc.factor, tc.maxDelay
				p.RespectRobots = false
				e := newEnv(t, p)
				s := newSite(t, func(w http.ResponseWriter, r *http.Request) {
					time.Sleep(600 * time.Millisecond)
					page(w, r)
				})
				var urls []string
				for i := range 4 {
					urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
				}
				e.seed(urls...)
				e.runUntil(len(urls), 30*time.Second)
				reqs := s.requests()
				if len(reqs) != len(urls) {
					t.Fatalf("requests %v, want %d", s.paths(), len(urls))
				}
				for i, g := range gaps(reqs) {
					if g < tc.wantGap-slack {
						t.Errorf("gap %d = %v, want >= %v", i, g, tc.wantGap)
					}
					if g > tc.wantGap+time.Second {
						t.Errorf("gap %d = %v, want about %v", i, g, tc.wantGap)
					}
				}
				if h := e.load(s.host); h == nil || h.LastTook < 600*time.Millisecond {
					t.Errorf("stored LastTook %v, want >= 600ms", h.LastTook)
				}
			})
		})
	}
}

// limiter answers 429 (no Retry-After) to a request that comes less than
// a second after the last one it served, as nginx's limit_req at 1 r/s
// does; it counts them.
type limiter struct {
	mu      sync.Mutex
	last    time.Time
	refused int
	off     bool
}

func (l *limiter) handle(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	now := time.Now()
	ok := l.off || l.last.IsZero() || now.Sub(l.last) >= time.Second
	if ok {
		l.last = now
	} else {
		l.refused++
	}
	l.mu.Unlock()
	if !ok {
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	page(w, r)
}

// TestRateLimitsRaiseAndLowerTheDelay: a host limiting at 1 r/s, fetched
// with FetchDelay 500ms, refuses at most 2 requests: the 429 raises the
// host's own delay, which is stored, so a later run keeps it; after a
// quiet half hour of good answers it comes down again.
func TestRateLimitsRaiseAndLowerTheDelay(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.FetchDelay = 500 * time.Millisecond
		p.RespectRobots = false
		e := newEnv(t, p)
		l := &limiter{}
		s := newSite(t, l.handle)
		var urls []string
		for i := range 10 {
			urls = append(urls, s.url(fmt.Sprintf("/a%d", i)))
		}
		e.seed(urls...)
		e.runUntil(len(urls), time.Minute)
		for _, u := range urls {
			if res := e.pub.one(t, u); res.Status != result.StatusFetched {
				t.Errorf("%s: %s %q, want fetched", u, res.Status, res.Error)
			}
		}
		if l.refused > 2 {
			t.Errorf("%d requests refused, want at most 2", l.refused)
		}
		h := e.load(s.host)
		if h == nil || h.RateDelay < time.Second {
			t.Fatalf("stored RateDelay %v, want >= 1s", h.RateDelay)
		}

		// A later run starts from the stored delay: nothing refused.
		before := l.refused
		var more []string
		for i := range 5 {
			more = append(more, s.url(fmt.Sprintf("/b%d", i)))
		}
		e.seed(more...)
		e.runUntil(len(urls)+len(more), time.Minute)
		if l.refused != before {
			t.Errorf("the second run was refused %d times, want 0 (the learned delay is kept)", l.refused-before)
		}

		// After a quiet half hour, good answers lower the delay again (the
		// server has stopped limiting meanwhile: one that still limits at
		// 1 r/s refuses the first quicker request and the delay goes up).
		time.Sleep(31 * time.Minute)
		l.mu.Lock()
		l.off = true
		l.mu.Unlock()
		var late []string
		for i := range 3 {
			late = append(late, s.url(fmt.Sprintf("/c%d", i)))
		}
		e.seed(late...)
		e.runUntil(len(urls)+len(more)+len(late), time.Minute)
		if h := e.load(s.host); h.RateDelay != 0 {
			t.Errorf("after a quiet half hour RateDelay %v, want 0 (forgiven)", h.RateDelay)
		}
		reqs := s.requests()
		if g := gaps(reqs[len(reqs)-2:])[0]; g > 900*time.Millisecond {
			t.Errorf("gap after the decay %v, want FetchDelay 500ms again", g)
		}
	})
}
