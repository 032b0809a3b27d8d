// Package storetest is the contract of hostqueue.Store as one test suite,
// run against every store (DynamoDB on moto in package dynamo, SQLite in a
// file and in memory in package sqlite) so that they cannot drift: the
// engine runs on either and must not be able to tell them apart.
//
// The cases are grouped by the concern they check, one group per
// interface Store is made of (Queues, Leases, RobotsCache), and each case
// sees the stores only through its concern's interfaces. It checks
// observable behaviour only. Where a store cannot show a case, a
// capability flag of the Harness says so and the case is skipped with the
// reason.
package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// Harness makes the stores the suite tests.
type Harness struct {
	// New returns a store with no state, of its own (a fresh table or
	// file per call), whose idle TTLs read time from now. The harness
	// cleans it up with t.Cleanup.
	New func(t *testing.T, now func() time.Time) Fixture
	// IdleExpiry says the store hides an idle host's state once its
	// IdleTTL has passed (Load finds nothing, an append starts afresh).
	// DynamoDB does not: its TTL deletes expired items in the background,
	// up to days later, and reads return them until then (moto never
	// deletes them).
	IdleExpiry bool
	// Parallel runs the cases in parallel (each on its own store).
	Parallel bool
	// NoRefresh, when set, says why the store does not keep refreshing
	// URLs yet: the refresh cases are skipped with it.
	NoRefresh string
	// Scale multiplies the sizes of the concurrency case (0 means 1): an
	// emulator over HTTP takes a smaller one.
	Scale float64
}

// Fixture is one case's store.
type Fixture struct {
	Store hostqueue.Store
	// Peer is another store on the same state: another Lambda instance
	// on the same table, another connection to the same file. Nil means
	// the store has no other way in, and Store is used.
	Peer hostqueue.Store
}

// Clock is a settable clock for the stores' idle TTLs. The suite's times
// are whole milliseconds, as both stores keep them.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// T0 is where every case's clock starts.
var T0 = time.UnixMilli(1_760_000_000_000)

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is one case: its clock and the fixture's store and peer, each seen
// through the interface of one concern. A case uses those of its group
// (the robots.txt cases the queues' too: a commit stores answers).
type env struct {
	t     *testing.T
	clock *Clock

	store, peer        hostqueue.Queues
	leases, peerLeases hostqueue.Leases
	robots, peerRobots hostqueue.RobotsCache
}

type testCase struct {
	name string
	run  func(t *testing.T, h Harness, e *env)
}

// The contract, by concern.
var (
	queueCases = []testCase{
		{"AppendLoadOrder", testAppendLoadOrder},
		{"ValidatorsURL", testValidatorsURL},
		{"LoadAndCommitUnknownHost", testUnknownHost},
		{"Activated", testActivated},
		{"Eviction", testEviction},
		{"EvictionReportFails", testEvictionReportFails},
		{"EvictionReportedOnceAcrossRetry", testEvictionRetry},
		{"HoldBack", testHoldBack},
		{"CommitDone", testCommitDone},
		{"ReleaseAndContinue", testReleaseContinue},
		{"PolitenessFields", testPolitenessFields},
		{"OriginRuns", testOriginRuns},
		{"LearnedDelays", testLearnedDelays},
		{"Attempts", testAttempts},
		{"DueHosts", testDueHosts},
		{"BatchDue", testBatchDue},
		{"IdleTTL", testIdleTTL},
		{"ConcurrentAppendersAndConsumer", testConcurrency},
		{"ConcurrentEviction", testConcurrentEviction},
		{"Placement", testPlacement},
		{"BatchPlacement", testBatchPlacement},
		{"Move", testMove},
		{"RefreshKept", testRefreshKept},
		{"RefreshCap", testRefreshCap},
		{"RefreshCommit", testRefreshCommit},
		{"RefreshStop", testRefreshStop},
		{"RefreshResend", testRefreshResend},
	}
	leaseCases = []testCase{
		{"AcquireRenewRelease", testLeases},
	}
	robotsCases = []testCase{
		{"Robots", testRobots},
	}
)

// Run runs the whole contract against the stores h makes: one subtest
// per concern (Queues, Leases, RobotsCache), one per case within it.
func Run(t *testing.T, h Harness) {
	for _, g := range []struct {
		concern string
		cases   []testCase
	}{
		{"Queues", queueCases},
		{"Leases", leaseCases},
		{"RobotsCache", robotsCases},
	} {
		t.Run(g.concern, func(t *testing.T) {
			if h.Parallel {
				t.Parallel()
			}
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					if h.Parallel {
						t.Parallel()
					}
					c.run(t, h, h.env(t))
				})
			}
		})
	}
}

// env makes a case's store, on a clock of its own at T0.
func (h Harness) env(t *testing.T) *env {
	clock := &Clock{t: T0}
	f := h.New(t, clock.Now)
	peer := f.Peer
	if peer == nil {
		peer = f.Store
	}
	return &env{t: t, clock: clock,
		store: f.Store, peer: peer,
		leases: f.Store, peerLeases: peer,
		robots: f.Store, peerRobots: peer,
	}
}

func (h Harness) scaled(n int) int {
	if h.Scale <= 0 {
		return n
	}
	return max(1, int(float64(n)*h.Scale))
}
