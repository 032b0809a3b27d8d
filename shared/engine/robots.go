package engine

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/domain/robots"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// RobotsCacheBytes bounds the parsed robots.txt an engine keeps in memory
// (see robotsCache): a few thousand ordinary files, or 10 of the largest
// (robots.MaxBytes, counted three times: text, parsed rules, selection).
const RobotsCacheBytes = 16 << 20

// robotsCache keeps parsed robots.txt for the life of a function instance,
// so a warm invocation does not re-read them from the store. It holds at
// most RobotsCacheBytes (by policy.size), the least recently used going
// first: counting entries would let a few hundred 500 KiB files fill the
// function's memory.
type robotsCache struct {
	mu    sync.Mutex
	m     map[string]*list.Element // of *cached
	lru   list.List                // front: most recently used
	bytes int
	// limit overrides RobotsCacheBytes (tests).
	limit int
}

type cached struct {
	origin string
	p      *policy
}

// policy is what robots.txt says for one origin.
type policy struct {
	rules     *robots.Rules
	fetchedAt time.Time
}

// size is what a policy is counted at in the cache: its text three times
// (kept as read, parsed into rules, merged for our product token) and a
// fixed overhead for the maps and structs around it.
func (p *policy) size() int {
	n := 1 << 10
	if p.rules != nil {
		n += 3 * len(p.rules.Raw())
	}
	return n
}

func (c *robotsCache) get(origin string) *policy {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[origin]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cached).p
}

func (c *robotsCache) put(origin string, p *policy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.limit
	if limit <= 0 {
		limit = RobotsCacheBytes
	}
	if c.m == nil {
		c.m = map[string]*list.Element{}
	}
	if el, ok := c.m[origin]; ok {
		c.remove(el)
	}
	if p.size() > limit {
		return
	}
	c.m[origin] = c.lru.PushFront(&cached{origin: origin, p: p})
	c.bytes += p.size()
	for c.bytes > limit {
		c.remove(c.lru.Back())
	}
}

func (c *robotsCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cached)
	delete(c.m, e.origin)
	c.bytes -= e.p.size()
}

func originOf(u *url.URL) string { return u.Scheme + "://" + u.Host }

// robotsTTL is how long a robots.txt with these rules is trusted:
// RobotsTTL, or, for a long Crawl-delay (one its host is released for),
// twice that delay when longer, so that pages are
// requested between two reads of it: a host asking for one request a day
// would otherwise be sent robots.txt alone, every day.
func (w *worker) robotsTTL(rules *robots.Rules) time.Duration {
	if rules == nil {
		return w.p.RobotsTTL
	}
	cd := min(rules.CrawlDelay(w.p.UserAgent), w.p.MaxCrawlDelay)
	if cd <= waitInPlace {
		return w.p.RobotsTTL
	}
	return max(w.p.RobotsTTL, 2*cd)
}

// policyFor returns the robots policy of the URL's origin, fetching
// robots.txt when it is not known or older than RobotsTTL. outRetry means
// robots.txt is unavailable (5xx, 429, timeout): the host is paused and
// nothing is fetched from it; outStop means the run must stop; outGiveUp
// that the host's failure run is over (see giveup.go).
//
// A refetch is paced by the Crawl-delay the origin's previous robots.txt
// asked for (up to MaxCrawlDelay), not by FetchDelay alone: a new worker
// knows no Crawl-delay until it has read robots.txt, and the previous
// answer is the site's latest word on how often it may be asked.
func (w *worker) policyFor(ctx context.Context, raw string) (*policy, outcome) {
	u, err := url.Parse(raw)
	if err != nil {
		return &policy{}, outDone
	}
	origin := originOf(u)
	now := w.engine.Clock.Now()
	cached := w.engine.robots.get(origin)
	if cached != nil && now.Sub(cached.fetchedAt) < w.robotsTTL(cached.rules) {
		return cached, outDone
	}
	var stored *hostqueue.Robots
	if r, ok := w.inlineRobots[origin]; ok {
		stored = &r
	} else if w.robotsItems[origin] {
		if stored, err = w.engine.Store.Robots(ctx, w.key, origin); err != nil {
			w.engine.Log.WarnContext(ctx, "read stored robots.txt", "host", w.key, "origin", origin, "error", err)
		}
	}
	var stale *robots.Rules
	if cached != nil {
		stale = cached.rules
	}
	if stored != nil {
		if rules, err := robots.Parse(stored.Status, stored.Body); err == nil {
			if now.Sub(stored.FetchedAt) < w.robotsTTL(rules) {
				p := &policy{rules: rules, fetchedAt: stored.FetchedAt}
				w.engine.robots.put(origin, p)
				return p, outDone
			}
			if stale == nil {
				stale = rules
			}
		}
	}
	if stale != nil {
		w.crawlDelay = max(w.crawlDelay, min(stale.CrawlDelay(w.p.UserAgent), w.p.MaxCrawlDelay))
	}
	// Lanes wait while one of them reads robots.txt (lanes.go: pin).
	unpin := w.pin()
	w.st.Switch(origin, now)
	rb, out := w.fetchRobots(ctx, origin)
	w.st.Switch(origin, w.engine.Clock.Now())
	unpin()
	if out != outDone {
		return nil, out
	}
	var rules *robots.Rules
	err = errNoAnswer
	if rb.Status != 0 {
		rules, err = robots.Parse(rb.Status, rb.Body)
	}
	if errors.Is(err, robots.ErrUnavailable) {
		w.fail(fmt.Sprintf("%sserver answered %d", robotsFailure, rb.Status), nil)
		return nil, outRetry
	}
	if rb.Status != 0 {
		// 2xx or 4xx (or redirected too often): the host answers.
		w.answered(w.st.LastTook)
	}
	if err != nil {
		// No usable answer (an error that is not the server's verdict, a
		// redirect without a target): allow for this worker only, and ask
		// again next time instead of trusting it for RobotsTTL.
		rules, _ = robots.Parse(http.StatusNotFound, nil)
		return &policy{rules: rules, fetchedAt: rb.FetchedAt}, outDone
	}
	p := &policy{rules: rules, fetchedAt: rb.FetchedAt}
	w.engine.robots.put(origin, p)
	// Stored with the next commit: small answers ride in the host's own
	// state at no extra write.
	if w.newRobots == nil {
		w.newRobots = map[string]hostqueue.Robots{}
	}
	// The text as parsed (capped, its cut line dropped) is what is kept:
	// parsed again it gives the same rules.
	keep := *rb
	keep.Body = rules.Raw()
	w.newRobots[origin] = keep
	return p, outDone
}

var errNoAnswer = errors.New("robots.txt got no answer")

// fetchRobots gets origin's robots.txt, following up to robots.MaxRedirects
// redirects, each request paced like any other to this host.
func (w *worker) fetchRobots(ctx context.Context, origin string) (*hostqueue.Robots, outcome) {
	target := origin + "/robots.txt"
	for hop := 0; hop <= robots.MaxRedirects; hop++ {
		if out := w.pace(ctx); out != outDone {
			return nil, out
		}
		// robots.txt is read up to robots.MaxBytes (500 KiB, RFC 9309's
		// least), whatever MaxBodyBytes caps pages at: a rule at 450 KiB
		// binds us even when pages are cut at 200 KiB. One byte more shows
		// robots.Parse that the file goes on, so it drops the line the cap
		// cuts ("Allow: /public/" cut to "Allow: /" would allow all).
		resp, sent, err := w.fetch(ctx, fetch.Request{URL: target, MaxBodyBytes: robots.MaxBytes + 1})
		// The run is the origin's whose robots.txt this is, whichever
		// origin another lane worked meanwhile or a redirect led to.
		w.st.Switch(origin, w.engine.Clock.Now())
		w.st.LastFetch = w.engine.Clock.Now()
		w.remember(w.key, w.st.LastFetch)
		w.countRequest(err)
		w.fetchMetrics(sent, resp, err)
		if err != nil {
			switch {
			case fetch.KindOf(err) == fetch.KindCanceled:
				return nil, outStop
			case fetch.KindOf(err) == fetch.KindLocal:
				w.localError(ctx, err)
				return nil, outStop
			case fetch.IsTransient(err) || fetch.KindOf(err) == fetch.KindTLS:
				// Unreachable: RFC 9309 2.3.1.4 says complete disallow, so
				// nothing is fetched until it can be read (or the host
				// gives up, its URLs denied).
				w.fail(robotsFailure+err.Error(), nil)
				return nil, outRetry
			default:
				if notFound(err) {
					w.unresolvable[hostname(target)] = err.Error()
				}
				// Refused by the address guard, no such host, a protocol
				// error: the URLs themselves fail the same way (or, for a
				// name that does not resolve, end with this lookup's
				// answer) and get that result; robots.txt has nothing to
				// add. Status 0 marks "no answer", which policyFor neither
				// caches nor stores.
				return &hostqueue.Robots{Status: 0, FetchedAt: w.st.LastFetch}, outDone
			}
		}
		if resp.HTTPStatus >= 300 && resp.HTTPStatus < 400 && resp.Location != "" {
			target = resp.Location
			continue
		}
		if politeness.AsksToWait(resp.HTTPStatus, resp.RetryAfter, resp.RetryAfterSet) {
			// The server said when to come back: wait that long (capped
			// like any Retry-After), not the back-off.
			w.fail(fmt.Sprintf("%sserver answered %d with Retry-After", robotsFailure, resp.HTTPStatus), resp)
			return nil, outRetry
		}
		return &hostqueue.Robots{Status: resp.HTTPStatus, Body: resp.Body, FetchedAt: w.st.LastFetch}, outDone
	}
	// Still redirected after MaxRedirects hops: RFC 9309 says to treat
	// robots.txt as unavailable in the 4xx sense (allow), which is a real
	// verdict and cached.
	return &hostqueue.Robots{Status: http.StatusNotFound, FetchedAt: w.st.LastFetch}, outDone
}

// robotsVerdict applies the policy to a URL: "" means allowed, else the
// reason for a denied result.
func (w *worker) robotsVerdict(p *policy, raw string) string {
	if p == nil || p.rules == nil {
		return ""
	}
	if cd := p.rules.CrawlDelay(w.p.UserAgent); cd > w.p.MaxCrawlDelay {
		// The value as the file wrote it: "1e9" or "inf" says what the
		// site asked for, where a duration would be clamped or overflow.
		return fmt.Sprintf("robots.txt asks for Crawl-delay: %s (seconds), above MaxCrawlDelay %s",
			p.rules.CrawlDelayAsked(w.p.UserAgent), w.p.MaxCrawlDelay)
	}
	if !p.rules.Allowed(w.p.UserAgent, raw) {
		return fmt.Sprintf("disallowed by robots.txt for %q", robots.ProductToken(w.p.UserAgent))
	}
	return ""
}
