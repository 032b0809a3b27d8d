package hostqueue

import (
	"hash/fnv"
	"time"
)

// VirtualShards is the fixed number of shards hosts are hashed into. The
// deployed ShardCount (1..VirtualShards) only decides how many check
// invocations share them: invocation s owns every virtual shard v with
// v % ShardCount == s. Changing ShardCount therefore never moves a host and
// never strands one in a shard nobody checks.
const VirtualShards = 16

// Hash is the stable 64-bit FNV-1a hash of a queue key; it places hosts in
// shards and staggers their check times.
func Hash(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// VirtualShard returns the virtual shard of a queue key.
func VirtualShard(key string) int {
	return int(Hash(key) % VirtualShards)
}

// OwnedShards lists the virtual shards that check invocation shard (of
// shardCount) works on.
func OwnedShards(shard, shardCount int) []int {
	var out []int
	for v := 0; v < VirtualShards; v++ {
		if shardCount > 0 && v%shardCount == shard {
			out = append(out, v)
		}
	}
	return out
}

// NextHostCheck is the reference design's GetNextHostCheck:
// ts - ts % period + hash(host) % period + period. Check times are aligned to
// period boundaries and staggered by the host's hash, so hosts of one shard
// spread over the period instead of all falling due at once.
func NextHostCheck(now time.Time, key string, period time.Duration) time.Time {
	p := period.Milliseconds()
	if p <= 0 {
		return now
	}
	ts := now.UnixMilli()
	next := ts - ts%p + int64(Hash(key)%uint64(p)) + p
	return time.UnixMilli(next)
}
