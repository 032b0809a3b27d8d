package params

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"time"
)

// Loader reads the raw parameters, name -> value, from where operators set
// them (SSM Parameter Store in production, see shared/aws/ssmparams). A name
// absent from the map is unset: its default applies.
type Loader interface {
	Load(ctx context.Context) (map[string]string, error)
}

// MaxTTL is the longest a Cache keeps values before reading them again: an
// operator who retunes a delay must see it in force within half a minute.
// Shorter TTLs cost reads; SSM allows ~40 per second per account, shared by
// every warm Lambda instance.
const MaxTTL = 30 * time.Second

// loadTimeout bounds one Load, so a hung parameter store stalls the one
// caller that refreshes for seconds, not for its whole invocation.
const loadTimeout = 5 * time.Second

// firstLoadRetry is how often WaitLoaded tries again while no load has ever
// succeeded: often enough to start soon after an outage, rarely enough that
// a fleet of cold instances stays well inside SSM's request rate.
const firstLoadRetry = 2 * time.Second

// Cache serves the parameters in force, re-reading them through a Loader at
// most once per TTL, and keeps the last good values when a read fails or a
// value is invalid: a parameter store outage or a typo must never stop the
// downloader or make it impolite. Safe for concurrent use.
type Cache struct {
	loader      Loader
	ttl         time.Duration
	now         func() time.Time
	log         *slog.Logger
	loadTimeout time.Duration
	retry       time.Duration // firstLoadRetry, shorter in tests
	// jitter draws in [0, 1) the share of maxJitter by which the next
	// refresh comes before ttl (math/rand; fixed in tests).
	jitter func() float64

	mu       sync.Mutex
	cur      Params
	loadedAt time.Time     // end of the last refresh attempt, good or not
	every    time.Duration // from loadedAt to the next refresh: ttl less jitter
	tried    bool          // a refresh attempt has ended
	loaded   bool          // a Load has succeeded
	lastErr  error         // the last Load's error
	loading  chan struct{} // non-nil while one caller refreshes; closed after
	// maxFetchTimeout, when positive, is the exclusive upper bound of
	// FetchTimeout set by LimitFetchTimeout.
	maxFetchTimeout time.Duration
	// spool bounds MaxBodyBytes (LimitSpool).
	spool spoolLimit
}

// NewCache returns a Cache over l that starts from the defaults. A ttl above
// MaxTTL, or not positive, is clamped to MaxTTL. now is the clock (nil:
// time.Now), injected so tests step through TTLs without sleeping; log
// receives refresh failures and changes (nil: slog.Default()).
func NewCache(l Loader, ttl time.Duration, now func() time.Time, log *slog.Logger) *Cache {
	if ttl <= 0 || ttl > MaxTTL {
		ttl = MaxTTL
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Cache{loader: l, ttl: ttl, now: now, log: log, loadTimeout: loadTimeout, retry: firstLoadRetry, jitter: rand.Float64, cur: Defaults()}
}

// maxJitter is the largest share of the TTL a refresh comes early by,
// drawn anew after each one: instances started together (a deploy, a
// scale-out) then read Parameter Store spread over a quarter of the TTL
// instead of in step, every TTL, against its 40 reads a second per
// account.
const maxJitter = 0.25

// LimitFetchTimeout makes the cache refuse a FetchTimeout of limit or more
// as it refuses any value out of its bounds: the last good value stays in
// force and the refusal is logged with the other invalid values at each
// refresh. It is a bound params cannot know by itself: the check function
// sets it from its run window (check.FetchTimeoutLimit), since a longer
// timeout could never let a run start a request. A value in force over the
// new limit is replaced at once by the default, or by half the limit when
// the default is over it too. A limit of zero or less removes it.
func (c *Cache) LimitFetchTimeout(limit time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.maxFetchTimeout = max(limit, 0)
	if fe, ok := limitFetchTimeout(&c.cur, c.cur, c.maxFetchTimeout); ok {
		c.log.Error("invalid parameters ignored; their values in force kept", slog.Any("invalid", []FieldError{fe}))
	}
}

// limitFetchTimeout enforces limit on p, falling back to base's value, the
// default, or half the limit, the first that is under it; it reports the
// refusal.
func limitFetchTimeout(p *Params, base Params, limit time.Duration) (FieldError, bool) {
	if limit <= 0 || p.FetchTimeout < limit {
		return FieldError{}, false
	}
	fe := FieldError{Name: NameFetchTimeout, Value: formatDuration(p.FetchTimeout),
		Reason: fmt.Sprintf("must be below %s, or a check run could never start a request", formatDuration(limit))}
	switch {
	case base.FetchTimeout < limit:
		p.FetchTimeout = base.FetchTimeout
	case Defaults().FetchTimeout < limit:
		p.FetchTimeout = Defaults().FetchTimeout
	default:
		p.FetchTimeout = limit / 2
	}
	return fe, true
}

// WaitLoaded returns nil once a load of the parameters has succeeded (the
// values may still have had invalid ones, each replaced as Get says). Until
// then it loads again, every few seconds whatever the TTL, sharing each
// load with concurrent callers, until ctx ends; then it returns an error
// naming the last failure. A function calls it before work whose built-in
// defaults the operator may not have chosen: at a cold start during a
// parameter store outage, Get would serve Defaults, which can be less
// polite than the values set (a shorter delay) or lose URLs (a smaller
// PersistLimit). Once a load has succeeded, later failures keep the last
// good values, as Get says.
func (c *Cache) WaitLoaded(ctx context.Context) error {
	waited := false
	for {
		c.mu.Lock()
		if c.loaded {
			c.mu.Unlock()
			return nil
		}
		if wait := c.loading; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return c.notLoaded(ctx)
			}
			continue
		}
		if d := c.retry - c.now().Sub(c.loadedAt); c.tried && !waited && d > 0 {
			c.mu.Unlock()
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return c.notLoaded(ctx)
			}
			waited = true
			continue
		}
		waited = false
		c.load(ctx)
	}
}

// notLoaded is WaitLoaded's error once ctx has ended.
func (c *Cache) notLoaded(ctx context.Context) error {
	c.mu.Lock()
	last := c.lastErr
	c.mu.Unlock()
	if last == nil {
		return fmt.Errorf("parameters not loaded yet: %w", ctx.Err())
	}
	return fmt.Errorf("parameters never loaded (%w); last attempt: %w", ctx.Err(), last)
}

// TTL returns the refresh interval in force after clamping.
func (c *Cache) TTL() time.Duration { return c.ttl }

// Get returns the parameters in force; they always pass Validate.
//
// When the last refresh attempt ended ttl or more ago, this caller loads
// again while concurrent callers get the current values without waiting
// (only the very first load is waited for, up to ctx, so a cold start does
// not run a burst of fetches with the defaults instead of the tuned delays).
// A parameter deleted from the store falls back to its default. When the
// load fails, or a value is invalid, the last good value of each affected
// parameter stays in force (the default before any good load); the failure
// is logged once, as one error record naming every bad field, and the next
// attempt waits a ttl too, so an outage is not hammered by every call.
// Each wait is the ttl less up to a quarter of it, drawn at random (see
// maxJitter).
// A caller that must not run on the defaults calls WaitLoaded first.
func (c *Cache) Get(ctx context.Context) Params {
	c.mu.Lock()
	if wait := c.loading; wait != nil {
		first := !c.tried
		cur := c.cur
		c.mu.Unlock()
		if !first {
			return cur
		}
		select {
		case <-wait:
		case <-ctx.Done():
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.cur
	}
	if c.tried && c.now().Sub(c.loadedAt) < c.every {
		defer c.mu.Unlock()
		return c.cur
	}
	return c.load(ctx)
}

// errLoadPanicked stands for the error of a Loader that panicked.
var errLoadPanicked = errors.New("parameter loader panicked")

// load refreshes the values in force. It is called with c.mu held and
// returns with it released.
func (c *Cache) load(ctx context.Context) Params {
	done := make(chan struct{})
	c.loading = done
	base, limit, spool := c.cur, c.maxFetchTimeout, c.spool
	c.mu.Unlock()

	p, err := base, errLoadPanicked
	defer func() {
		// Deferred so a panicking Loader cannot leave the cache "loading"
		// forever, which would freeze the values in force.
		c.mu.Lock()
		c.cur, c.loadedAt, c.tried, c.loading, c.lastErr = p, c.now(), true, nil, err
		c.every = c.ttl - time.Duration(maxJitter*c.jitter()*float64(c.ttl))
		if err == nil {
			c.loaded = true
		}
		c.mu.Unlock()
		close(done)
	}()
	p, err = c.refresh(ctx, base, limit, spool)
	return p
}

// refresh loads and parses the parameters over base and logs the outcome;
// the error is the Load's (invalid values are logged, not returned).
func (c *Cache) refresh(ctx context.Context, base Params, limit time.Duration, spool spoolLimit) (Params, error) {
	lctx, cancel := context.WithTimeout(ctx, c.loadTimeout)
	raw, err := c.loader.Load(lctx)
	cancel()
	if err != nil {
		c.log.ErrorContext(ctx, "load parameters failed; values in force kept",
			slog.String("error", err.Error()), slog.String("retry_in", c.ttl.String()))
		return base, fmt.Errorf("load parameters: %w", err)
	}

	// Overlaying the defaults makes a deleted parameter fall back to its
	// default, while base still supplies the last good value of a bad one.
	full := Defaults().Format()
	maps.Copy(full, raw)
	p, err := Parse(full, base)
	for _, enforce := range []func() (FieldError, bool){
		func() (FieldError, bool) { return limitFetchTimeout(&p, base, limit) },
		func() (FieldError, bool) { return spool.enforce(&p, base) },
	} {
		if fe, ok := enforce(); ok {
			inv := &InvalidError{}
			errors.As(err, &inv)
			inv.Fields = append(inv.Fields, fe)
			err = inv
		}
	}
	if err != nil {
		// The fields as a JSON list, one object per bad value, rather than
		// the one-line error text, so a log query can pick out a name.
		attr := slog.String("error", err.Error())
		if inv := (*InvalidError)(nil); errors.As(err, &inv) {
			attr = slog.Any("invalid", inv.Fields)
		}
		c.log.ErrorContext(ctx, "invalid parameters ignored; their values in force kept", attr)
	}
	if changed := diff(base, p); len(changed) > 0 {
		c.log.InfoContext(ctx, "parameters changed", slog.Any("changed", changed))
	}
	return p, nil
}

// diff lists the parameters that differ, as "Name: old -> new", so a log
// shows when a retune took effect.
func diff(old, cur Params) []string {
	var out []string
	if old == cur {
		return nil
	}
	of, cf := old.Format(), cur.Format()
	for _, name := range Names() {
		if of[name] != cf[name] {
			out = append(out, fmt.Sprintf("%s: %s -> %s", name, of[name], cf[name]))
		}
	}
	return out
}
