package hostqueue

import (
	"context"
	"net/netip"
)

// Placement by address. A gate kept in one check invocation's memory can
// pace a server only if every host name on that server is worked by that
// invocation: each virtual shard is worked by one invocation at a time
// (its lease), so a host is placed in the shard of the address it resolves
// to, and all the names of one server share a shard. A host that does not
// resolve, or whose address is in a range exempt from the gate (a CDN
// fronting unrelated sites), is placed by its name, as every host was
// before.

// PlaceShard is the virtual shard of a host: that of its address when it
// has one to be placed by (ok), else that of its key.
func PlaceShard(key string, addr netip.Addr, ok bool) int {
	if !ok {
		return VirtualShard(key)
	}
	return VirtualShard("ip:" + addr.Unmap().String())
}

// PlaceAddr picks the address a host is placed by among those its name
// resolved to: the lowest (IPv4 before IPv6, then by value), so that every
// lookup of a name whose answers rotate picks the same one. None (false)
// when there is none, or when that address is in an exempt range: such a
// host is placed by name.
func PlaceAddr(addrs []netip.Addr, exempt []netip.Prefix) (netip.Addr, bool) {
	var low netip.Addr
	for _, a := range addrs {
		a = a.Unmap()
		if a.IsValid() && (!low.IsValid() || a.Less(low)) {
			low = a
		}
	}
	if !low.IsValid() {
		return netip.Addr{}, false
	}
	for _, p := range exempt {
		if p.Contains(low) {
			return netip.Addr{}, false
		}
	}
	return low, true
}

// Place is the virtual shard of key, whose name resolved to addrs (none:
// the lookup failed), with exempt the ranges the gate does not pace.
func Place(key string, addrs []netip.Addr, exempt []netip.Prefix) int {
	a, ok := PlaceAddr(addrs, exempt)
	return PlaceShard(key, a, ok)
}

// Mover is a store that moves hosts between virtual shards. The check
// engine, finding that a host's name now resolves to an address placed in
// another shard than the one it is stored in (its DNS changed), moves it
// there instead of fetching it where another invocation's gate cannot see
// the server.
type Mover interface {
	// Move puts key's host into virtual shard to if it is still in shard
	// from, with its queue, state and due time unchanged: one conditional
	// write of the host (and, on DynamoDB, an entry in the new shard's due
	// index), like a commit. It returns the host as stored after: still in
	// another shard than to when it was no longer in from.
	// ErrNotFound when the host has no state.
	Move(ctx context.Context, key string, from, to int) (*Host, error)
}

// placeOf is the shard a host an append creates goes to.
func (r AppendRequest) placeOf() int {
	if r.Placed {
		return r.Shard
	}
	return VirtualShard(r.Key)
}

// ShardFor is the virtual shard an append puts its host in, given the
// shard it is stored in (exists: it has state) and whether it is idle (no
// queued URL and out of the due index): a new or idle host goes where the
// append places it (nobody works it, so moving it costs nothing and needs
// no move later), a host with work stays where its worker finds it.
func (r AppendRequest) ShardFor(stored int, exists, idle bool) int {
	if !exists || idle && r.Placed {
		return r.placeOf()
	}
	return stored
}
