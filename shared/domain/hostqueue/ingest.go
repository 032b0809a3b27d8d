package hostqueue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// Ingester appends accepted URLs to their hosts' queues. It groups a batch by
// queue key so each host is written once per batch.
type Ingester struct {
	// Store is where the URLs are queued; the ingester only appends.
	Store     Appender
	Publisher Publisher
	Now       func() time.Time
	// Guard judges URLs whose host is an IP address before they are
	// queued; nil means no check at ingest (the fetcher's dial guard
	// still refuses such addresses when it comes to fetch them).
	Guard AddressGuard
	// Concurrency bounds parallel host writes; zero means 32. Each write
	// is a read and a conditional put (two round trips, ~12 ms on
	// DynamoDB), so 32 at once write ~2,600 hosts a second: a batch of
	// 50,000 distinct hosts in about 20 s of a 60 s timeout, with room
	// for slow answers and retries.
	Concurrency int
	// Overflow is what a URL meets at a full queue (PersistLimit): EvictOldest,
	// the reference design's rule and the default, or HoldBack.
	Overflow Overflow
	// NoRefresh, when set, says why the store keeps no refreshing URLs:
	// each is refused with it (ErrRefreshUnsupported), never accepted
	// and then left without a result.
	NoRefresh string
}

// Overflow says what ingest does when a host's queue cannot take a batch's
// URLs under PersistLimit.
type Overflow int

const (
	// EvictOldest makes room: the oldest queued URLs leave, each reported with a
	// dropped result (the reference design's EnforceLimit). A producer
	// that cannot be made to wait (the input queue on AWS) keeps the
	// newest URLs and sees the evicted ones end.
	EvictOldest Overflow = iota
	// HoldBack queues only what fits and evicts nothing: the URLs that do
	// not fit are in IngestResult.Failed with ErrQueueFull, for a producer
	// that can wait and hand them over again once the host's queue has
	// room (local mode: its input lines wait on disk, and POST /urls
	// answers 503).
	HoldBack
)

// ErrQueueFull fails, under HoldBack, the URLs a host's queue had no room
// for: they were not queued, and are to be handed over again later.
var ErrQueueFull = errors.New("not queued: the host's queue is full (PersistLimit), retry later")

// batchChunk is how many hosts' requests Ingest hands a BatchAppender at
// once (a multiple of the DynamoDB store's wave of 256, so its due lists
// are as large as in one call).
const batchChunk = 1024

// ErrNoTime fails the messages of hosts whose write had not started by
// IngestParams.Until: they were not queued, and are to be sent again.
var ErrNoTime = errors.New("not queued: no time left before the invocation's deadline, retry")

// AddressGuard decides, by the rules the fetcher applies when it dials
// (loopback, private, link-local and other non-public networks; ports
// outside allowedPorts), whether the downloader may connect to addr. It
// returns nil when it may, or an error whose message names the address and
// the rule ("address 127.0.0.1 is loopback ..."). The composition root
// builds it from the fetcher's policy, which this package does not import.
type AddressGuard func(addr netip.AddrPort, allowedPorts []int) error

// IngestParams are the parameters an ingest needs, read once per batch.
type IngestParams struct {
	PersistLimit int
	// ByDomain queues URLs per registrable domain instead of per host.
	ByDomain bool
	// AllowedPorts is the runtime parameter of that name, for Guard.
	AllowedPorts []int
	// Until, when set, is when the batch stops starting host writes (by
	// Ingester.Now): the messages of hosts not written by then are failed
	// with ErrNoTime, so the caller can hand them back before its own
	// deadline instead of being killed with the whole batch. Writes under
	// way go on, bounded by the context.
	Until time.Time
	// Shards places the batch's queue keys in virtual shards (Place), by
	// the addresses their names resolved to: AppendRequest.Shard. A key
	// it lacks (no lookup, or a failed one) is placed by name.
	Shards map[string]int
	// RefreshCap is MaxRefreshPerHost (AppendRequest.RefreshCap).
	RefreshCap int
}

// IngestResult says what happened to a batch.
type IngestResult struct {
	// Failed maps a message index (in the slice given to Ingest) to the error
	// that stopped it. Messages not in Failed are accepted: durably queued,
	// or (Denied) already answered on the output queue.
	Failed   map[int]error
	Appended int
	Evicted  int
	// HeldBack counts the messages HoldBack left out (in Failed, with
	// ErrQueueFull).
	HeldBack int
	// Denied counts the messages the Guard refused: each was answered with
	// a denied result on the output queue instead of being queued.
	Denied int
	// Activated lists, in order, the virtual shards of the hosts this
	// batch put into the due index.
	Activated []int
}

// Ingest queues msgs. Under EvictOldest, evicted entries are reported as dropped
// results before they leave the store, so nothing disappears silently;
// under HoldBack, what does not fit is failed with ErrQueueFull.
//
// A URL whose host is an IP address the Guard refuses is never queued: no
// DNS lookup or request could change the verdict, and queueing it would
// cost a host write and a worker slot only to end as the same denial (or,
// before the host parser read 0x7f.1 as an address, as a confusing "no
// such host"). It still counts as accepted, with its ID, because the
// producer must see every URL it handed over end in a result: its denied
// result, naming the address and the rule, is published here, the way
// evictions' dropped results are. If that publish fails the message is in
// Failed, to be retried like a failed append.
func (in *Ingester) Ingest(ctx context.Context, p IngestParams, msgs []urlmsg.Message) IngestResult {
	type group struct {
		key     string
		entries []Entry
		idx     []int
		// refreshes and ridx are the group's refreshing URLs, apart:
		// HeldBack counts from the end of entries alone.
		refreshes []Refresh
		ridx      []int
	}
	groups := map[string]*group{}
	var order []string
	refused := map[int]error{}
	var denied []result.Result
	var deniedIdx []int
	now := in.Now()
	for i, m := range msgs {
		if why := in.refusal(m, p.AllowedPorts); why != "" {
			denied = append(denied, Denied(m, why, now))
			deniedIdx = append(deniedIdx, i)
			continue
		}
		key := QueueKey(m.Host, p.ByDomain)
		g := groups[key]
		if g == nil {
			g = &group{key: key}
			groups[key] = g
			order = append(order, key)
		}
		if r, ok := refreshOf(m); ok {
			if in.NoRefresh != "" {
				refused[i] = fmt.Errorf("%w: %s", ErrRefreshUnsupported, in.NoRefresh)
				continue
			}
			g.refreshes = append(g.refreshes, r)
			g.ridx = append(g.ridx, i)
			continue
		}
		g.entries = append(g.entries, Entry{ID: m.ID, URL: m.URL, ETag: m.ETag, LastModified: m.LastModified, ValidatorsURL: m.ValidatorsURL})
		g.idx = append(g.idx, i)
	}

	res := IngestResult{Failed: refused}
	activated := map[int]bool{}
	// stops answer the stops that ended a kept schedule (AppendResult.Stopped),
	// at stopIdx in msgs.
	var stops []result.Result
	var stopIdx []int
	var mu sync.Mutex
	conc := in.Concurrency
	if conc <= 0 {
		conc = 32
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	if len(denied) > 0 {
		// Published beside the appends, so a batch pays the publisher's
		// linger once, not before every append.
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := in.Publisher.Publish(ctx, denied)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				err = fmt.Errorf("publish %d denied results: %w", len(denied), err)
				for _, i := range deniedIdx {
					res.Failed[i] = err
				}
				return
			}
			res.Denied = len(denied)
		}()
	}
	// fail ends a group unwritten.
	fail := func(g *group, err error) {
		mu.Lock()
		defer mu.Unlock()
		err = fmt.Errorf("append %d urls to %s: %w", len(g.entries)+len(g.refreshes), g.key, err)
		for _, i := range g.idx {
			res.Failed[i] = err
		}
		for _, i := range g.ridx {
			res.Failed[i] = err
		}
	}
	// appended records a group's append.
	appended := func(g *group, r AppendResult, err error) {
		if err != nil {
			fail(g, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		res.Appended += r.Appended
		res.Evicted += r.Evicted
		if r.HeldBack > 0 {
			// The store appends in order: the last entries are out.
			err := fmt.Errorf("%s: %w", g.key, ErrQueueFull)
			for _, i := range g.idx[len(g.idx)-r.HeldBack:] {
				res.Failed[i] = err
			}
			res.HeldBack += r.HeldBack
		}
		for _, i := range g.ridx[len(g.ridx)-r.RefreshRefused:] {
			res.Failed[i] = fmt.Errorf("%s: %w (%d)", g.key, ErrRefreshCap, p.RefreshCap)
		}
		for _, id := range r.Stopped {
			if j := slices.IndexFunc(g.refreshes, func(rf Refresh) bool { return rf.ID == id }); j >= 0 {
				stops = append(stops, Stopped(g.key, g.refreshes[j], now))
				stopIdx = append(stopIdx, g.ridx[j])
			}
		}
		res.Appended += len(g.refreshes) - r.RefreshRefused
		if r.Activated {
			activated[r.Shard] = true
		}
	}
	request := func(g *group) AppendRequest {
		shard, placed := p.Shards[g.key]
		return AppendRequest{
			Shard:      shard,
			Placed:     placed,
			Key:        g.key,
			Entries:    g.entries,
			Limit:      p.PersistLimit,
			Refreshes:  g.refreshes,
			RefreshCap: p.RefreshCap,
			HoldBack:   in.Overflow == HoldBack,
			Due:        now,
			OnEvict: func(ctx context.Context, evicted []Entry) error {
				return in.Publisher.Publish(ctx, Dropped(g.key, evicted, in.Now(), p.PersistLimit))
			},
		}
	}
	// finish waits for the appends, then answers the stops they applied:
	// after the write, so a failed one is not answered; a failed answer
	// fails its message, which comes again (a stop applied twice is one).
	finish := func() IngestResult {
		wg.Wait()
		if len(stops) > 0 {
			if err := in.Publisher.Publish(ctx, stops); err != nil {
				err = fmt.Errorf("publish %d stopped results: %w", len(stops), err)
				for _, i := range stopIdx {
					res.Failed[i] = err
				}
			}
		}
		res.Activated = slices.Sorted(maps.Keys(activated))
		return res
	}
	if ba, ok := in.Store.(BatchAppender); ok && len(order) > 0 {
		// The context and Until are read once here; a store with a
		// deadline of its own (UntilBatchAppender) keeps Until after.
		stop := ctx.Err()
		if stop == nil && !p.Until.IsZero() && !in.Now().Before(p.Until) {
			stop = ErrNoTime
		}
		if stop != nil {
			for _, key := range order {
				fail(groups[key], stop)
			}
		} else {
			// With a deadline (DynamoDB) the requests go a chunk at a time:
			// a 6 MB batch can name 50,000 hosts, most of which the deadline
			// leaves unwritten. Without one (SQLite), one call, one
			// transaction.
			chunk := len(order)
			ub, until := ba.(UntilBatchAppender)
			if until {
				chunk = batchChunk
			}
			for from := 0; from < len(order); from += chunk {
				keys := order[from:min(len(order), from+chunk)]
				reqs := make([]AppendRequest, len(keys))
				for i, key := range keys {
					reqs[i] = request(groups[key])
				}
				var outcomes []AppendOutcome
				if until {
					outcomes = ub.AppendBatchUntil(ctx, reqs, p.Until)
				} else {
					outcomes = ba.AppendBatch(ctx, reqs)
				}
				for i, o := range outcomes {
					appended(groups[keys[i]], o.Result, o.Err)
				}
			}
		}
		return finish()
	}
	// stop is why no more writes start: the context ended while waiting
	// for a slot, or Until passed.
	var stop error
	for _, key := range order {
		g := groups[key]
		if stop == nil {
			select {
			case sem <- struct{}{}:
				if !p.Until.IsZero() && !in.Now().Before(p.Until) {
					<-sem
					stop = ErrNoTime
				}
			case <-ctx.Done():
				stop = ctx.Err()
			}
		}
		if stop != nil {
			fail(g, stop)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := in.Store.Append(ctx, request(g))
			appended(g, r, err)
		}()
	}
	return finish()
}

// Dropped builds the results for entries evicted by PersistLimit.
func Dropped(key string, evicted []Entry, now time.Time, limit int) []result.Result {
	out := make([]result.Result, 0, len(evicted))
	for _, e := range evicted {
		out = append(out, result.Result{
			ID:        e.ID,
			Host:      hostOf(e.URL, key),
			URL:       e.URL,
			Status:    result.StatusDropped,
			FetchedAt: now.UTC(),
			Error:     fmt.Sprintf("evicted: the host's queue exceeded PersistLimit (%d)", limit),
		})
	}
	return out
}

// Stopped builds the answer to a stop (refresh "0") that ended the kept
// schedule of its URL: the schedule's own final result comes from the
// engine under the schedule's id; this one is the stop's, under its id,
// so every id handed over ends in a result.
func Stopped(key string, r Refresh, now time.Time) result.Result {
	return result.Result{
		ID:        r.ID,
		Host:      hostOf(r.URL, key),
		URL:       r.URL,
		Status:    result.StatusStopped,
		FetchedAt: now.UTC(),
		Seq:       1,
		Final:     true,
	}
}

// Denied builds the result of a message refused at ingest: why names the
// address and the rule.
func Denied(m urlmsg.Message, why string, now time.Time) result.Result {
	return result.Result{
		ID:        m.ID,
		Host:      m.Host,
		URL:       m.URL,
		Status:    result.StatusDenied,
		FetchedAt: now.UTC(),
		Error:     why,
	}
}

// refusal returns why the Guard refuses m, or "" when it does not (or
// cannot: m's host is a name, which only the dial guard can judge, once it
// is resolved).
func (in *Ingester) refusal(m urlmsg.Message, allowedPorts []int) string {
	if in.Guard == nil {
		return ""
	}
	addr, ok := literalAddr(m)
	if !ok {
		return ""
	}
	if err := in.Guard(addr, allowedPorts); err != nil {
		return err.Error()
	}
	return ""
}

// literalAddr returns the address and port m's URL connects to when its
// host is an IP address. m is normalised, so an address is in its one
// canonical form: an IPv4 host starts with a digit, an IPv6 one with '['.
func literalAddr(m urlmsg.Message) (netip.AddrPort, bool) {
	if m.Host == "" || !(m.Host[0] == '[' || m.Host[0] >= '0' && m.Host[0] <= '9') {
		return netip.AddrPort{}, false
	}
	u, err := url.Parse(m.URL)
	if err != nil {
		return netip.AddrPort{}, false
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return netip.AddrPort{}, false
	}
	port := uint64(80)
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.ParseUint(p, 10, 16); err != nil {
			return netip.AddrPort{}, false
		}
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}
