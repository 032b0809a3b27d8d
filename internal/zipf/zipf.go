// Package zipf holds the Zipf-law URL list that issue 24 prices: host sizes
// as real lists have them (many hosts with one URL, a few with many), used
// by the benchmark's Zipf row on moto (infra/bench) and by the
// simulation's Zipf shape (infra/sim), so that both price the same list.
package zipf

import "math"

// The list: Hosts hosts, host r (from 1) max(1, round(Top/r)) URLs: the
// busiest at PersistLimit's default (1,000), 9,334 hosts with one URL,
// 16,449 URLs in all.
const (
	Hosts = 10_000
	Top   = 1000
)

// Sizes returns n host sizes, host r (from 1) max(1, round(top / r^s))
// URLs, busiest first.
func Sizes(n int, top, s float64) []int {
	out := make([]int, n)
	for r := range out {
		out[r] = max(1, int(math.Round(top/math.Pow(float64(r+1), s))))
	}
	return out
}

// Total is the number of URLs in sizes.
func Total(sizes []int) int {
	n := 0
	for _, s := range sizes {
		n += s
	}
	return n
}
