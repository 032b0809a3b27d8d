package hostqueue

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/result"
	"github.com/urldownloader/urldownloader/shared/urlmsg"
)

// Ingester appends accepted URLs to their hosts' queues. It groups a batch by
// queue key so each host is written once per batch.
type Ingester struct {
	Store     Store
	Publisher Publisher
	Now       func() time.Time
	// Concurrency bounds parallel host writes; zero means 16.
	Concurrency int
}

// IngestParams are the parameters an ingest needs, read once per batch.
type IngestParams struct {
	PersistLimit int
	// ByDomain queues URLs per registrable domain instead of per host.
	ByDomain bool
}

// IngestResult says what happened to a batch.
type IngestResult struct {
	// Failed maps a message index (in the slice given to Ingest) to the error
	// that stopped it. Messages not in Failed are durably queued.
	Failed   map[int]error
	Appended int
	Evicted  int
	// Activated lists, in order, the virtual shards of the hosts this
	// batch put into the due index.
	Activated []int
}

// Ingest queues msgs. Evicted entries are reported as dropped results before
// they leave the store, so nothing disappears silently.
func (in *Ingester) Ingest(ctx context.Context, p IngestParams, msgs []urlmsg.Message) IngestResult {
	type group struct {
		key     string
		entries []Entry
		idx     []int
	}
	groups := map[string]*group{}
	var order []string
	for i, m := range msgs {
		key := QueueKey(m.Host, p.ByDomain)
		g := groups[key]
		if g == nil {
			g = &group{key: key}
			groups[key] = g
			order = append(order, key)
		}
		g.entries = append(g.entries, Entry{ID: m.ID, URL: m.URL, ETag: m.ETag, LastModified: m.LastModified})
		g.idx = append(g.idx, i)
	}

	res := IngestResult{Failed: map[int]error{}}
	activated := map[int]bool{}
	var mu sync.Mutex
	conc := in.Concurrency
	if conc <= 0 {
		conc = 16
	}
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	now := in.Now()
	for _, key := range order {
		g := groups[key]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := in.Store.Append(ctx, AppendRequest{
				Key:     g.key,
				Entries: g.entries,
				Limit:   p.PersistLimit,
				Due:     now,
				OnEvict: func(ctx context.Context, evicted []Entry) error {
					return in.Publisher.Publish(ctx, Dropped(g.key, evicted, in.Now(), p.PersistLimit))
				},
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				err = fmt.Errorf("append %d urls to %s: %w", len(g.entries), g.key, err)
				for _, i := range g.idx {
					res.Failed[i] = err
				}
				return
			}
			res.Appended += r.Appended
			res.Evicted += r.Evicted
			if r.Activated {
				activated[VirtualShard(g.key)] = true
			}
		}()
	}
	wg.Wait()
	res.Activated = slices.Sorted(maps.Keys(activated))
	return res
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
