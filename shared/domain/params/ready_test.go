package params

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCacheWaitLoaded checks the rule for a function that has never read
// its parameters: WaitLoaded returns once a load has succeeded, loading
// again (whatever the TTL) while none has, and fails naming the last error
// when its context ends first.
func TestCacheWaitLoaded(t *testing.T) {
	outage := errors.New("parameter store unavailable")
	tests := []struct {
		name string
		// failures is how many loads fail before the store answers; -1
		// means it never does.
		failures int
		// loadedBefore makes a good load, then an outage, before the wait.
		loadedBefore bool
		wantErr      bool
		wantLoads    int32
	}{
		{name: "store answers", failures: 0, wantLoads: 1},
		{name: "store answers on the third try", failures: 2, wantLoads: 3},
		{name: "store never answers", failures: -1, wantErr: true},
		{name: "loaded once, then an outage", loadedBefore: true, wantLoads: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(MaxTTL)
			f.cache.retry = 10 * time.Millisecond
			if tt.loadedBefore {
				f.loader.returns(map[string]string{NamePersistLimit: "7"}, nil)
				f.cache.Get(t.Context())
				f.loader.returns(nil, outage)
				f.clock.Advance(MaxTTL)
				f.cache.Get(t.Context())
				f.loader.calls.Store(0)
			} else {
				var mu sync.Mutex
				n := 0
				f.loader.load = func(context.Context) (map[string]string, error) {
					mu.Lock()
					defer mu.Unlock()
					if n++; tt.failures < 0 || n <= tt.failures {
						return nil, outage
					}
					return map[string]string{NamePersistLimit: "7"}, nil
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			err := f.cache.WaitLoaded(ctx)
			if tt.wantErr {
				if err == nil || !errors.Is(err, outage) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "never loaded") {
					t.Errorf("WaitLoaded = %v, want an error saying the parameters were never loaded, and why", err)
				}
				if n := f.loader.calls.Load(); n < 3 {
					t.Errorf("%d loads while waiting, want tries every retry interval whatever the TTL", n)
				}
				if got := f.cache.Get(t.Context()); got != Defaults() {
					t.Errorf("Get after a failed wait = %+v, want the defaults still (the caller decides)", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("WaitLoaded = %v, want nil", err)
			}
			if n := f.loader.calls.Load(); n != tt.wantLoads {
				t.Errorf("%d loads, want %d", n, tt.wantLoads)
			}
			if got := f.cache.Get(t.Context()).PersistLimit; got != 7 {
				t.Errorf("PersistLimit = %d after the wait, want the loaded 7", got)
			}
		})
	}
}

// TestCacheWaitLoadedConcurrent checks that callers waiting at once share
// each load instead of each hitting the store.
func TestCacheWaitLoadedConcurrent(t *testing.T) {
	f := newFixture(MaxTTL)
	f.cache.retry = 20 * time.Millisecond
	var mu sync.Mutex
	n := 0
	f.loader.load = func(context.Context) (map[string]string, error) {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if n++; n <= 2 {
			return nil, errors.New("throttled")
		}
		return nil, nil
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if err := f.cache.WaitLoaded(t.Context()); err != nil {
				t.Errorf("WaitLoaded = %v", err)
			}
		})
	}
	wg.Wait()
	if got := f.loader.calls.Load(); got > 6 {
		t.Errorf("%d loads for 16 waiting callers and 3 tries, want them shared", got)
	}
}

// TestCacheLimitFetchTimeout checks a function's own bound on FetchTimeout:
// a value at or over it is refused like any invalid value (the last good
// one kept, one error record per refresh naming it), a value under it is
// taken, and a limit set on values already in force replaces them.
func TestCacheLimitFetchTimeout(t *testing.T) {
	const limit = 20 * time.Second
	tests := []struct {
		name string
		// before is the value loaded before the limit is set ("" none).
		before string
		value  string
		want   time.Duration
		// refused counts the error records naming FetchTimeout.
		refused int
	}{
		{name: "under the limit", value: "15s", want: 15 * time.Second},
		{name: "at the limit", before: "15s", value: "20s", want: 15 * time.Second, refused: 1},
		{name: "over it, nothing good before: the default", value: "1m", want: Defaults().FetchTimeout, refused: 1},
		{name: "over it already when the limit is set", before: "1m", value: "1m", want: Defaults().FetchTimeout, refused: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(time.Second)
			if tt.before != "" {
				f.loader.returns(map[string]string{NameFetchTimeout: tt.before}, nil)
				f.cache.Get(t.Context())
				f.clock.Advance(time.Second)
			}
			f.cache.LimitFetchTimeout(limit)
			f.loader.returns(map[string]string{NameFetchTimeout: tt.value, NameFetchDelay: "2s"}, nil)
			got := f.cache.Get(t.Context())
			if got.FetchTimeout != tt.want || got.FetchDelay != 2*time.Second {
				t.Errorf("FetchTimeout %v FetchDelay %v, want %v and the other value taken (2s)", got.FetchTimeout, got.FetchDelay, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("values in force invalid: %v", err)
			}
			refused := 0
			for _, rec := range f.logs.errors(t) {
				for _, fe := range rec["invalid"].([]any) {
					if m := fe.(map[string]any); m["name"] == NameFetchTimeout && strings.Contains(m["reason"].(string), "must be below 20s") {
						refused++
					}
				}
			}
			if refused != tt.refused {
				t.Errorf("%d refusals of FetchTimeout logged, want %d", refused, tt.refused)
			}
		})
	}
}

// TestCacheLimitFetchTimeoutFallback checks that a limit below even the
// default leaves a value that fits.
func TestCacheLimitFetchTimeoutFallback(t *testing.T) {
	f := newFixture(time.Second)
	f.cache.LimitFetchTimeout(4 * time.Second)
	if got := f.cache.Get(t.Context()).FetchTimeout; got != 2*time.Second {
		t.Errorf("FetchTimeout = %v under a 4s limit with the 10s default, want half the limit", got)
	}
	f.cache.LimitFetchTimeout(0)
	f.loader.returns(map[string]string{NameFetchTimeout: "5m"}, nil)
	f.clock.Advance(time.Second)
	if got := f.cache.Get(t.Context()).FetchTimeout; got != 5*time.Minute {
		t.Errorf("FetchTimeout = %v with the limit removed, want 5m", got)
	}
}
