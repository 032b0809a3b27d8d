package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// TestFetchTimeoutLimit checks the limit a check function puts on
// FetchTimeout (params.Cache.LimitFetchTimeout): at FetchTimeoutLimit of a
// run's window no request can start in the whole run; below it one does.
func TestFetchTimeoutLimit(t *testing.T) {
	t.Parallel()
	const window = 5 * time.Second
	limit := engine.FetchTimeoutLimit(window)
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		fetched bool
	}{
		{"at the limit", limit, false},
		{"below it", limit - 2*time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.FetchTimeout = tc.timeout
				e := newEnv(t, p)
				s := newSite(t, withRobots(404, "", page))
				e.seed(s.url("/a"))
				now := time.Now()
				// An invocation's window opens before its handler runs
				// (Lambda counts from the request); on the virtual clock
				// nothing else would take that moment.
				time.Sleep(time.Millisecond)
				e.runRequest(e.engine(), engine.RunRequest{
					Shard: 0, ShardCount: 1, Owner: "owner", Until: now.Add(window - time.Second), Deadline: now.Add(window),
					Tick: 250 * time.Millisecond,
				})
				if n := len(s.requests()); tc.fetched != (n > 0) {
					t.Errorf("FetchTimeout %v in a %v window: %d requests, want some: %v", tc.timeout, window, n, tc.fetched)
				}
			})
		})
	}
}

// loaderFunc is a params.Loader.
type loaderFunc func(ctx context.Context) (map[string]string, error)

func (f loaderFunc) Load(ctx context.Context) (map[string]string, error) { return f(ctx) }

// TestParamsNeverLoaded checks that a run whose parameters were never read
// (the parameter store is down at a cold start) fails without a request
// instead of fetching with the built-in defaults, and that once they are
// read it works.
func TestParamsNeverLoaded(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		s := newSite(t, withRobots(404, "", page))
		e.seed(s.url("/a"))
		var down atomic.Bool
		down.Store(true)
		cache := params.NewCache(loaderFunc(func(context.Context) (map[string]string, error) {
			if down.Load() {
				return nil, errors.New("parameter store unavailable")
			}
			return p.Format(), nil
		}), time.Second, nil, e.log)
		eng := e.engine()
		eng.Params, eng.ParamsReady = cache.Get, cache.WaitLoaded

		start := time.Now()
		_, err := eng.Run(t.Context(), engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "owner", Until: start.Add(1500 * time.Millisecond)})
		if err == nil || !strings.Contains(err.Error(), "never loaded") || !strings.Contains(err.Error(), "parameter store unavailable") {
			t.Errorf("run without parameters: error %v, want one saying they were never loaded and why", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("the failing run took %v, want it bounded by the run's 1.5s", d)
		}
		if n := len(s.requests()); n != 0 {
			t.Errorf("%d requests made with parameters never loaded, want none", n)
		}

		down.Store(false)
		e.runWith(eng, "owner", 10*time.Second, 0, e.pub.has(1))
		if res := e.pub.one(t, s.url("/a")); res.Status != result.StatusFetched {
			t.Errorf("/a: %s %q, want fetched once the parameters are read", res.Status, res.Error)
		}
	})
}
