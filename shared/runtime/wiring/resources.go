package wiring

import (
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/urldownloader/urldownloader/shared/engine"
)

// A function's resources, and the budget derived from them.
//
// Lambda gives a function MemorySize MiB (AWS_LAMBDA_FUNCTION_MEMORY_SIZE)
// and 1,024 file descriptors, and kills it when it runs out of either: a
// check invocation killed that way keeps its shard leases until they
// expire, and its successor refetches the same URLs. So:
//
//   - GOMEMLIMIT is set to memoryLimitShare of MemorySize (unless the
//     environment sets GOMEMLIMIT itself): the GC works harder as the heap
//     nears it instead of letting garbage pile up to twice the live heap.
//   - Host workers may hold workerMemoryShare (half) of MemorySize, less
//     the process's fixed share (runtime, SDK clients, parameter and chunk
//     caches: baseMemory) and the robots cache (engine.RobotsCacheBytes),
//     each counted at its worst, engine.WorkerBytes (1.05 MiB with the
//     default 240 KiB inline limit: a longer body streams to the body
//     store): 198 workers in the check function's 512 MiB. Were every
//     worker at its worst at once, half the memory would be live and the
//     GC would keep the heap under GOMEMLIMIT by working harder; a worker's
//     real use is well below its worst (docs/benchmarks.md, Resources per
//     invocation).
//   - Descriptors: fdBudget in all, well under Lambda's 1,024. The SDK
//     clients' connections are capped (sdkConns: DynamoDB, SQS, SSM, S3), the
//     runtime keeps a handful (runtimeFDs), and the rest are the fetcher's
//     connections (fetch.Options.MaxConns), one per worker (in use, or
//     idle for its host's next request), with an eighth to spare
//     (engine.Budget.Workers); at the cap the fetcher closes the
//     connection idle longest, a host's whose session ended, before it
//     dials.

const (
	// memoryLimitShare is GOMEMLIMIT's share of MemorySize: the rest is
	// what the Go runtime does not count (stacks in flight, fragmentation)
	// and a margin for the Lambda runtime's own bytes.
	memoryLimitShare = 0.85
	// workerMemoryShare of MemorySize is what the workers' bodies and
	// results may fill at their worst, all at once.
	workerMemoryShare = 0.50
	// baseMemory is the heap a function holds without any worker.
	baseMemory = 32 << 20
	// fdBudget is the descriptors a process plans to use at most.
	fdBudget = 800
	// runtimeFDs are the descriptors the process holds besides
	// connections: stdin/out/err, the epoll and its wake-up pipe, the
	// Lambda runtime API's connection, a DNS lookup in flight
	// (docs/benchmarks.md, Resources per invocation).
	runtimeFDs = 24
	// dynamoConns, sqsConns and ssmConns cap each SDK client's
	// connections. A check worker makes one store call at a time, a few
	// per round of ten URLs, and the publisher sends batches of ten: a
	// few dozen connections carry hundreds of workers. Calls beyond the
	// cap wait for a connection instead of opening one.
	dynamoConns = 64
	sqsConns    = 32
	ssmConns    = 4
	// s3Conns: the body store uploads at most s3body.DefaultBuffers
	// bodies at once, one call each; the rest is headroom for HEADs.
	s3Conns  = 8
	sdkConns = dynamoConns + sqsConns + ssmConns + s3Conns
)

// memoryMiB is the function's MemorySize, as Lambda sets it; 0 when not
// run by Lambda (tests, the local stack).
func memoryMiB(getenv func(string) string) int {
	n, err := strconv.Atoi(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// LimitMemory sets the Go runtime's soft memory limit (GOMEMLIMIT) to
// memoryLimitShare of the function's MemorySize, unless GOMEMLIMIT is set
// in the environment (the runtime applied it already) or MemorySize is not
// known. It returns the limit in force (math.MaxInt64: none). Both
// functions call it through FromEnv.
func LimitMemory(getenv func(string) string) int64 {
	mib := memoryMiB(getenv)
	if getenv("GOMEMLIMIT") != "" || mib == 0 {
		return debug.SetMemoryLimit(-1)
	}
	limit := int64(float64(int64(mib)<<20) * memoryLimitShare)
	debug.SetMemoryLimit(limit)
	return limit
}

// BudgetFor is the check engine's Budget in a function of memoryMiB MiB
// (zero Budget when 0: not bounded, as in tests and the local stack, where
// one process stands in for several functions).
func BudgetFor(memoryMiB int) engine.Budget {
	if memoryMiB <= 0 {
		return engine.Budget{}
	}
	workers := int64(float64(int64(memoryMiB)<<20)*workerMemoryShare) - baseMemory - engine.RobotsCacheBytes
	return engine.Budget{Memory: max(workers, 1), Conns: fdBudget - runtimeFDs - sdkConns}
}

// sdkHTTPClient is an SDK HTTP client with at most conns connections to a
// host (the SDK's default allows 2,048).
func sdkHTTPClient(conns int) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxConnsPerHost = conns
		t.MaxIdleConnsPerHost = conns
	})
}

// Local mode's budget (MachineBudget): the process's own limits stand in
// for the function's.
const (
	// localFDReserve are the descriptors local mode keeps besides fetch
	// connections: the state's and the ledger's SQLite files (database,
	// WAL, shared memory), the input and results files, stdio, the epoll,
	// serve mode's listener and its clients, DNS queries in flight.
	localFDReserve = 256
	// localMemoryShare of the machine's memory is what host workers may
	// fill at their worst (engine.WorkerBytes each); a worker's real use is
	// a small part of that (docs/benchmarks.md: peak memory at 10,000
	// hosts).
	localMemoryShare = 0.5
	// localRequests bounds local mode's requests in flight: 10,000 hosts
	// at a 10 s delay answering in 1 s keep 1,000 in flight; beyond that
	// the process's own CPU, not the hosts, would set the latency.
	localRequests = 1024
	// defaultMachineMemory stands in when the machine's memory cannot be
	// read.
	defaultMachineMemory = 4 << 30
)

// Local mode's admission (engine.Admission): it starts at
// localStartRate requests a second per core, below what a core serves over
// plain HTTP beside the site it fetches from (docs/benchmarks.md, section
// 1), so a large list does not wait for the allowance to grow, and holds
// requests within localLate of their planned start on average.
const (
	localStartRate = 3000
	localMinRate   = 100
	localLate      = 50 * time.Millisecond
)

// MachineAdmission is local mode's engine.Admission on a machine with cpus
// cores.
func MachineAdmission(cpus int) *engine.Admission {
	return &engine.Admission{Start: localStartRate * float64(max(1, cpus)), Min: localMinRate, Late: localLate, Period: time.Second}
}

// MachineBudget is the check engine's Budget for a process allowed fds
// descriptors on a machine with memory bytes (ProcessLimits): fds less
// localFDReserve for connections, localMemoryShare of memory for workers.
// A process that may open fewer than a handful of connections still gets
// one worker (engine.Budget.Workers).
func MachineBudget(fds int, memory int64) engine.Budget {
	if memory <= 0 {
		memory = defaultMachineMemory
	}
	return engine.Budget{
		Memory:   max(1, int64(float64(memory)*localMemoryShare)-baseMemory-engine.RobotsCacheBytes),
		Conns:    max(2, fds-localFDReserve),
		Requests: localRequests,
	}
}
