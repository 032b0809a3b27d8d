// Package params holds the downloader's runtime parameters: the knobs an
// operator retunes live (delays, limits, robots policy) without a redeploy.
//
// It defines their names, defaults, bounds and string forms (Parse, Format),
// and a Cache that re-reads them through a Loader with a short TTL and keeps
// the last good values when the source fails or holds a bad value. It imports
// no AWS code: the SSM Parameter Store loader lives in shared/aws/ssmparams, so
// the rules here are tested without any emulator.
package params

import (
	"strconv"
	"strings"
	"time"
)

// QueueMode selects what one politeness queue covers: requests to one queue
// are spaced by FetchDelay and never run in parallel.
type QueueMode string

// The queue modes (StormCrawler's fetcher.queue.mode byHost and byDomain).
const (
	// QueueByHost gives every host name its own queue: a.example.com and
	// b.example.com are paced independently.
	QueueByHost QueueMode = "host"
	// QueueByDomain shares one queue among the hosts of one registered
	// domain, for sites that serve many subdomains from the same machines.
	QueueByDomain QueueMode = "domain"
)

// BodyEncoding selects how a result carries a body inline
// (ResultBodyEncoding); package result applies it (result.Pack).
type BodyEncoding string

// The body encodings.
const (
	// BodyPlain carries UTF-8 text as it is and anything else as base64:
	// readable without a decoder, and what results carried before the
	// parameter existed.
	BodyPlain BodyEncoding = "plain"
	// BodyGzip carries a body gzip-compressed, then base64 (encoding
	// "gzip+base64"), when that is shorter than plain: web pages keep
	// 0.30 of their size, base64 included, so a result costs fewer of the
	// output queue's 64 KB request chunks and more bodies fit inline.
	BodyGzip BodyEncoding = "gzip"
)

// Params are the runtime parameters in force for one run of a function.
// A zero Params is not valid: start from Defaults, Parse or a Cache.
type Params struct {
	// CheckHostPeriod is how often a host with queued URLs is checked
	// (YT Flow's CheckHostPeriod); above 1s so timers cannot spin.
	CheckHostPeriod time.Duration
	// PersistLimit caps the URLs kept per host; the oldest are evicted and
	// reported as dropped (YT Flow's PersistLimit).
	PersistLimit int
	// FetchDelay is the pause between two requests to one queue.
	FetchDelay time.Duration
	// FetchTimeout bounds one request, headers and body included.
	FetchTimeout time.Duration
	// MaxBodyBytes caps the body kept per result; longer bodies are truncated.
	MaxBodyBytes int64
	// InlineBodyBytes is the largest body a result carries in its data
	// field (as sent: base64 counts 4/3); a larger one goes to the body
	// store and the result points at it (the claim-check pattern).
	InlineBodyBytes int64
	// ResultBodyEncoding is how an inline body is carried: plain (text as
	// it is, else base64) or gzip (compressed, then base64, when shorter).
	// InlineBodyBytes counts the bytes as sent either way.
	ResultBodyEncoding BodyEncoding
	// MaxConcurrentHosts caps the hosts one check invocation fetches from at
	// the same time (one request per host at a time in any case).
	MaxConcurrentHosts int
	// UserAgent is sent with every request, robots.txt included, and is the
	// agent name matched against robots.txt groups.
	UserAgent string
	// RespectRobots makes the fetcher obey robots.txt rules and Crawl-delay.
	RespectRobots bool
	// RobotsTTL is how long a fetched robots.txt is trusted.
	RobotsTTL time.Duration
	// MaxCrawlDelay is the longest robots.txt Crawl-delay honoured (at most
	// a day); a host asking for more gets its URLs denied. A host with a
	// long delay holds no worker while it waits: it is due again when its
	// delay has passed.
	MaxCrawlDelay time.Duration
	// DelayFactor stretches the delay after a slow response: the next
	// request waits at least DelayFactor x how long the last response took
	// (capped by MaxDelay).
	DelayFactor float64
	// MaxDelay caps the delays the downloader learns by itself (from slow
	// responses, from rate limits); FetchDelay and Crawl-delay are not capped.
	MaxDelay time.Duration
	// MaxBackoff caps the exponential back-off after repeated errors on
	// one host. A server's Retry-After is honoured up to 24h, or up to
	// MaxBackoff when that is longer.
	MaxBackoff time.Duration
	// MaxAttempts is how many times one URL is tried before its error is final.
	MaxAttempts int
	// FollowCrossHostRedirects enqueues a redirect to another host on that
	// host's queue; when false it is reported as a redirect result only.
	FollowCrossHostRedirects bool
	// RandomizeDelay spreads FetchDelay over 0.5x..1.5x (as Scrapy does) so
	// request times do not form a fingerprintable beat.
	RandomizeDelay bool
	// QueueMode selects whether politeness is per host or per domain.
	QueueMode QueueMode
	// AllowedPorts lists the destination ports requests may use, comma
	// separated ("80,443"); others end as denied. It is ignored where the
	// deployment allows private networks (local testing).
	AllowedPorts string
	// GiveUpAfter bounds how long a host may go without a usable answer
	// (connection errors, timeouts, robots.txt unreachable, 5xx, 429, a
	// Retry-After beyond it): counted from its first failure, reset by a
	// usable answer; past it every URL queued for the host ends at once.
	GiveUpAfter time.Duration
	// ServerDelay is the least time between two requests to one server
	// address, whatever host names they carry: from the start of one to
	// the start of the next, and from the end of one to the start of the
	// next (0 turns the gate off).
	ServerDelay time.Duration
	// ServerConnections is the most requests in flight to one address; a
	// host rule's connections never get past it (the stricter wins).
	ServerConnections int
	// ServerExempt are address ranges paced per host only (CDNs front
	// unrelated sites at one address): see ExemptPrefixes, ServerFor.
	ServerExempt Exempt
	// MinRefresh and MaxRefresh bound a refreshing URL's interval (its
	// input's refresh, and where an adaptive one may go); an item outside
	// them is refused (docs/refresh.md).
	MinRefresh time.Duration
	MaxRefresh time.Duration
	// MaxRefreshPerHost caps the refreshing URLs one host may hold; they
	// are apart from PersistLimit and never evicted, so one more is
	// refused. 0 turns refresh off.
	MaxRefreshPerHost int
	// HostRules are per-host settings (delay, maximum delay, connections)
	// that override the parameters for the hosts they match; the first
	// matching rule applies (see ParseHostRules).
	HostRules HostRules
}

// Ports returns AllowedPorts as numbers (valid Params only).
func (p Params) Ports() []int {
	var out []int
	for _, f := range strings.Split(p.AllowedPorts, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// The parameter names: the keys of Parse and Format, and the last part of
// the SSM parameter names under the stage path (for example
// /urldownloader/dev/CheckHostPeriod). They are spelt like the Go fields so
// an operator can map one to the other without a table.
const (
	NameCheckHostPeriod          = "CheckHostPeriod"
	NamePersistLimit             = "PersistLimit"
	NameFetchDelay               = "FetchDelay"
	NameFetchTimeout             = "FetchTimeout"
	NameMaxBodyBytes             = "MaxBodyBytes"
	NameInlineBodyBytes          = "InlineBodyBytes"
	NameResultBodyEncoding       = "ResultBodyEncoding"
	NameMaxConcurrentHosts       = "MaxConcurrentHosts"
	NameUserAgent                = "UserAgent"
	NameRespectRobots            = "RespectRobots"
	NameRobotsTTL                = "RobotsTTL"
	NameMaxCrawlDelay            = "MaxCrawlDelay"
	NameDelayFactor              = "DelayFactor"
	NameMaxDelay                 = "MaxDelay"
	NameMaxBackoff               = "MaxBackoff"
	NameMaxAttempts              = "MaxAttempts"
	NameFollowCrossHostRedirects = "FollowCrossHostRedirects"
	NameRandomizeDelay           = "RandomizeDelay"
	NameQueueMode                = "QueueMode"
	NameAllowedPorts             = "AllowedPorts"
	NameGiveUpAfter              = "GiveUpAfter"
	NameServerDelay              = "ServerDelay"
	NameServerConnections        = "ServerConnections"
	NameServerExempt             = "ServerExempt"
	NameMinRefresh               = "MinRefresh"
	NameMaxRefresh               = "MaxRefresh"
	NameMaxRefreshPerHost        = "MaxRefreshPerHost"
	NameHostRules                = "HostRules"
)

// MaxMaxCrawlDelay caps MaxCrawlDelay at a day (StormCrawler with
// URLFrontier paces up to 86,400 s); a robots.txt asking for more is over
// the cap, whatever MaxCrawlDelay is.
const MaxMaxCrawlDelay = 24 * time.Hour

// DefaultDelayFactor is 2: after a response that took t the host rests
// at least 2t, so one connection keeps a slow server busy at most a third
// of the time. AutoThrottle's 1 (delay = latency) lets it be busy half the
// time, and the promise is to be stricter than the peers; Heritrix's 5
// (with its 3 s floor and 30 s cap) costs a slow host's queue five times
// its own response time for no further gain when FetchDelay already
// spaces quick answers.
const DefaultDelayFactor = 2

// MaxDelayFactor bounds DelayFactor: beyond it a slow answer would park a
// host for minutes per request.
const MaxDelayFactor = 20

// DefaultUserAgent names the project and where to read about it, so a site
// operator who sees it in a log can find out who is calling.
const DefaultUserAgent = "urldownloader/1.0 (+https://github.com/urldownloader/urldownloader)"

// DefaultInlineBodyBytes is 240 KiB: the largest body whose result still
// fits the output queue's default 256 KiB message with 16 KiB left for the
// rest of the result. Cost does not set it lower: a body inline costs a
// queue request per 64 KiB it spans, sent and received ($0.80 per million
// per chunk), while a stored one costs an S3 PUT ($5 per million), a
// HEAD and the consumer's GET ($0.40 each), and storage; so inline is the
// cheaper up to the message limit (see docs/messages.md, Large bodies).
const DefaultInlineBodyBytes = 240 << 10

// DefaultMaxBodyBytes is 10 MiB, Colly's MaxBodySize (and the fetcher's own
// default, fetch.DefaultMaxBodyBytes): well above InlineBodyBytes, so out of
// the box a page, a feed, a PDF or an image comes back whole rather than cut,
// as a downloader's users expect, while a body that never ends still stops
// at a size one FetchTimeout (10s, Colly's too) can carry at 8 Mbit/s and
// that costs cents per thousand to keep (docs/benchmarks.md, Whole bodies).
// It costs the check function no workers beyond the inline limit: a body
// above InlineBodyBytes streams to the body bucket (one S3 object, or a
// WARC record with WarcOutput) through a shared buffer, so a worker is
// budgeted at InlineBodyBytes (198 workers at 512 MiB).
const DefaultMaxBodyBytes = 10 << 20

// Defaults returns the parameters used when none is set: the values of the
// reference systems (YT Flow, StormCrawler, Scrapy), chosen to be polite.
func Defaults() Params {
	return Params{
		CheckHostPeriod:          5 * time.Second,
		PersistLimit:             1000,
		FetchDelay:               time.Second,
		FetchTimeout:             10 * time.Second,
		MaxBodyBytes:             DefaultMaxBodyBytes,
		InlineBodyBytes:          DefaultInlineBodyBytes,
		ResultBodyEncoding:       BodyPlain,
		MaxConcurrentHosts:       256,
		UserAgent:                DefaultUserAgent,
		RespectRobots:            true,
		RobotsTTL:                6 * time.Hour,
		MaxCrawlDelay:            MaxMaxCrawlDelay,
		DelayFactor:              DefaultDelayFactor,
		MaxDelay:                 time.Minute,
		MaxBackoff:               10 * time.Minute,
		MaxAttempts:              3,
		FollowCrossHostRedirects: true,
		RandomizeDelay:           false,
		QueueMode:                QueueByHost,
		AllowedPorts:             "80,443",
		GiveUpAfter:              time.Hour,
		ServerDelay:              DefaultServerDelay,
		ServerConnections:        DefaultServerConnections,
		ServerExempt:             defaultExempt(),
		MinRefresh:               time.Minute,
		MaxRefresh:               7 * 24 * time.Hour,
		MaxRefreshPerHost:        100,
	}
}

// Names lists every parameter name in a fixed order, the order of the Params
// fields, so seeding, docs and error lists come out the same every time.
func Names() []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return names
}

// Format returns the canonical string form of every parameter, which Parse
// reads back to the same Params: durations in their largest exact unit
// ("5s", "10m", "6h", "1500ms"), numbers in decimal, bools as true/false.
func (p Params) Format() map[string]string {
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		out[f.name] = f.format(&p)
	}
	return out
}

// Validate reports every field out of its bounds and every broken rule
// between fields, in one *InvalidError; nil means p is safe to run with.
// Params from Defaults, Parse and Cache.Get always pass.
func (p Params) Validate() error {
	var bad []FieldError
	for _, f := range fields {
		if err := f.check(&p); err != nil {
			bad = append(bad, FieldError{Name: f.name, Value: f.format(&p), Reason: err.Error()})
		}
	}
	for _, r := range rules {
		if err := r.check(&p); err != nil {
			bad = append(bad, r.fieldError(&p, err))
		}
	}
	if len(bad) > 0 {
		return &InvalidError{Fields: bad}
	}
	return nil
}

// defaultExempt is ServerExempt's default: the published CDN ranges.
func defaultExempt() Exempt {
	e, err := ParseExempt(ServerExemptCDN)
	if err != nil {
		panic(err) // the built-in list is checked by the tests
	}
	return e
}
