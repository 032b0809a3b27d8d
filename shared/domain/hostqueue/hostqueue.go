// Package hostqueue is the domain of the downloader: per-host bounded URL
// queues, their eviction policy, when a host is due, and the Store that keeps
// them. It imports no AWS package; the DynamoDB layout lives in package
// dynamo.
package hostqueue

import (
	"context"
	"errors"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// Entry is one queued URL. How a store lays it out is the store's own
// business (package dynamo, package sqlite).
type Entry struct {
	ID           string
	URL          string
	ETag         string
	LastModified string
	// ValidatorsURL is the URL ETag and LastModified were recorded for,
	// when it is not URL itself (a redirect's target: see
	// ValidatorsFor); empty otherwise. Stores keep it empty when it
	// equals URL (StoredValidatorsURL), so such an entry loads with "".
	ValidatorsURL string
	// Hops counts the redirects already followed to reach URL (a
	// cross-host redirect target is queued with the hops so far), so a
	// redirect loop ends however many hosts its chain crosses.
	Hops int
}

// ValidatorsFor is the URL whose request carries the entry's ETag and
// LastModified: ValidatorsURL, or URL when that is empty. Both are
// normalised (urlmsg.Normalize), as redirect targets are, so a hop is the
// one by plain comparison.
func (e Entry) ValidatorsFor() string {
	if e.ValidatorsURL != "" {
		return e.ValidatorsURL
	}
	return e.URL
}

// StoredValidatorsURL is ValidatorsURL as a store keeps it: empty when
// the validators are the URL's own, so the common entry costs nothing.
func (e Entry) StoredValidatorsURL() string {
	if e.ValidatorsURL == e.URL {
		return ""
	}
	return e.ValidatorsURL
}

// Host is the stored state of one queue key (a host, or a registrable domain
// in domain queue mode), as the check engine sees it.
type Host struct {
	Key          string
	VirtualShard int
	// Pending counts the queued entries; Head holds the first of them, as many
	// as the caller asked for (fewer when the queue is shorter).
	Pending int
	Head    []Entry
	// Due is when the host is next checked; zero when it is out of the due
	// index (an empty queue).
	Due time.Time
	// State is the host's politeness state (last fetch, pause, failure
	// run, learned delays); its rules are package politeness's.
	politeness.State
	// Attempts counts failed attempts of the entries that have some.
	Attempts map[string]int
	// Robots holds the robots.txt answers small enough to live in the
	// host's own state, by origin; RobotsItems the origins whose larger
	// answer is stored apart (Store.Robots). An origin in neither has no
	// stored robots.txt: there is nothing to look up.
	Robots      map[string]Robots
	RobotsItems map[string]bool
	// Refreshes are the host's refreshing URLs due first, earliest first,
	// as many as the caller asked for; Refreshing counts them all.
	Refreshes  []Refresh
	Refreshing int
}

// DueBy tells whether the host is due at or before now as stored: in the
// due index, and its due time come.
func (h *Host) DueBy(now time.Time) bool { return !h.Due.IsZero() && !h.Due.After(now) }

// Robots is a robots.txt as last fetched: the final status and body.
type Robots struct {
	Status    int
	Body      []byte
	FetchedAt time.Time
}

// AppendRequest adds URLs to one host's queue.
type AppendRequest struct {
	Key     string
	Entries []Entry
	// Limit is PersistLimit: after the append the queue holds at most Limit
	// entries, the oldest evicted first (or, with HoldBack, the newest not
	// appended).
	Limit int
	// HoldBack appends only what fits under Limit, evicting nothing: the
	// entries that do not fit (the last of Entries) are left to the caller,
	// counted in AppendResult.HeldBack (see Ingester.Overflow).
	HoldBack bool
	// Due is the check time to set when the host is not due yet. Callers
	// pass now: a host that becomes active has no session to wait for, and
	// its first request is paced by its stored last fetch anyway. The
	// reference design's staggered NextHostCheck spaces re-checks instead
	// (see Commit.NextDue), and a drained host waits for late URLs until
	// then before it leaves the index (package check).
	Due time.Time
	// OnEvict is called with the entries the append is about to evict, before
	// the write that removes them, so they can be reported first: if it
	// fails, nothing is written. On a retried write it is called again with
	// only the entries not reported yet.
	OnEvict func(ctx context.Context, evicted []Entry) error
	// Shard, with Placed, is the virtual shard ingest placed the host in
	// (Place: by the address its name resolved to). A host the append
	// creates goes there, and so does an idle one (ShardFor); a host with
	// work keeps its shard (the check moves it: Mover). Without Placed
	// (no lookup, or it failed) a new host goes to VirtualShard(Key) and
	// an existing one stays where it is.
	Shard  int
	Placed bool
	// Refreshes are refreshing URLs to keep beside the queue (or stops of
	// them): a new one is due first at refresh.FirstDue from Due, one
	// already kept for its URL takes the new interval and flags and
	// keeps its id, seq, validators and due time. RefreshCap is
	// MaxRefreshPerHost: from the first new one beyond it, the rest are
	// refused (AppendResult.RefreshRefused), as HoldBack leaves out the
	// last entries.
	Refreshes  []Refresh
	RefreshCap int
}

// AppendResult says what an append did.
type AppendResult struct {
	Appended int
	Evicted  int
	// HeldBack counts the entries a HoldBack append left out: the last
	// HeldBack of AppendRequest.Entries.
	HeldBack int
	Pending  int
	// Activated is set when the append put the host into the due index (it
	// had no work before), so a check run may have to be woken for it.
	Activated bool
	// Shard is the virtual shard the host is in after the append: the
	// one to wake when Activated.
	Shard int
	// RefreshRefused counts the refreshes refused for RefreshCap: the
	// last RefreshRefused of AppendRequest.Refreshes.
	RefreshRefused int
	// Stopped are the ids of the stops (Refresh.Stop) that marked a kept
	// schedule: that schedule's final result comes under its own id, so
	// the stop's id is answered at entry (Ingester). A stop for a URL
	// with no schedule is kept instead and answered by the engine.
	Stopped []string
}

// Commit records progress on a host by the shard's lease holder.
type Commit struct {
	// Done are the IDs of entries finished (their results are sent); they are
	// removed from the head of the queue. IDs no longer queued are ignored.
	Done []string
	// State replaces the host's politeness state (a zero FailingSince and
	// LastError: the host answers).
	politeness.State
	// Attempts replaces the per-entry failed-attempt counters (only entries
	// still queued are kept).
	Attempts map[string]int
	// Release ends the holder's work on the host: the host leaves the due
	// index when its queue is empty, else it is due again at NextDue.
	Release bool
	NextDue time.Time
	// Continue, with Release, keeps the host with the holder when entries
	// arrived since it was loaded: it stays due (its due time, and so the
	// due index, untouched) and the returned state holds the new entries.
	// Only an empty queue is then released.
	Continue bool
	// Want is how many head entries to return in the new state.
	Want int
	// IdleTTL is how long an idle host's state (last fetch, robots) is kept.
	IdleTTL time.Duration
	// Robots are robots.txt answers fetched since the last commit, by
	// origin; the store keeps small ones in the host's state (no write of
	// their own) and larger ones in items of their own.
	Robots map[string]Robots
	// Refreshed are refreshing URLs fetched since the last commit, with
	// their new schedules (by URL; one no longer kept is ignored);
	// RefreshEnded the URLs whose schedules ended (their final results
	// are sent). On Release a host with no queued entry stays in the due
	// index until its earliest refresh, not before NextDue.
	Refreshed    []Refresh
	RefreshEnded []string
}

// Appender adds URLs to host queues: all that ingest needs of a store.
// Implementations must make Append safe against concurrent Appends and
// Commits on the same key (no entry lost, none duplicated by the store
// itself).
type Appender interface {
	// Append adds entries to a host's queue, creating the host if needed.
	Append(ctx context.Context, req AppendRequest) (AppendResult, error)
}

// BatchAppender is an Appender that takes many hosts' appends in one
// call: a store with one writer (SQLite) then runs them in the
// transactions it already shares between callers, instead of receiving
// them one goroutine at a time behind the check engine's commits. The
// outcomes are in the order of reqs; each is the outcome Append would have
// had.
type BatchAppender interface {
	Appender
	AppendBatch(ctx context.Context, reqs []AppendRequest) []AppendOutcome
}

// UntilBatchAppender is a BatchAppender whose batch takes many round trips
// (DynamoDB): it starts no host's write after until (IngestParams.Until)
// and fails those with ErrNoTime, as Ingester does for single appends.
type UntilBatchAppender interface {
	BatchAppender
	AppendBatchUntil(ctx context.Context, reqs []AppendRequest, until time.Time) []AppendOutcome
}

// AppendOutcome is one append's outcome in a batch.
type AppendOutcome struct {
	Result AppendResult
	Err    error
}

// Queues keeps host queues: ingest appends to them, the holder of a
// shard's lease finds its due hosts, loads them and commits its progress.
// Implementations must make Append and Commit safe against each other and
// against concurrent callers on the same key.
type Queues interface {
	Appender
	// Load returns a host's state with up to want head entries; ErrNotFound
	// when the host has no state.
	Load(ctx context.Context, key string, want int) (*Host, error)
	// Commit applies progress and returns the new state.
	Commit(ctx context.Context, key string, c Commit) (*Host, error)
	// DueHosts lists the keys in a virtual shard due at or before now.
	DueHosts(ctx context.Context, vshard int, now time.Time, limit int) ([]string, error)
}

// LookAhead is a store that can tell whether a shard has a host due by a
// time from its due index alone, reading no host. The check engine asks it
// whether to stay for work ahead before its run ends: a host waiting for a
// refresh (or a back-off) then costs no read until it is due. A stale index
// entry may answer yes (the run stays a little longer), never a due host
// no.
type LookAhead interface {
	AnyDueBy(ctx context.Context, vshard int, t time.Time) (bool, error)
}

// Leases hands out the virtual shards: at most one live owner each.
type Leases interface {
	// AcquireShard takes or renews the lease on a virtual shard until the
	// given time; it returns false when another owner holds a live lease.
	AcquireShard(ctx context.Context, vshard int, owner string, until, now time.Time) (bool, error)
	// ReleaseShard gives the lease back early so the next invocation starts
	// at once.
	ReleaseShard(ctx context.Context, vshard int, owner string) error
}

// RobotsCache keeps the robots.txt answers too large for a host's own
// state (Host.RobotsItems names them; Commit stores them).
type RobotsCache interface {
	// Robots returns the stored robots.txt of origin (scheme://host[:port])
	// kept under queue key; nil when none is stored.
	Robots(ctx context.Context, key, origin string) (*Robots, error)
	// PutRobots stores a robots.txt of origin under queue key.
	PutRobots(ctx context.Context, key, origin string, r Robots) error
}

// Store is everything the check engine needs of a store: the queues, the
// shard leases and the robots.txt cache, kept together because a commit
// writes the host's queue and its robots.txt answers in one step.
type Store interface {
	Queues
	Leases
	RobotsCache
}

// Publisher sends results to the output queue. Publish returns only when
// every result is sent, or an error naming how many were not.
type Publisher interface {
	Publish(ctx context.Context, results []result.Result) error
}

// ErrNotFound is returned by Store.Load for a key with no state.
var ErrNotFound = errors.New("host not found")

// ErrConflict is returned when a conditional write kept losing to concurrent
// writers after the store's retries; the caller may retry later.
var ErrConflict = errors.New("conflicting concurrent update")
