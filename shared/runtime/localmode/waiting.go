package localmode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/robots"
)

// Reasons of a Wait.
const (
	// WaitPaused: the host answered with errors (back-off) or asked to
	// wait (Retry-After on a 429 or 503); its stored pause holds it back.
	WaitPaused = "back-off or Retry-After"
	// WaitCheck: the host is not due yet: its next staggered check.
	WaitCheck = "next check"
	// WaitCrawlDelay: robots.txt asks for a Crawl-delay above FetchDelay
	// (up to MaxCrawlDelay), which spaces every request to the host.
	WaitCrawlDelay = "Crawl-delay"
)

// Wait is one reason why hosts with queued URLs send no request now.
type Wait struct {
	Reason string
	// Hosts counts the hosts held back for this reason.
	Hosts int
	// Until is when the last of them may be requested again (the pause's
	// or the check's end); zero for a Crawl-delay, which Delay gives
	// instead (the largest of them).
	Until time.Time
	Delay time.Duration
}

// waitEvery is how often Progress reads the waits from the state: it loads
// every host with queued URLs, so not at every redraw.
const waitEvery = 2 * time.Second

// waits caches the last reading.
type waits struct {
	mu    sync.Mutex
	at    time.Time
	list  []Wait
	rules map[string]cachedRules // by key and origin
	// refreshing and nextRefresh are Store.Refreshing's, read with list.
	refreshing  int
	nextRefresh time.Time
}

type cachedRules struct {
	fetchedAt time.Time
	delay     time.Duration
}

// waiting returns the waits, read again when the last reading is older
// than waitEvery.
func (rt *Runtime) waiting() []Wait {
	w := &rt.waits
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.at) < waitEvery {
		return w.list
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	list, err := rt.readWaits(ctx, time.Now())
	w.at = time.Now()
	if err == nil {
		w.list = list
	}
	if n, next, err := rt.store.Refreshing(ctx); err == nil {
		w.refreshing, w.nextRefresh = n, next
	}
	return w.list
}

// refreshes returns the refreshing URLs kept and the first due time, as
// waiting last read them.
func (rt *Runtime) refreshes() (int, time.Time) {
	rt.waits.mu.Lock()
	defer rt.waits.mu.Unlock()
	return rt.waits.refreshing, rt.waits.nextRefresh
}

// readWaits reads, from the state, why the hosts with queued URLs wait.
func (rt *Runtime) readWaits(ctx context.Context, now time.Time) ([]Wait, error) {
	if rt.waits.rules == nil {
		rt.waits.rules = map[string]cachedRules{}
	}
	paused := Wait{Reason: WaitPaused}
	check := Wait{Reason: WaitCheck}
	crawl := Wait{Reason: WaitCrawlDelay}
	far := now.AddDate(100, 0, 0)
	for v := range hostqueue.VirtualShards {
		keys, err := rt.store.DueHosts(ctx, v, far, math.MaxInt32)
		if err != nil {
			return nil, fmt.Errorf("due hosts of virtual shard %d: %w", v, err)
		}
		for _, key := range keys {
			h, err := rt.store.Load(ctx, key, 0)
			if errors.Is(err, hostqueue.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("load %s: %w", key, err)
			}
			if h.Pending == 0 {
				continue
			}
			switch {
			case h.PauseUntil.After(now):
				paused.Hosts++
				paused.Until = later(paused.Until, h.PauseUntil)
			case h.Due.After(now):
				check.Hosts++
				check.Until = later(check.Until, h.Due)
			}
			if d := rt.crawlDelay(ctx, h); d > rt.params.FetchDelay {
				crawl.Hosts++
				crawl.Delay = max(crawl.Delay, d)
			}
		}
	}
	var out []Wait
	for _, w := range []Wait{paused, crawl, check} {
		if w.Hosts > 0 {
			out = append(out, w)
		}
	}
	return out, nil
}

// crawlDelay is the largest Crawl-delay the host's stored robots.txt
// answers ask of this user agent, capped at MaxCrawlDelay as the engine
// caps it; parsed once per answer.
func (rt *Runtime) crawlDelay(ctx context.Context, h *hostqueue.Host) time.Duration {
	var d time.Duration
	look := func(origin string, r *hostqueue.Robots) {
		id := h.Key + " " + origin
		c, ok := rt.waits.rules[id]
		if !ok || !c.fetchedAt.Equal(r.FetchedAt) {
			c = cachedRules{fetchedAt: r.FetchedAt}
			if rules, err := robots.Parse(r.Status, r.Body); err == nil {
				c.delay = min(rules.CrawlDelay(rt.params.UserAgent), rt.params.MaxCrawlDelay)
			}
			rt.waits.rules[id] = c
		}
		d = max(d, c.delay)
	}
	for origin, r := range h.Robots {
		look(origin, &r)
	}
	for origin := range h.RobotsItems {
		if r, err := rt.store.Robots(ctx, h.Key, origin); err == nil && r != nil {
			look(origin, r)
		}
	}
	return d
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
