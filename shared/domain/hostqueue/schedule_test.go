package hostqueue_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// The FNV-1a 64-bit test vectors (from the FNV reference), so the hash is
// pinned independently of the implementation: changing it would move every
// stored host to another shard and check time.
func TestHashIsFNV1a64(t *testing.T) {
	tests := []struct {
		key  string
		want uint64
	}{
		{"", 0xcbf29ce484222325},
		{"a", 0xaf63dc4c8601ec8c},
		{"foobar", 0x85944171f73967e8},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.key), func(t *testing.T) {
			if got := hostqueue.Hash(tt.key); got != tt.want {
				t.Errorf("Hash(%q) = %#x, want %#x", tt.key, got, tt.want)
			}
		})
	}
}

func ms(n int64) time.Time { return time.UnixMilli(n) }

func TestNextHostCheckHandComputed(t *testing.T) {
	// Hash("a") % 5000 = 1996, % 1500 = 496; Hash("foobar") % 5000 = 1968;
	// Hash("") % 5000 = 1037.
	tests := []struct {
		name   string
		now    time.Time
		key    string
		period time.Duration
		want   time.Time
	}{
		{"mid period", ms(1_700_000_001_234), "a", 5 * time.Second, ms(1_700_000_000_000 + 1996 + 5000)},
		{"period start", ms(1_700_000_000_000), "a", 5 * time.Second, ms(1_700_000_006_996)},
		{"last ms of period", ms(1_700_000_004_999), "a", 5 * time.Second, ms(1_700_000_006_996)},
		{"next period", ms(1_700_000_005_000), "a", 5 * time.Second, ms(1_700_000_011_996)},
		{"sub-millisecond now", ms(1_700_000_001_234).Add(999 * time.Microsecond), "a", 5 * time.Second, ms(1_700_000_006_996)},
		{"other key", ms(1_700_000_001_234), "foobar", 5 * time.Second, ms(1_700_000_000_000 + 1968 + 5000)},
		{"empty key", ms(1_700_000_001_234), "", 5 * time.Second, ms(1_700_000_000_000 + 1037 + 5000)},
		// 1_700_000_001_234 % 1500 = 234.
		{"1.5s period", ms(1_700_000_001_234), "a", 1500 * time.Millisecond, ms(1_700_000_001_000 + 496 + 1500)},
		{"zero period", ms(1_700_000_001_234), "a", 0, ms(1_700_000_001_234)},
		{"negative period", ms(1_700_000_001_234), "a", -time.Second, ms(1_700_000_001_234)},
		{"sub-millisecond period", ms(1_700_000_001_234), "a", 500 * time.Microsecond, ms(1_700_000_001_234)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hostqueue.NextHostCheck(tt.now, tt.key, tt.period)
			if !got.Equal(tt.want) {
				t.Errorf("NextHostCheck(%d ms, %q, %v) = %d ms, want %d ms", tt.now.UnixMilli(), tt.key, tt.period, got.UnixMilli(), tt.want.UnixMilli())
			}
		})
	}
}

// TestNextHostCheckProperties checks the formula's promises on many random
// times, keys and periods: strictly after now, at most two periods later,
// at the key's fixed offset within the period, and the same for every now
// within one period.
func TestNextHostCheckProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	periods := []time.Duration{time.Millisecond, 1001 * time.Millisecond, 5 * time.Second, time.Minute, 7*time.Second + 3*time.Millisecond}
	for _, period := range periods {
		t.Run(period.String(), func(t *testing.T) {
			p := period.Milliseconds()
			for i := range 2000 {
				key := fmt.Sprintf("host-%d.example:%d", rng.IntN(1_000_000), rng.IntN(65536))
				now := time.Unix(0, rng.Int64N(4_000_000_000_000_000_000)) // 1970..2096, with ns
				got := hostqueue.NextHostCheck(now, key, period)
				if !got.After(now) {
					t.Fatalf("#%d key %q now %v: next check %v is not after now", i, key, now, got)
				}
				if got.After(now.Add(2 * period)) {
					t.Fatalf("#%d key %q now %v: next check %v is more than 2 periods away", i, key, now, got)
				}
				if off := got.UnixMilli() % p; off != int64(hostqueue.Hash(key)%uint64(p)) {
					t.Fatalf("#%d key %q: offset in period %d ms, want hash %% period = %d", i, key, off, hostqueue.Hash(key)%uint64(p))
				}
				periodStart := ms(now.UnixMilli() - now.UnixMilli()%p)
				for _, other := range []time.Time{periodStart, periodStart.Add(period - time.Millisecond)} {
					if o := hostqueue.NextHostCheck(other, key, period); !o.Equal(got) {
						t.Fatalf("#%d key %q: now %v gives %v but %v in the same period gives %v", i, key, now, got, other, o)
					}
				}
			}
		})
	}
}

// TestNextHostCheckSpreadsHosts: 1000 hosts with a 5 s period fall into
// the period's 50 buckets of 100 ms close to uniformly. The hash is fixed,
// so the outcome is deterministic; the bounds are those a uniform spread
// meets with overwhelming probability, so a weak or constant hash fails.
func TestNextHostCheckSpreadsHosts(t *testing.T) {
	const (
		hosts   = 1000
		period  = 5 * time.Second
		bucket  = 100 * time.Millisecond
		buckets = int(period / bucket)
	)
	now := ms(1_700_000_000_000) // aligned to the period
	counts := make([]int, buckets)
	for i := range hosts {
		key := fmt.Sprintf("host-%d.example.com", i)
		next := hostqueue.NextHostCheck(now, key, period)
		off := next.Sub(now) - period
		if off < 0 || off >= period {
			t.Fatalf("%s: offset %v outside [0, %v)", key, off, period)
		}
		counts[off/bucket]++
	}
	covered := 0
	for _, c := range counts {
		if c > 0 {
			covered++
		}
	}
	if covered < buckets*9/10 {
		t.Errorf("check offsets cover %d of %d 100ms buckets, want at least 90%%: %v", covered, buckets, counts)
	}
	// Pearson's chi-squared against uniform; 85.35 is the 0.999 quantile
	// for 49 degrees of freedom.
	expected := float64(hosts) / float64(buckets)
	var chi2 float64
	for _, c := range counts {
		d := float64(c) - expected
		chi2 += d * d / expected
	}
	if chi2 > 85.35 {
		t.Errorf("chi-squared %.1f over 49 degrees of freedom: offsets are not spread uniformly: %v", chi2, counts)
	}
	if m := slices.Max(counts); m > 3*int(expected) {
		t.Errorf("one 100ms bucket holds %d hosts (mean %.0f): %v", m, expected, counts)
	}
}

func TestVirtualShard(t *testing.T) {
	tests := []struct {
		key  string
		want int
	}{
		{"", 5},       // 0xcbf29ce484222325 % 16
		{"a", 12},     // 0xaf63dc4c8601ec8c % 16
		{"foobar", 8}, // 0x85944171f73967e8 % 16
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.key), func(t *testing.T) {
			if got := hostqueue.VirtualShard(tt.key); got != tt.want {
				t.Errorf("VirtualShard(%q) = %d, want %d", tt.key, got, tt.want)
			}
		})
	}
	t.Run("stable, in range and used", func(t *testing.T) {
		per := make([]int, hostqueue.VirtualShards)
		for i := range 1600 {
			key := fmt.Sprintf("h%d.example:8080", i)
			v := hostqueue.VirtualShard(key)
			if v < 0 || v >= hostqueue.VirtualShards {
				t.Fatalf("VirtualShard(%q) = %d, outside [0, %d)", key, v, hostqueue.VirtualShards)
			}
			if again := hostqueue.VirtualShard(key); again != v {
				t.Fatalf("VirtualShard(%q) = %d then %d", key, v, again)
			}
			per[v]++
		}
		for v, n := range per {
			// Mean 100; a uniform hash is below 50 with negligible probability.
			if n < 50 {
				t.Errorf("virtual shard %d got %d of 1600 keys: %v", v, n, per)
			}
		}
	})
}

func TestOwnedShardsPartition(t *testing.T) {
	for count := 1; count <= hostqueue.VirtualShards; count++ {
		t.Run(fmt.Sprintf("ShardCount=%d", count), func(t *testing.T) {
			owner := map[int]int{}
			for s := range count {
				owned := hostqueue.OwnedShards(s, count)
				if len(owned) == 0 {
					t.Errorf("shard %d of %d owns no virtual shard", s, count)
				}
				if !slices.IsSorted(owned) {
					t.Errorf("shard %d of %d: %v not ascending", s, count, owned)
				}
				for _, v := range owned {
					if v < 0 || v >= hostqueue.VirtualShards {
						t.Errorf("shard %d of %d owns virtual shard %d, out of range", s, count, v)
					}
					if prev, dup := owner[v]; dup {
						t.Errorf("virtual shard %d owned by shards %d and %d of %d", v, prev, s, count)
					}
					owner[v] = s
				}
			}
			for v := range hostqueue.VirtualShards {
				if _, ok := owner[v]; !ok {
					t.Errorf("virtual shard %d has no owner with ShardCount %d", v, count)
				}
			}
			// Invocations outside the count own nothing.
			for _, s := range []int{-1, count, count + 1} {
				if got := hostqueue.OwnedShards(s, count); len(got) != 0 {
					t.Errorf("OwnedShards(%d, %d) = %v, want none", s, count, got)
				}
			}
		})
	}
	t.Run("ShardCount=0", func(t *testing.T) {
		if got := hostqueue.OwnedShards(0, 0); len(got) != 0 {
			t.Errorf("OwnedShards(0, 0) = %v, want none", got)
		}
	})
	t.Run("balanced", func(t *testing.T) {
		// 16 virtual shards over 5 invocations: sizes differ by at most one.
		var sizes []int
		for s := range 5 {
			sizes = append(sizes, len(hostqueue.OwnedShards(s, 5)))
		}
		if slices.Max(sizes)-slices.Min(sizes) > 1 {
			t.Errorf("owned shard counts %v differ by more than one", sizes)
		}
	})
}
