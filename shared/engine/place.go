package engine

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// Placement makes the engine keep hosts in the virtual shard of their
// server's address (hostqueue.Place), where ingest put them: a host whose
// name now resolves to an address placed in another shard (its DNS
// changed, or ingest could not resolve it and placed it by name) is moved
// there before its first request of a session, so one server is only ever
// fetched by the invocation that holds its shard, and that invocation's
// gate sees every request to it.
type Placement struct {
	// Resolver is the one the fetchers dial through (fetch.DNSCache), so
	// the lookup is the dial's own and costs no extra query.
	Resolver interface {
		Lookup(ctx context.Context, host string) ([]netip.Addr, error)
	}
}

// placeLookup bounds the lookup: a host whose name does not answer in time
// is fetched where it is (its dial then fails or waits on its own).
const placeLookup = 2 * time.Second

// placedElsewhere moves h to the shard of its address when that is not the
// one it is stored in, and tells whether it did (or whether h was moved
// away since the due index named it): the worker then leaves it, and the
// invocation of its shard fetches it. A failed lookup or move keeps the
// host where it is: fetched here, as before placement.
func (w *worker) placedElsewhere(ctx context.Context, h *hostqueue.Host) bool {
	if h.VirtualShard != w.vshard {
		return true // moved since the due index was read
	}
	pl := w.engine.Placement
	mv, ok := w.engine.Store.(hostqueue.Mover)
	if pl == nil || pl.Resolver == nil || !ok {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, placeLookup)
	addrs, err := pl.Resolver.Lookup(lctx, placeName(h))
	cancel()
	if err != nil {
		return false
	}
	to := hostqueue.Place(h.Key, addrs, w.p.ExemptPrefixes())
	if to == h.VirtualShard {
		return false
	}
	moved, err := mv.Move(ctx, h.Key, h.VirtualShard, to)
	if err != nil {
		w.engine.Log.WarnContext(ctx, "move host to its address's shard", "host", h.Key, "from", h.VirtualShard, "to", to, "error", err)
		return false
	}
	w.engine.Log.InfoContext(ctx, "host moved to its address's shard", "host", h.Key, "from", h.VirtualShard, "to", moved.VirtualShard)
	return moved.VirtualShard != w.vshard
}

// placeName is the name a host is placed by, as ingest placed it: its
// queue key without the port (in domain mode the registrable domain, one
// name for all of the queue's hosts, so the queue does not move between
// sessions as its head's host changes).
func placeName(h *hostqueue.Host) string {
	if name, _, err := net.SplitHostPort(h.Key); err == nil {
		return name
	}
	return strings.Trim(h.Key, "[]")
}
