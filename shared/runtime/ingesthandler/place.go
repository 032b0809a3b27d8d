package ingesthandler

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// Resolver finds the addresses of a host name (fetch.DNSCache, which the
// fetcher dials through too, so ingest places a host by the address the
// check will connect to).
type Resolver interface {
	Lookup(ctx context.Context, host string) ([]netip.Addr, error)
}

const (
	// DefaultPlaceBudget bounds the lookups of one batch, all of them
	// together: a host not resolved by then is placed by name (its
	// lookup goes on in the cache, for the check), so a slow nameserver
	// costs a batch at most this.
	DefaultPlaceBudget = 2 * time.Second
	// placeConcurrency bounds a batch's lookups in flight: a resolver in a
	// VPC answers 1,024 packets a second per network interface
	// (https://docs.aws.amazon.com/vpc/latest/userguide/AmazonDNS-concepts.html#vpc-dns-limits),
	// and a batch can name 50,000 hosts.
	placeConcurrency = 64
)

// place resolves msgs' queue keys (a host without its port; in domain
// mode the registrable domain, the one name all of the queue's hosts
// share, as the check resolves it: engine.Placement), side by side within
// the budget, and returns each resolved key's virtual shard
// (hostqueue.Place). A key whose lookup fails or runs out of time is left
// out: it is placed by name, as is a host whose address is in exempt
// (ServerExempt, read live as the check's engine reads it, so both place
// a host alike). Nil without a Resolver.
func (h *Handler) place(ctx context.Context, msgs []urlmsg.Message, byDomain bool, exempt []netip.Prefix) map[string]int {
	if h.Resolver == nil || len(msgs) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var keys []string
	for _, m := range msgs {
		key := hostqueue.QueueKey(m.Host, byDomain)
		if !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	budget := h.PlaceBudget
	if budget <= 0 {
		budget = DefaultPlaceBudget
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	out := make(map[string]int, len(keys))
	var mu sync.Mutex
	var wg sync.WaitGroup
	// late counts the keys whose lookup the budget cut short or never
	// started.
	var late atomic.Int64
	sem := make(chan struct{}, placeConcurrency)
	for i, key := range keys {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			late.Add(int64(len(keys) - i))
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			addrs, err := h.Resolver.Lookup(ctx, hostName(key))
			if ctx.Err() != nil {
				late.Add(1)
				return
			}
			if err != nil {
				return
			}
			vs := hostqueue.Place(key, addrs, exempt)
			mu.Lock()
			out[key] = vs
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := late.Load(); n > 0 && h.Log != nil {
		// Not an error: those hosts are placed by name, as before
		// placement, and the check moves them once their lookup answers.
		h.Log.WarnContext(ctx, "hosts placed by name: their lookups ran out of the batch's budget", "hosts", n, "of", len(keys), "budget", budget)
	}
	return out
}

// hostName is a queue key (host[:port]) as a lookup takes it:
// without the port, and an IPv6 literal without its brackets.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}
