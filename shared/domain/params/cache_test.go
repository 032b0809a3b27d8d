package params

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLoader is a Loader whose behaviour each test sets, counting calls.
type fakeLoader struct {
	calls atomic.Int32
	load  func(ctx context.Context) (map[string]string, error)
}

func (f *fakeLoader) Load(ctx context.Context) (map[string]string, error) {
	f.calls.Add(1)
	return f.load(ctx)
}

// returns makes the loader answer the given values from now on.
func (f *fakeLoader) returns(raw map[string]string, err error) {
	f.load = func(context.Context) (map[string]string, error) { return raw, err }
}

// clock is an injected time source that only moves when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logBuffer captures JSON log records; safe for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records decodes every record logged at the given level.
func (b *logBuffer) records(t *testing.T, level string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if rec["level"] == level {
			out = append(out, rec)
		}
	}
	return out
}

func (b *logBuffer) errors(t *testing.T) []map[string]any { return b.records(t, "ERROR") }

type fixture struct {
	loader *fakeLoader
	clock  *clock
	logs   *logBuffer
	cache  *Cache
}

func newFixture(ttl time.Duration) *fixture {
	f := &fixture{loader: &fakeLoader{}, clock: newClock(), logs: &logBuffer{}}
	f.loader.returns(nil, nil)
	log := slog.New(slog.NewJSONHandler(f.logs, nil))
	f.cache = NewCache(f.loader, ttl, f.clock.Now, log)
	f.cache.jitter = func() float64 { return 0 } // refresh at ttl exactly
	return f
}

func TestCacheAppliesLoadedValues(t *testing.T) {
	tests := []struct {
		name string
		raw  map[string]string
		want func(p *Params)
	}{
		{"nothing set gives defaults", nil, func(*Params) {}},
		{"set values apply", map[string]string{NameFetchDelay: "5s", NamePersistLimit: "10"},
			func(p *Params) { p.FetchDelay = 5 * time.Second; p.PersistLimit = 10 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(10 * time.Second)
			f.loader.returns(tt.raw, nil)
			want := Defaults()
			tt.want(&want)
			if got := f.cache.Get(t.Context()); got != want {
				t.Errorf("Get =\n%+v\nwant\n%+v", got, want)
			}
			if n := len(f.logs.errors(t)); n != 0 {
				t.Errorf("%d error records, want none", n)
			}
		})
	}
}

func TestCacheTTL(t *testing.T) {
	const ttl = 10 * time.Second
	f := newFixture(ttl)
	f.loader.returns(map[string]string{NamePersistLimit: "1"}, nil)
	if got := f.cache.Get(t.Context()).PersistLimit; got != 1 {
		t.Fatalf("first Get PersistLimit = %d, want 1", got)
	}

	f.loader.returns(map[string]string{NamePersistLimit: "2"}, nil)
	f.clock.Advance(ttl - time.Nanosecond)
	for range 5 {
		if got := f.cache.Get(t.Context()).PersistLimit; got != 1 {
			t.Fatalf("Get before ttl PersistLimit = %d, want the cached 1", got)
		}
	}
	if n := f.loader.calls.Load(); n != 1 {
		t.Fatalf("loads before ttl = %d, want 1", n)
	}

	f.clock.Advance(time.Nanosecond)
	if got := f.cache.Get(t.Context()).PersistLimit; got != 2 {
		t.Errorf("Get at ttl PersistLimit = %d, want the reloaded 2", got)
	}
	if n := f.loader.calls.Load(); n != 2 {
		t.Errorf("loads after ttl = %d, want 2", n)
	}
	if rec := f.logs.records(t, "INFO"); len(rec) != 2 || !strings.Contains(rec[1]["changed"].([]any)[0].(string), "PersistLimit: 1 -> 2") {
		t.Errorf("info records %v, want one per change naming PersistLimit: 1 -> 2", rec)
	}
}

func TestCacheTTLClamp(t *testing.T) {
	tests := []struct {
		name string
		ttl  time.Duration
		want time.Duration
	}{
		{"above max", time.Hour, MaxTTL},
		{"just above max", MaxTTL + time.Nanosecond, MaxTTL},
		{"zero", 0, MaxTTL},
		{"negative", -time.Second, MaxTTL},
		{"max kept", MaxTTL, MaxTTL},
		{"short kept", time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(tt.ttl)
			if got := f.cache.TTL(); got != tt.want {
				t.Errorf("TTL() = %v, want %v", got, tt.want)
			}
			// The clamp is what Get obeys, not only what TTL reports.
			f.cache.Get(t.Context())
			f.clock.Advance(tt.want - time.Nanosecond)
			f.cache.Get(t.Context())
			if n := f.loader.calls.Load(); n != 1 {
				t.Errorf("loads before %v = %d, want 1", tt.want, n)
			}
			f.clock.Advance(time.Nanosecond)
			f.cache.Get(t.Context())
			if n := f.loader.calls.Load(); n != 2 {
				t.Errorf("loads at %v = %d, want 2", tt.want, n)
			}
		})
	}
}

func TestCacheDeletedParameterFallsBackToDefault(t *testing.T) {
	f := newFixture(time.Second)
	f.loader.returns(map[string]string{NameFetchDelay: "5s", NameMaxAttempts: "7"}, nil)
	f.cache.Get(t.Context())

	f.loader.returns(map[string]string{NameMaxAttempts: "7"}, nil)
	f.clock.Advance(time.Second)
	got := f.cache.Get(t.Context())
	if got.FetchDelay != Defaults().FetchDelay || got.MaxAttempts != 7 {
		t.Errorf("after deleting FetchDelay: FetchDelay=%v MaxAttempts=%d, want the default %v and 7",
			got.FetchDelay, got.MaxAttempts, Defaults().FetchDelay)
	}
}

func TestCacheInvalidValueKeepsLastGood(t *testing.T) {
	f := newFixture(time.Second)
	f.loader.returns(map[string]string{NameFetchDelay: "5s", NameCheckHostPeriod: "3s"}, nil)
	f.cache.Get(t.Context())

	// One bad value and one good change: the good one applies, the bad one
	// keeps its last good value (not the default).
	f.loader.returns(map[string]string{NameFetchDelay: "fast", NameCheckHostPeriod: "4s"}, nil)
	f.clock.Advance(time.Second)
	got := f.cache.Get(t.Context())
	if got.FetchDelay != 5*time.Second || got.CheckHostPeriod != 4*time.Second {
		t.Errorf("FetchDelay=%v CheckHostPeriod=%v, want the last good 5s and the new 4s",
			got.FetchDelay, got.CheckHostPeriod)
	}
	errs := f.logs.errors(t)
	if len(errs) != 1 {
		t.Fatalf("%d error records, want 1", len(errs))
	}
	invalid, _ := errs[0]["invalid"].([]any)
	if len(invalid) != 1 || invalid[0].(map[string]any)["name"] != NameFetchDelay ||
		invalid[0].(map[string]any)["value"] != "fast" {
		t.Errorf("error record invalid = %v, want FetchDelay=fast", errs[0]["invalid"])
	}

	// Calls within the ttl do not reparse or log again.
	for range 10 {
		f.cache.Get(t.Context())
	}
	if n := len(f.logs.errors(t)); n != 1 {
		t.Errorf("%d error records after repeated Get, want still 1", n)
	}
}

func TestCacheInvalidBeforeAnyGoodLoadUsesDefault(t *testing.T) {
	f := newFixture(time.Second)
	f.loader.returns(map[string]string{NameMaxAttempts: "100", NamePersistLimit: "-1"}, nil)
	if got := f.cache.Get(t.Context()); got != Defaults() {
		t.Errorf("Get =\n%+v\nwant defaults", got)
	}
	errs := f.logs.errors(t)
	if len(errs) != 1 {
		t.Fatalf("%d error records, want 1 naming both fields", len(errs))
	}
	var names []any
	for _, f := range errs[0]["invalid"].([]any) {
		names = append(names, f.(map[string]any)["name"])
	}
	if !slices.Equal(names, []any{NamePersistLimit, NameMaxAttempts}) {
		t.Errorf("error record names %v, want both bad fields", names)
	}
}

func TestCacheOutageKeepsValuesAndLogsOncePerRefresh(t *testing.T) {
	const ttl = 5 * time.Second
	f := newFixture(ttl)
	f.loader.returns(map[string]string{NamePersistLimit: "77"}, nil)
	f.cache.Get(t.Context())

	outage := errors.New("connection refused")
	f.loader.returns(nil, outage)
	for refresh := 1; refresh <= 3; refresh++ {
		f.clock.Advance(ttl)
		for range 50 {
			if got := f.cache.Get(t.Context()).PersistLimit; got != 77 {
				t.Fatalf("refresh %d: PersistLimit = %d during the outage, want the last good 77", refresh, got)
			}
			f.clock.Advance(ttl / 100) // time passes, but less than ttl in all
		}
		if n := f.loader.calls.Load(); n != int32(1+refresh) {
			t.Errorf("refresh %d: %d loads, want %d (one per ttl, no hammering)", refresh, n, 1+refresh)
		}
		errs := f.logs.errors(t)
		if len(errs) != refresh {
			t.Fatalf("refresh %d: %d error records, want %d (one per attempt)", refresh, len(errs), refresh)
		}
		if msg := errs[refresh-1]["error"]; msg != outage.Error() {
			t.Errorf("error record error = %v, want %q", msg, outage)
		}
	}

	// Recovery: the next good load is picked up.
	f.loader.returns(map[string]string{NamePersistLimit: "78"}, nil)
	f.clock.Advance(ttl)
	if got := f.cache.Get(t.Context()).PersistLimit; got != 78 {
		t.Errorf("after recovery PersistLimit = %d, want 78", got)
	}
}

func TestCacheOutageBeforeAnyLoadUsesDefaults(t *testing.T) {
	f := newFixture(time.Second)
	f.loader.returns(nil, errors.New("no route"))
	if got := f.cache.Get(t.Context()); got != Defaults() {
		t.Errorf("Get =\n%+v\nwant defaults", got)
	}
	f.cache.Get(t.Context())
	if n := f.loader.calls.Load(); n != 1 {
		t.Errorf("%d loads, want 1: a failed first load must wait for ttl too", n)
	}
}

func TestCacheHungLoaderTimesOut(t *testing.T) {
	f := newFixture(time.Second)
	f.cache.loadTimeout = 20 * time.Millisecond
	f.loader.load = func(ctx context.Context) (map[string]string, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if got := f.cache.Get(t.Context()); got != Defaults() {
		t.Errorf("Get =\n%+v\nwant defaults", got)
	}
	if n := len(f.logs.errors(t)); n != 1 {
		t.Errorf("%d error records, want 1", n)
	}
}

func TestCachePanickingLoaderDoesNotFreezeRefresh(t *testing.T) {
	f := newFixture(time.Second)
	f.loader.load = func(context.Context) (map[string]string, error) { panic("bug") }
	func() {
		defer func() { _ = recover() }()
		f.cache.Get(t.Context())
	}()
	f.loader.returns(map[string]string{NameMaxAttempts: "5"}, nil)
	f.clock.Advance(time.Second)
	if got := f.cache.Get(t.Context()).MaxAttempts; got != 5 {
		t.Errorf("MaxAttempts = %d after a panicking load, want the next load's 5", got)
	}
}

// TestCacheConcurrentGet runs under -race: while one caller refreshes, the
// others get the current values at once and do not load themselves.
func TestCacheConcurrentGet(t *testing.T) {
	const ttl = time.Second
	f := newFixture(ttl)
	f.loader.returns(map[string]string{NamePersistLimit: "1"}, nil)
	f.cache.Get(t.Context())

	release := make(chan struct{})
	started := make(chan struct{})
	f.loader.load = func(context.Context) (map[string]string, error) {
		close(started)
		<-release
		return map[string]string{NamePersistLimit: "2"}, nil
	}
	f.clock.Advance(ttl)

	refresher := make(chan Params)
	go func() { refresher <- f.cache.Get(t.Context()) }()
	<-started

	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if got := f.cache.Get(t.Context()).PersistLimit; got != 1 {
				t.Errorf("concurrent Get during refresh PersistLimit = %d, want the current 1", got)
			}
		})
	}
	wg.Wait() // returns while the load is still blocked: nobody waited on it
	close(release)
	if got := (<-refresher).PersistLimit; got != 2 {
		t.Errorf("refreshing Get PersistLimit = %d, want 2", got)
	}
	if got := f.cache.Get(t.Context()).PersistLimit; got != 2 {
		t.Errorf("Get after refresh PersistLimit = %d, want 2", got)
	}
	if n := f.loader.calls.Load(); n != 2 {
		t.Errorf("%d loads, want 2", n)
	}
}

// TestCacheConcurrentFirstGet: before the first load ends, callers wait for
// it rather than run with the defaults, and still only one loads.
func TestCacheConcurrentFirstGet(t *testing.T) {
	f := newFixture(time.Second)
	release := make(chan struct{})
	f.loader.load = func(context.Context) (map[string]string, error) {
		<-release
		return map[string]string{NameFetchDelay: "7s"}, nil
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if got := f.cache.Get(t.Context()).FetchDelay; got != 7*time.Second {
				t.Errorf("first Get FetchDelay = %v, want the loaded 7s", got)
			}
		})
	}
	time.Sleep(10 * time.Millisecond) // let the callers pile up on the load
	close(release)
	wg.Wait()
	if n := f.loader.calls.Load(); n != 1 {
		t.Errorf("%d loads, want 1", n)
	}

	// A waiter whose context ends stops waiting and gets the defaults.
	g := newFixture(time.Second)
	block := make(chan struct{})
	defer close(block)
	g.loader.load = func(context.Context) (map[string]string, error) {
		<-block
		return nil, nil
	}
	go g.cache.Get(context.Background())
	for g.loader.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if got := g.cache.Get(ctx); got != Defaults() {
		t.Errorf("Get with an ended context = %+v, want defaults", got)
	}
}

// TestCacheConcurrentStress mixes Gets, clock steps and changing values
// for the race detector.
func TestCacheConcurrentStress(t *testing.T) {
	f := newFixture(time.Millisecond)
	var n atomic.Int64
	f.loader.load = func(context.Context) (map[string]string, error) {
		v := n.Add(1)
		if v%3 == 0 {
			return nil, errors.New("flaky")
		}
		return map[string]string{NamePersistLimit: strings.Repeat("1", int(v%5)+1)}, nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				f.clock.Advance(100 * time.Microsecond)
				if err := f.cache.Get(t.Context()).Validate(); err != nil {
					t.Errorf("Get returned invalid params: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if f.loader.calls.Load() < 2 {
		t.Errorf("%d loads, want several", f.loader.calls.Load())
	}
}

// TestCacheRefreshJittered: each refresh comes a random share of up to a
// quarter of the TTL early, so instances started together (a deploy) do
// not read the parameter store in step; never later than the TTL.
func TestCacheRefreshJittered(t *testing.T) {
	const ttl = 8 * time.Second
	f := newFixture(ttl)
	f.cache.jitter = func() float64 { return 0.5 } // an eighth of ttl early
	f.cache.Get(t.Context())
	f.clock.Advance(ttl - ttl/8 - time.Nanosecond)
	f.cache.Get(t.Context())
	if n := f.loader.calls.Load(); n != 1 {
		t.Fatalf("loads before ttl less the jitter = %d, want 1", n)
	}
	f.clock.Advance(time.Nanosecond)
	f.cache.Get(t.Context())
	if n := f.loader.calls.Load(); n != 2 {
		t.Fatalf("loads at ttl less the jitter = %d, want 2", n)
	}

	// Drawn at random by default: a fleet's next refreshes spread over
	// the last quarter of the TTL.
	seen := map[time.Duration]bool{}
	for range 20 {
		l := &fakeLoader{}
		l.returns(nil, nil)
		c := NewCache(l, ttl, newClock().Now, slog.New(slog.DiscardHandler))
		c.Get(t.Context())
		if c.every <= ttl*3/4 || c.every > ttl {
			t.Fatalf("next refresh %v after a load, want within (%v, %v]", c.every, ttl*3/4, ttl)
		}
		seen[c.every] = true
	}
	if len(seen) < 10 {
		t.Errorf("20 caches drew %d distinct refresh intervals, want them spread", len(seen))
	}
}
