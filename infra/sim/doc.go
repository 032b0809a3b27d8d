// What is the product's code and what is a model of it.
//
// The simulation is single-threaded on a virtual clock (clock.go): every
// request, response, store call, SQS send and Lambda invocation is an event
// at a simulated instant, and the same seed replays the same run. The
// engine's goroutines, real sockets and the SDK cannot run on such a clock
// in-process at this scale (a million hosts, millions of requests, a
// minute of wall time), so:
//
// The product's own code, called as is:
//   - hostqueue.VirtualShard, hostqueue.Hash and hostqueue.OwnedShards:
//     which virtual shard a host is in and which check shard owns it
//     (v % ShardCount == s); for a proposed other count of virtual shards
//     the same hash and rule.
//   - hostqueue.NextHostCheck: the staggered next check (release, linger).
//   - hostqueue.Evict: PersistLimit at every append.
//   - politeness.State and politeness.Policy, the politeness core: each
//     session's and each stored host's politeness state is a
//     politeness.State, and every rule on it is a call of the Policy built
//     once from the run's parameters (Sim.pol): the delay (FetchDelay, the
//     Crawl-delay once robots.txt is read, DelayFactor x the last
//     answer's duration capped by MaxDelay, the delay rate limits taught),
//     the next due time, back-off on a failure (Failed), a 429 without
//     Retry-After raising the host's delay (Refused), the give-up bound
//     and expiry, a usable answer ending the failure run (Answered), a
//     drained queue (Drained), a give-up's end (GivenUp). The simulated
//     time (int64 nanoseconds) becomes a time.Time at those calls through
//     wall and fromWall (clock.go). checkPolite holds every request to
//     the delay the core decided for it.
//   - check.WaitsInPlace (a host whose next request is more than 30 s
//     off is released, due again then), check.LeaseFences (no request
//     unless the lease outlives it, the delay after it up to 30 s and the
//     commit margin) and check.LeaseTTL (84 s with the defaults).
//   - params.Defaults, check.DefaultLeaseTTL, handler.DeadlineMargin,
//     wake.DefaultEvery, sqsout's batch limits: every default and constant
//     the model uses, read from the product.
//
// Models of the product's code, written from it step by step (check.go,
// store.go, ingest.go, sqs.go name the function each step stands for):
//   - Engine.Run: leases taken and renewed every TTL/4 (check.LeaseTTL), a
//     scheduled run waiting up to 20 s for a predecessor's leases, a woken
//     run ending at once when the shard is held, the due query every
//     second (MaxConcurrentHosts + 1 hosts, the run's own active hosts among
//     them), the idle exit and its one re-check, and the end at Until with
//     workers finishing and leases released.
//   - worker.work: rounds of ten from a head read two rounds deep; pace's
//     order of decisions (release for a long delay, give up at the
//     failure run's bound, stop at Until or the deadline, fence on the
//     lease), each decision the core's or check's function; the stored
//     last fetch and the one the run remembers; robots.txt fetched when
//     not stored or older than RobotsTTL (its failures never a rate-limit
//     signal, its answer's duration not an adaptive delay, as in
//     policyFor); MaxAttempts; the give-up in rounds of 100, denied when
//     the last failure was robots.txt's (LastError's "robots.txt: "
//     prefix, giveup.go's robotsFailure); publish then commit (in the
//     background while the next round is fetched), with worker.commit's
//     five attempts; linger until the next staggered check unless the
//     dispatcher is starved; release with Continue, due again at the
//     staggered check or the host's next request, whichever is later
//     (worker.nextDue).
//     Not modelled: the check engine's start pacing (a host new to a run
//     waits for its slot, at most its first delay), the yield of a failing host's worker to
//     due hosts (pace's waitOrYield), the store write before each request
//     to a host whose delay exceeds 30 s (recordStart: the default web
//     model has no such host, its delays stay under 30 s; one a test
//     sets is released after each request, as check.WaitsInPlace says,
//     without that write), the stores'
//     millisecond rounding of the last fetch, RandomizeDelay, HostRules
//     (one Policy for every host) and the redirect hops.
//   - dynamo.Store: the items each call reads and writes and their sizes
//     (host item ~200 bytes plus the inline tail, spilled to 64 KB chunks
//     past 700 bytes, small robots.txt inline, large ones in an item of
//     their own), the due-index writes (a put on entering, a delete on
//     leaving, both on a due change), version conflicts retried, popping the
//     head by done ids.
//   - hostqueue.Ingester and the ingest handler: a batch grouped by host,
//     16 appends at once, evictions published first, wake-ups at most one a
//     shard every 5 s from one instance.
//   - sqsout.Publisher: batches of 10 and 255 KB, a 100 ms linger.
//
// Models of AWS (dynamo.go, dueindex.go, ssm.go, ingest.go, lambda.go):
// per-partition-key limits (1,000 write and 3,000 read units a second),
// the on-demand table's warm throughput and its growth, and the SDK's
// retries; the due index spread over dueSpread keys a shard, with each
// process's own bucket positions (an add to a bucket another process
// filled is refused, billed, and followed by a query for the newest);
// Parameter Store's 40 transactions a second shared by every instance's
// parameter loads (at its start and every 30 s); the account's Lambda
// concurrency (AccountConc: past it invocations are throttled and retried
// as their event source does); the SQS event source mapping's pollers and
// batching; Lambda invocations, cold starts and GB-seconds. TTL: an idle
// host's item expires 24 h after its last work, longer than any run here;
// every host starts without an item, as one TTL deleted. Latencies are
// log-normal through a p50 and a p99 (Config).
//
// Designs priced, not built (gate.go, `sim -gate`): where one gate per
// server address lives on AWS (issue 40): a conditional item per address,
// a lease per invocation and address, or hosts placed in the virtual shard
// of their address with the gate in the check's memory; hosts' addresses
// (alone, shared-hosting servers, exempt CDN ranges) and DNS changes that
// move a host. With ServerDelay 0 (every scenario) none of it runs.
//
// Models of the web (workload.go): a Zipf spread of URLs over hosts,
// response times, robots.txt, failing hosts, hosts that rate-limit as
// nginx's limit_req does (429 without Retry-After to a request sooner than
// 2 s after the last one accepted). A 5xx is a 500 (only 429 and 503 are
// rate-limit signals to the core). Every fraction is an assumption, stated
// on the benchmark page.

package main
