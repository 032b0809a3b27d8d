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
//   - params.Defaults, check.DefaultLeaseTTL, handler.DeadlineMargin,
//     wake.DefaultEvery, sqsout's batch limits: every default and constant
//     the model uses, read from the product.
//
// Models of the product's code, written from it step by step (check.go,
// store.go, ingest.go, sqs.go name the function each step stands for):
//   - Engine.Run: leases taken and renewed every TTL/4 (TTL 84 s with the
//     defaults, twice FetchTimeout + MaxCrawlDelay + commit margin), a
//     scheduled run waiting up to 20 s for a predecessor's leases, a woken
//     run ending at once when the shard is held, the due query every
//     second (MaxConcurrentHosts + 1 hosts, the run's own active hosts among
//     them), the idle exit and its one re-check, and the end at Until with
//     workers finishing and leases released.
//   - worker.work: rounds of ten from a head read two rounds deep, pacing
//     from the end of the last response (and the stored last fetch across
//     runs), fencing on the lease, robots.txt fetched when not stored or
//     older than RobotsTTL, back-off FetchDelay x 2^errors to MaxBackoff,
//     MaxAttempts, the give-up after GiveUpAfter in rounds of 100, publish
//     then commit (in the background while the next round is fetched),
//     linger until the next staggered check unless the dispatcher is
//     starved, release with Continue.
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
// Models of AWS (dynamo.go, ingest.go, lambda.go): per-partition-key
// limits, warm throughput and the SDK's retries; the SQS event source
// mapping's pollers and batching; Lambda invocations, cold starts and
// GB-seconds. Latencies are log-normal through a p50 and a p99 (Config).
//
// Models of the web (workload.go): a Zipf spread of URLs over hosts,
// response times, robots.txt, failing hosts. Every fraction is an
// assumption, stated on the benchmark page.

package main
