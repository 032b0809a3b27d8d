package localmode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/robots"
	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// Progress is a live view of a run, for a progress line.
type Progress struct {
	// Expected counts the URLs owed a result in this run so far, Results
	// the results written; Backlog those still owed one.
	Expected, Results, Backlog int
	// Requests counts the HTTP requests sent so far, InFlight those not
	// answered yet.
	Requests, InFlight int64
	// Hosts counts the host workers at work now (each works one host).
	Hosts int
	// Waiting says why hosts with queued URLs send no request now
	// (waiting.go), read from the state every few seconds.
	Waiting []Wait
	// Servers are the server addresses hosts wait on now, at their gate
	// (ServerDelay, ServerConnections), the most waited on first.
	Servers []server.Waiting
	// Refreshing counts the refreshing URLs kept, NextRefresh is when
	// the first of them is due (docs/refresh.md), read with Waiting.
	Refreshing  int
	NextRefresh time.Time
	// RefreshLag is how late the latest refetch was (fetch time minus
	// due time; metrics.RefreshLag has each one).
	RefreshLag time.Duration
}

// Progress returns the run's progress now. It is safe to call while Run
// runs.
func (rt *Runtime) Progress() Progress {
	var p Progress
	t := rt.tally
	t.mu.Lock()
	p.Expected, p.Results, p.Backlog = t.expected, t.results, t.owed
	t.mu.Unlock()
	p.Requests, p.InFlight = rt.requests.Load(), rt.inFlight.Load()
	p.Waiting = rt.waiting()
	p.Servers = rt.gate.Waiting()
	p.Refreshing, p.NextRefresh = rt.refreshes()
	p.RefreshLag = time.Duration(rt.refreshLag.Load())
	for _, e := range rt.engines {
		n, _ := e.Workers()
		p.Hosts += n
	}
	return p
}

// HostLoad is the work of one politeness queue: URLs, each a Delay apart,
// of which Copies repeat a request another of them makes (the same URL
// and validators: the engine fetches it once for all of them).
type HostLoad struct {
	Key  string
	URLs int
	// Held are those of URLs held back behind the full queue, each
	// counted as a request of its own; Copies those of the queued ones
	// that repeat another's request.
	Held   int
	Copies int
	Delay  time.Duration
	// Addr is the server address the queue's host resolves to, when
	// known, and ServerDelay its gate's delay (0: none, or exempt).
	Addr        netip.Addr
	ServerDelay time.Duration
}

// Fetches is the requests the queue's URLs cost: one per distinct request.
func (h HostLoad) Fetches() int { return h.URLs - h.Copies }

// Time is the least time the queue's URLs take: one Delay before each
// fetch (the first waits for robots.txt, itself a request to the host).
// 100,000 copies of one URL cost one Delay, not 100,000.
func (h HostLoad) Time() time.Duration { return time.Duration(h.Fetches()) * h.Delay }

// Bound returns the politeness bound of a job: the least time its hosts'
// URLs take when each queue is worked one request per Delay, all queues at
// once. That is the slowest queue's Time, returned with the queue.
func Bound(hosts []HostLoad) (time.Duration, HostLoad) {
	var worst HostLoad
	for _, h := range hosts {
		if h.Time() > worst.Time() || (h.Time() == worst.Time() && h.Key < worst.Key && h.Time() > 0) {
			worst = h
		}
	}
	return worst.Time(), worst
}

// ServerLoad is the work of one server address: the requests of every
// queue on it, a ServerDelay apart.
type ServerLoad struct {
	Addr    netip.Addr
	Hosts   int
	Fetches int
	Delay   time.Duration
}

// Time is the least time the address's requests take at its gate.
func (s ServerLoad) Time() time.Duration { return time.Duration(s.Fetches) * s.Delay }

// ServerBound is Bound for the server addresses: the least time the
// busiest address's requests take at its gate, all its queues' fetches a
// ServerDelay apart, returned with the address. A job whose hosts share
// an address waits on it rather than on any one host.
func ServerBound(hosts []HostLoad) (time.Duration, ServerLoad) {
	by := map[netip.Addr]*ServerLoad{}
	for _, h := range hosts {
		if !h.Addr.IsValid() || h.ServerDelay <= 0 {
			continue
		}
		s := by[h.Addr]
		if s == nil {
			s = &ServerLoad{Addr: h.Addr}
			by[h.Addr] = s
		}
		s.Hosts++
		s.Fetches += h.Fetches()
		s.Delay = max(s.Delay, h.ServerDelay)
	}
	var worst ServerLoad
	for _, s := range by {
		if s.Time() > worst.Time() || (s.Time() == worst.Time() && s.Time() > 0 && s.Addr.Less(worst.Addr)) {
			worst = *s
		}
	}
	return worst.Time(), worst
}

// ServerOf returns the server address a queue's host resolves to (as the
// DNS cache knows it now, without asking) and its gate's delay: 0 when
// unknown, exempt or with ServerDelay 0.
func (rt *Runtime) ServerOf(key string) (netip.Addr, time.Duration) {
	if len(rt.engines) == 0 {
		return netip.Addr{}, 0
	}
	u, err := url.Parse("http://" + key)
	if err != nil {
		return netip.Addr{}, 0
	}
	host := u.Hostname()
	a, ok := serverAddr(context.Background(), rt.engines[0].Fetcher(rt.params), host, true)
	if !ok {
		return netip.Addr{}, 0
	}
	return a, rt.params.ServerFor(host, a).Delay
}

// QueueKey returns the politeness queue a URL's host (host[:port]) is
// paced in, under the run's QueueMode.
func (rt *Runtime) QueueKey(host string) string {
	return hostqueue.QueueKey(host, rt.params.QueueMode == params.QueueByDomain)
}

// HostDelay returns the pause the engine keeps between two requests to a
// queue: FetchDelay, or the Crawl-delay its robots.txt asked for when
// longer (known once this process has read it; at most MaxCrawlDelay,
// beyond which the host's URLs are denied instead).
func (rt *Runtime) HostDelay(key string) time.Duration {
	return max(rt.params.FetchDelay, min(rt.crawl.get(key), rt.params.MaxCrawlDelay))
}

// HostsLeft returns, for each queue with URLs still queued in the state,
// how many and its delay: what the rest of the run must wait at least
// (Bound). It reads the store once per queue, so call it every few seconds,
// not in a tight loop.
func (rt *Runtime) HostsLeft(ctx context.Context) ([]HostLoad, error) {
	var out []HostLoad
	far := time.Now().AddDate(100, 0, 0)
	for v := range hostqueue.VirtualShards {
		keys, err := rt.store.DueHosts(ctx, v, far, 1<<30)
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
			if h.Pending > 0 {
				// URLs held back behind a full queue (PersistLimit) are
				// the host's too: its queue takes them as it drains.
				held := 0
				if rt.over.held(key) {
					if held, err = rt.ledger.heldCount(ctx, key); err != nil {
						return nil, err
					}
				}
				a, d := rt.ServerOf(key)
				out = append(out, HostLoad{Key: key, URLs: h.Pending + held, Held: held, Delay: rt.HostDelay(key), Addr: a, ServerDelay: d})
			}
		}
	}
	return out, rt.countCopies(ctx, out)
}

// countCopies sets Copies on the loads that could set the bound. Counting
// a queue's distinct requests reads the whole queue, so only the queues
// whose URLs alone (the most they can cost) would exceed the slowest
// queue counted so far are read: slowest first, until the next one's
// most is under what is known. Loads not read keep Copies 0: their Time
// is at most the bound all the same.
func (rt *Runtime) countCopies(ctx context.Context, loads []HostLoad) error {
	order := make([]int, len(loads))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(loads[b].Time(), loads[a].Time()) })
	var worst time.Duration
	for _, i := range order {
		h := &loads[i]
		if h.Time() <= worst {
			break
		}
		if queued := h.URLs - h.Held; queued > 1 {
			n, err := rt.store.QueuedRequests(ctx, h.Key)
			if err != nil {
				return err
			}
			if n > 0 && n < queued {
				h.Copies = queued - n
			}
		}
		worst = max(worst, h.Time())
	}
	return nil
}

// watchCrawlDelays puts each engine's fetcher behind one that notes the
// Crawl-delays of the robots.txt answers going by (HostDelay).
func (rt *Runtime) watchCrawlDelays() {
	rt.crawl = &crawlDelays{userAgent: rt.params.UserAgent, queueKey: rt.QueueKey}
	for _, e := range rt.engines {
		inner := e.Fetcher
		e.Fetcher = func(p params.Params) engine.Fetcher { return robotsWatch{f: inner(p), crawl: rt.crawl} }
	}
}

// robotsWatch passes requests on and shows the answers to crawl.
type robotsWatch struct {
	f     engine.Fetcher
	crawl *crawlDelays
}

func (w robotsWatch) Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	resp, err := w.f.Fetch(ctx, req)
	w.crawl.saw(req, resp)
	return resp, err
}

func (w robotsWatch) CloseHost(host string) { closeHost(w.f, host) }

// ServerAddr is the fetcher's underneath (engine.ServerAddresser).
func (w robotsWatch) ServerAddr(ctx context.Context, host string, cachedOnly bool) (netip.Addr, bool) {
	return serverAddr(ctx, w.f, host, cachedOnly)
}

// serverAddr passes a ServerAddr on to the fetcher underneath a wrapper,
// when it can tell (engine.ServerAddresser).
func serverAddr(ctx context.Context, f engine.Fetcher, host string, cachedOnly bool) (netip.Addr, bool) {
	sa, ok := f.(engine.ServerAddresser)
	if !ok {
		return netip.Addr{}, false
	}
	return sa.ServerAddr(ctx, host, cachedOnly)
}

// closeHost passes a worker's CloseHost on to the fetcher underneath a
// wrapper, when it keeps connections (engine.HostCloser).
func closeHost(f engine.Fetcher, host string) {
	if c, ok := f.(engine.HostCloser); ok {
		c.CloseHost(host)
	}
}

// crawlDelays keeps the Crawl-delay each queue's robots.txt asked for, as
// the fetcher saw them go by: the engine keeps its own per worker, this
// copy is for the progress line and the summary.
type crawlDelays struct {
	userAgent string
	queueKey  func(host string) string

	mu sync.Mutex
	by map[string]time.Duration
}

func (c *crawlDelays) get(key string) time.Duration {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[key]
}

// saw takes a response to a request; only robots.txt answers count.
func (c *crawlDelays) saw(req fetch.Request, resp *fetch.Response) {
	if c == nil || resp == nil || !strings.HasSuffix(req.URL, "/robots.txt") {
		return
	}
	u, err := url.Parse(req.URL)
	if err != nil || u.Path != "/robots.txt" {
		return
	}
	rules, err := robots.Parse(resp.HTTPStatus, resp.Body)
	if err != nil || rules == nil {
		return
	}
	d := rules.CrawlDelay(c.userAgent)
	if d <= 0 {
		return
	}
	key := c.queueKey(u.Host)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]time.Duration{}
	}
	c.by[key] = max(c.by[key], d)
}
