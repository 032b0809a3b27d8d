package params

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// Loader reads the raw parameters, name -> value, from where operators set
// them (SSM Parameter Store in production, see shared/ssmparams). A name
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

	mu       sync.Mutex
	cur      Params
	loadedAt time.Time     // end of the last refresh attempt, good or not
	tried    bool          // a refresh attempt has ended
	loading  chan struct{} // non-nil while one caller refreshes; closed after
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
	return &Cache{loader: l, ttl: ttl, now: now, log: log, loadTimeout: loadTimeout, cur: Defaults()}
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
// attempt waits a full ttl, so an outage is not hammered by every call.
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
	if c.tried && c.now().Sub(c.loadedAt) < c.ttl {
		defer c.mu.Unlock()
		return c.cur
	}
	done := make(chan struct{})
	c.loading = done
	base := c.cur
	c.mu.Unlock()

	p := base
	defer func() {
		// Deferred so a panicking Loader cannot leave the cache "loading"
		// forever, which would freeze the values in force.
		c.mu.Lock()
		c.cur, c.loadedAt, c.tried, c.loading = p, c.now(), true, nil
		c.mu.Unlock()
		close(done)
	}()
	p = c.refresh(ctx, base)
	return p
}

// refresh loads and parses the parameters over base and logs the outcome.
func (c *Cache) refresh(ctx context.Context, base Params) Params {
	lctx, cancel := context.WithTimeout(ctx, c.loadTimeout)
	raw, err := c.loader.Load(lctx)
	cancel()
	if err != nil {
		c.log.ErrorContext(ctx, "load parameters failed; values in force kept",
			slog.String("error", err.Error()), slog.String("retry_in", c.ttl.String()))
		return base
	}

	// Overlaying the defaults makes a deleted parameter fall back to its
	// default, while base still supplies the last good value of a bad one.
	full := Defaults().Format()
	maps.Copy(full, raw)
	p, err := Parse(full, base)
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
	return p
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
