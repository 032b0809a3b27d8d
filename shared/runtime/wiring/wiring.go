// Package wiring is the composition root: it builds the downloader's domain
// services on AWS clients, the one place where DynamoDB, SQS, SSM, S3 and
// HTTP are plugged into the domain. The functions' main.go and the local runner both call it, so the
// local runner drives exactly what is deployed.
package wiring

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/urldownloader/urldownloader/shared/aws/config"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/aws/s3body"
	"github.com/urldownloader/urldownloader/shared/aws/s3warc"
	"github.com/urldownloader/urldownloader/shared/aws/sqsout"
	"github.com/urldownloader/urldownloader/shared/aws/ssmparams"
	"github.com/urldownloader/urldownloader/shared/aws/wake"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// Options adjust the services for tests and the local runner.
type Options struct {
	// ParamTTL is how long parameters are cached; zero means 30s.
	ParamTTL time.Duration
	// Clock defaults to the wall clock.
	Clock engine.Clock
	Log   *slog.Logger
	// DynamoOptions and SQSOptions are applied to the SDK clients (the local
	// runner's fault injection adds middleware here).
	DynamoOptions []func(*dynamodb.Options)
	SQSOptions    []func(*sqs.Options)
	S3Options     []func(*s3.Options)
	// Resolve, when set, resolves host names from this fixed table instead
	// of DNS (see fetch.Options.Resolve): the local stack and tests give
	// loopback sites real-looking names without sending a DNS query. Never
	// set by FromEnv: a deployed function uses the system resolver.
	Resolve map[string][]netip.Addr
	// Budget bounds the check engine's host workers and the fetcher's
	// connections for the whole process (see BudgetFor); zero bounds
	// nothing but MaxConcurrentHosts per run. FromEnv sets it from the
	// function's memory.
	Budget engine.Budget
	// Metrics records the process's metrics (one Recorder per process;
	// the function's handler flushes it once per invocation); nil records
	// nothing. FromEnv writes it to stdout.
	Metrics *metrics.Recorder
}

// Services are the wired domain services of one function instance.
type Services struct {
	// Parts are what Engine, Ingester and the handlers are built from.
	Parts     Parts
	Config    config.Config
	Store     *dynamo.Store
	Publisher *sqsout.Publisher
	Params    *params.Cache
	Ingester  *hostqueue.Ingester
	Engine    *engine.Engine
	// Waker wakes check shards through the wake queue; nil when the
	// function has none (the check function itself).
	Waker *wake.Queue
	// Metrics is Options.Metrics: the handler flushes it.
	Metrics *metrics.Recorder
}

// New wires the services. It makes no network call.
func New(awsCfg aws.Config, cfg config.Config, opts Options) *Services {
	clock := opts.Clock
	if clock == nil {
		clock = engine.RealClock{}
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	ttl := opts.ParamTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	// Each client gets its own capped connection pool, so hundreds of
	// workers' calls cannot open hundreds of descriptors, unless the
	// configuration brings its own HTTP client (moto's, capped for one
	// local process); the caller's options come after and may replace it.
	var ddbOpts []func(*dynamodb.Options)
	var sqsOpts []func(*sqs.Options)
	var ssmOpts []func(*ssm.Options)
	if awsCfg.HTTPClient == nil {
		ddbOpts = append(ddbOpts, func(o *dynamodb.Options) { o.HTTPClient = sdkHTTPClient(dynamoConns) })
		sqsOpts = append(sqsOpts, func(o *sqs.Options) { o.HTTPClient = sdkHTTPClient(sqsConns) })
		ssmOpts = append(ssmOpts, func(o *ssm.Options) { o.HTTPClient = sdkHTTPClient(ssmConns) })
	}
	ddb := dynamodb.NewFromConfig(awsCfg, append(ddbOpts, opts.DynamoOptions...)...)
	sq := sqs.NewFromConfig(awsCfg, append(sqsOpts, opts.SQSOptions...)...)
	sm := ssm.NewFromConfig(awsCfg, ssmOpts...)

	rec := opts.Metrics
	store := dynamo.New(ddb, cfg.TableName, clock.Now)
	pubOpts := sqsout.Options{MaxMessageBytes: cfg.OutputMaxMessageBytes}
	if rec != nil {
		store.OnRetry = func() { rec.Add(metrics.StoreRetries, 1) }
		store.OnTakeover = func() { rec.Add(metrics.LeaseTakeovers, 1) }
		pubOpts.OnRetry = func(n int) { rec.Add(metrics.PublishRetries, float64(n)) }
	}
	sqsPub := sqsout.New(sq, cfg.OutputQueueURL, pubOpts)
	pub := &metrics.CountResults{Publisher: sqsPub, Metrics: rec}
	cache := params.NewCache(ssmparams.New(sm, cfg.ParamPath), ttl, clock.Now, log)
	gate := engine.NewGate(clock, rec)
	fetchers := &fetcherCache{addresses: cfg.Addresses, resolve: opts.Resolve, maxConns: opts.Budget.Conns, now: clock.Now, gate: gate}
	parts := Parts{
		Store: store, Idempotency: store, Publisher: pub,
		Params: cache.Get, ParamsReady: cache.WaitLoaded, Fetcher: fetchers.get, Guard: Guard(cfg.Addresses),
		ShardCount: cfg.ShardCount, Clock: clock, Log: log, Metrics: rec, Budget: opts.Budget,
		InlineLimit: InlineLimit(cfg.OutputMaxMessageBytes),
		Resolver:    resolverFor(opts.Resolve), Gate: gate,
	}
	var waker *wake.Queue
	if cfg.WakeQueueURL != "" {
		waker = &wake.Queue{Client: sq, URL: cfg.WakeQueueURL, ShardCount: cfg.ShardCount, Now: clock.Now}
		parts.Waker = waker
	}
	if cfg.BodyBucket != "" {
		s3Opts := []func(*s3.Options){}
		if awsCfg.HTTPClient == nil {
			s3Opts = append(s3Opts, func(o *s3.Options) { o.HTTPClient = sdkHTTPClient(s3Conns) })
		}
		if awsCfg.BaseEndpoint != nil {
			// A custom endpoint (moto on loopback) cannot resolve a
			// bucket's own host name: address buckets by path.
			s3Opts = append(s3Opts, func(o *s3.Options) { o.UsePathStyle = true })
		}
		s3c := s3.NewFromConfig(awsCfg, append(s3Opts, opts.S3Options...)...)
		parts.Bodies = s3body.New(s3c, cfg.BodyBucket, s3body.Options{Refresh: cfg.BodyRetention / 2, Now: clock.Now})
		if cfg.WarcOutput {
			// Every exchange into WARC segments, sealed before the results
			// that name them go out; a large body lives in its record.
			wr := s3warc.New(s3c, cfg.BodyBucket, s3warc.Options{Now: clock.Now, Info: [][2]string{{"software", "urldownloader"}}})
			fetchers.archive = wr
			parts.Publisher = &metrics.CountResults{Publisher: s3warc.Publisher{Publisher: sqsPub, Writer: wr}, Metrics: rec}
			parts.Bodies = s3warc.Bodies{}
		}
	}
	eng := parts.Engine()
	if cfg.WarcOutput && opts.Budget.Memory > 0 {
		// The WARC spools must fit in the function's /tmp: a MaxBodyBytes
		// too large for as many workers as its memory runs is refused.
		// Only a function's budget has memory (BudgetFor); one process
		// standing in for a fleet (the emulated pipeline) spools to the
		// machine's disk.
		cache.LimitSpool(int64(cfg.EphemeralStorageMB)<<20, eng.WorkerLimit)
	}
	return &Services{
		Parts:     parts,
		Waker:     waker,
		Config:    cfg,
		Store:     store,
		Publisher: sqsPub,
		Metrics:   rec,
		Params:    cache,
		Ingester:  parts.Ingester(),
		Engine:    eng,
	}
}

// IngestHandler is the ingest function's handler on these services.
func (s *Services) IngestHandler() *ingesthandler.Handler {
	return s.Parts.IngestHandler(s.Ingester)
}

// CheckHandler is the check function's handler on these services, for
// runs that start requests for run. A FetchTimeout that leaves no room in
// such a run is refused like any bad parameter value, so no run sits idle
// on it.
func (s *Services) CheckHandler(run time.Duration) *checkhandler.Handler {
	s.Params.LimitFetchTimeout(engine.FetchTimeoutLimit(checkhandler.RunWindow(run)))
	return s.Parts.CheckHandler(s.Engine, run)
}

// envelopeBytes is what a result's message keeps for its fields besides
// the body: the URL (at most 2048 bytes), a redirect's location, the
// validators, an error message, and the JSON around them.
const envelopeBytes = 16 << 10

// InlineLimit is the largest body a result carries inline in a message of
// maxMessage bytes; a larger one goes to the body bucket (or, without one,
// is cut to fit).
func InlineLimit(maxMessage int) int64 {
	if maxMessage <= 0 {
		maxMessage = sqsout.DefaultMaxMessageBytes
	}
	return int64(max(maxMessage-envelopeBytes, 1<<10))
}

// FromEnv wires the services of a deployed function from its environment:
// config.FromEnv, the JSON logger that configuration asks for, and the AWS
// configuration Lambda provides. It makes no network call. The logger is
// never nil, so the caller can log the error and exit: it is slog.Default
// when the function environment itself is bad.
func FromEnv(ctx context.Context) (*Services, *slog.Logger, error) {
	cfg, err := config.FromEnv(nil)
	if err != nil {
		return nil, slog.Default(), err
	}
	log := Logger(os.Stdout, os.Getenv)
	awsCfg, err := awsFromEnv(nil)
	if err != nil {
		return nil, log, fmt.Errorf("AWS configuration from the function environment: %w", err)
	}
	mib := memoryMiB(os.Getenv)
	limit := LimitMemory(os.Getenv)
	budget := BudgetFor(mib)
	log.Info("resources", "memoryMiB", mib, "gomemlimit", limit, "workerMemory", budget.Memory, "fetchConns", budget.Conns)
	rec := metrics.New(os.Stdout, Stage(cfg.ParamPath, os.Getenv), nil, map[string]string{"function": os.Getenv("AWS_LAMBDA_FUNCTION_NAME")})
	return New(awsCfg, cfg, Options{Log: log, Budget: budget, Metrics: rec}), log, nil
}

// Stage is the deployment's stage, the metrics' Stage dimension: STAGE
// when set, else read from the parameter path the template gives every
// function ("/urldownloader/<Stage>/").
func Stage(paramPath string, getenv func(string) string) string {
	if s := getenv("STAGE"); s != "" {
		return s
	}
	parts := strings.Split(strings.Trim(paramPath, "/"), "/")
	if len(parts) == 2 && parts[0] == "urldownloader" {
		return parts[1]
	}
	return ""
}

// fetcherCache keeps one fetcher (and so one pool of kept-alive connections)
// for as long as the parameters that shape it do not change.
type fetcherCache struct {
	// addresses is the deployment's address policy (config.Config.Addresses).
	addresses fetch.AddressPolicy
	// resolve is fixed for the life of the services, so it is not part of
	// the cache key; fetch.New copies it into every fetcher.
	resolve  map[string][]netip.Addr
	maxConns int
	now      func() time.Time
	archive  fetch.Archive // WARC output, nil without
	gate     *server.Gate  // the process's, every fetcher's

	mu  sync.Mutex
	key fetch.Options
	f   *fetch.Fetcher
}

func (c *fetcherCache) get(p params.Params) engine.Fetcher {
	opts := FetchOptions(p, c.addresses, c.resolve, c.maxConns)
	opts.Archive = c.archive
	opts.Gate = engine.FetchGate(c.gate)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil || !sameOptions(c.key, opts) {
		if old := c.f; old != nil {
			// Its requests in flight end within its timeout; their
			// connections then wait idle in a pool nobody uses: close
			// them too, or they hold descriptors for IdleConnTimeout.
			old.CloseIdleConnections()
			time.AfterFunc(c.key.Timeout+time.Second, old.CloseIdleConnections)
		}
		c.f, c.key = fetch.New(opts, c.now), opts
	}
	return c.f
}

func sameOptions(a, b fetch.Options) bool {
	return a.UserAgent == b.UserAgent && a.Timeout == b.Timeout && a.MaxBodyBytes == b.MaxBodyBytes &&
		a.Addresses.Equal(b.Addresses) && a.AllowPrivate == b.AllowPrivate && slices.Equal(a.AllowedPorts, b.AllowedPorts) && a.MaxConns == b.MaxConns
}

// resolverFor is the resolver ingest places hosts with: the one the
// fetchers dial through, a fixed table (Options.Resolve) or the process's
// DNS cache.
func resolverFor(table map[string][]netip.Addr) ingesthandler.Resolver {
	if table == nil {
		return fetch.DefaultDNSCache()
	}
	t := make(tableResolver, len(table))
	for name, addrs := range table {
		t[strings.ToLower(strings.TrimSuffix(name, "."))] = slices.Clone(addrs)
	}
	return t
}

// tableResolver answers from a fixed table, as fetch.Options.Resolve does
// for the fetchers: a name it lacks does not exist.
type tableResolver map[string][]netip.Addr

// Lookup implements ingesthandler.Resolver.
func (t tableResolver) Lookup(_ context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if addrs := t[strings.ToLower(strings.TrimSuffix(host, "."))]; len(addrs) > 0 {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
