package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/urldownloader/urldownloader/internal/billing"
)

// The cost of keeping URLs refreshed on AWS (issue 41, docs/refresh.md):
// a per-session count of what the DynamoDB store and the engine do for a
// host's due refreshes, priced on demand, with the check functions'
// Lambda as the scenarios price it (memory x time, shards running while
// work is due). It is a model, not an event run: refreshing hosts cost
// nothing between their due times (the store's key property, asserted on
// the emulated stack by infra/emulated), so the hour's cost is the sum of
// its sessions'.

// refreshTargetPerMillion is the stated target, dollars per million
// refreshes all-in, for the costliest shape (one refresh a session). Why
// this figure: a refetch's own work is the transaction that moves its
// item to its next due time (3 small items at twice a plain write's
// units: $3.75 a million) and a session's plain reads and writes around
// it (about $1.50 more); $8 leaves room for those, and not for a waiting
// host that costs anything: one strongly consistent read of it by each
// once-a-minute check run while it waits would add 60 read units to an
// hourly refresh ($7.50 a million) and break it. For scale: a plain URL
// sent through the input queue costs $2.06 a million (the headline,
// docs/benchmarks.md), but a producer refreshing that way fetches
// unconditionally, receives every unchanged body, and keeps validators
// and digests in a store of their own.
const refreshTargetPerMillion = 8.0

// RefreshModel is the shape priced.
type RefreshModel struct {
	URLs  int
	Every time.Duration
	// PerSession is how many of a host's refreshes one session fetches:
	// 1 for hosts with a few URLs spread over the interval (the first due
	// times are spread within it), more for a host whose URLs come due
	// together.
	PerSession int
	// Changed is the share of refetches that find new content and emit
	// a result (SQS SendMessageBatch, ten results a request).
	Changed float64
	// ItemBytes and HostBytes are the stored sizes of a refresh item
	// and of a refreshing host's item: both within one write unit (1 KB).
	ItemBytes, HostBytes int
	// MemoryMB is the check function's memory; ShardCount the template's.
	MemoryMB   int
	ShardCount int
}

// RefreshCost is a model's cost per refresh.
type RefreshCost struct {
	Model                    RefreshModel
	WriteUnits, ReadUnits    float64 // per refresh
	SQSRequests              float64 // per refresh
	Shards                   int     // check functions running
	GBSeconds                float64 // per refresh
	Dynamo, SQS, Lambda, All float64 // dollars per million refreshes
}

// refreshUnits counts one session's units for k due refreshes, as the
// store writes them (shared/aws/dynamo/refresh.go):
//
//   - reads: the check's look at the due index (its bucket, shared by up
//     to 30 hosts, read eventually consistent: half a unit a 4 KB, taken
//     whole here), the host item read by the look that finds it due and by
//     the run before it that sees it due before its end (strongly
//     consistent, a unit each), the Load (the host item and the Query of
//     its due refresh items), and the host item read before each of the
//     session's two commits;
//   - writes: the refetch commit, one transaction of the host item and,
//     per refresh, the delete of its item and the put under its next due
//     time (twice the units of plain writes); the release commit (the
//     host item, a plain write) and its move to the bucket of its next
//     refresh (one add), and that bucket's delete shared by its hosts.
func refreshUnits(m RefreshModel, k int) (write, read float64) {
	wu := func(b int) float64 { return math.Ceil(float64(b) / 1024) }
	ru := func(b int) float64 { return math.Ceil(float64(b) / 4096) }
	read = 0.5 + 2*ru(m.HostBytes) + ru(m.HostBytes) + ru(k*m.ItemBytes) + 2*ru(m.HostBytes)
	write = 2*wu(m.HostBytes) + float64(k)*2*(wu(m.ItemBytes)+wu(m.ItemBytes)) + wu(m.HostBytes) + 1 + 1.0/30
	return write, read
}

// PriceRefresh prices m per million refreshes. Lambda: the check
// functions run while refreshes are due, which at a steady rate is
// always: max(ShardCount, the shards the rate needs at the measured
// requests a second of an invocation) functions of MemoryMB all the time.
func PriceRefresh(m RefreshModel) RefreshCost {
	k := max(1, m.PerSession)
	w, r := refreshUnits(m, k)
	c := RefreshCost{Model: m, WriteUnits: w / float64(k), ReadUnits: r / float64(k)}
	c.SQSRequests = m.Changed / 10
	perSecond := float64(m.URLs) / m.Every.Seconds()
	cfg := Defaults()
	cfg.CheckMemoryMB = m.MemoryMB
	c.Shards = max(m.ShardCount, int(math.Ceil(perSecond/invocationRPS(cfg))))
	c.GBSeconds = float64(c.Shards) * float64(m.MemoryMB) / 1024 / perSecond
	c.Dynamo = 1e6 * (c.WriteUnits*billing.PriceWriteUnit + c.ReadUnits*billing.PriceReadUnit)
	c.SQS = 1e6 * c.SQSRequests * billing.PriceSQSRequest
	// Invocations: one run a shard a minute (the scheduled runs).
	runs := float64(c.Shards) * 60 / perSecond / 60
	c.Lambda = 1e6 * (c.GBSeconds*billing.PriceLambdaGBSecond + runs*billing.PriceLambdaInvocation)
	c.All = c.Dynamo + c.SQS + c.Lambda
	return c
}

// RefreshModels are the shapes the report prices: a million URLs
// refreshed hourly, one refresh a session (hosts of a few URLs, the
// costliest), and ten (hosts whose URLs come due together).
func RefreshModels() []RefreshModel {
	base := RefreshModel{URLs: 1_000_000, Every: time.Hour, PerSession: 1, Changed: 0.1,
		ItemBytes: 300, HostBytes: 700, MemoryMB: 512, ShardCount: Defaults().ShardCount}
	ten := base
	ten.PerSession = 10
	return []RefreshModel{base, ten}
}

// RefreshTable is the report of -refresh.
func RefreshTable(cs []RefreshCost) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| URLs, interval | refreshes a session | changed | write / read units a refresh | check functions (MB) | DynamoDB | SQS | Lambda | **$ per million refreshes** (target $%.2f) | $ an hour |\n", refreshTargetPerMillion)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cs {
		m := c.Model
		perHour := c.All * float64(m.URLs) / 1e6 * (time.Hour.Seconds() / m.Every.Seconds())
		fmt.Fprintf(&b, "| %d, %s | %d | %.0f%% | %.2f / %.2f | %d (%d) | $%.2f | $%.3f | $%.2f | **$%.2f** | $%.2f |\n",
			m.URLs, m.Every, m.PerSession, 100*m.Changed, c.WriteUnits, c.ReadUnits, c.Shards, m.MemoryMB,
			c.Dynamo, c.SQS, c.Lambda, c.All, perHour)
	}
	return b.String()
}
