// Package metrics holds the downloader's operational metrics: their names,
// units and how each is aggregated, and a Recorder that writes them as
// CloudWatch Embedded Metric Format (EMF) documents, one JSON line each, to
// the function's standard output. CloudWatch Logs extracts the metrics from
// those lines: no API call, no agent, nothing to pay per request, and the
// numbers sit in the same log stream as the lines that explain them.
//
// No AWS library writes EMF for Go, so this is a small writer of our own,
// tested against the specification's required shape (Validate, which Parse
// applies to every document it reads back).
//
// Every metric carries the Stage dimension and nothing finer per host: a
// dimension value is a metric of its own to CloudWatch, billed monthly, so
// the only other dimensions are small closed sets (a result's Status, a
// check Shard), and a Recorder folds any value past a small cap into
// "other".
package metrics

// Namespace is the CloudWatch namespace of every metric here; the
// template's dashboard and alarms read the same one.
const Namespace = "urldownloader"

// Unit is a CloudWatch metric unit.
type Unit string

// The units the metrics here use (CloudWatch knows more; Validate accepts
// all of them).
const (
	Count        Unit = "Count"
	Bytes        Unit = "Bytes"
	Milliseconds Unit = "Milliseconds"
)

// Kind says how a Recorder aggregates a metric's values between flushes.
type Kind int

const (
	// Sum adds the values up: one number per document (counters).
	Sum Kind = iota
	// Distribution keeps every value, written as arrays of at most 100
	// per document, so CloudWatch computes percentiles over all of them
	// (latencies, waits).
	Distribution
	// Gauge keeps the last value set (a sampled level such as a backlog).
	Gauge
)

// Metric is one metric's name, unit and aggregation.
type Metric struct {
	Name string
	Unit Unit
	Kind Kind
}

// The dimension names. Stage is on every document; the others are added
// per value by Recorder.AddBy and must hold small closed sets.
const (
	DimStage  = "Stage"
	DimStatus = "Status"
	DimShard  = "Shard"
)

// The metrics. Where each is emitted is part of its meaning: a count made
// in two places would be counted twice.
var (
	// URLsAccepted counts URLs ingest accepted: queued, or answered at
	// once with a denied result. Each ends in one result.
	URLsAccepted = Metric{"URLsAccepted", Count, Sum}
	// URLsRejected counts input items refused as invalid (no result: the
	// producer is told, or the record goes to the dead-letter queue).
	URLsRejected = Metric{"URLsRejected", Count, Sum}
	// URLsEvicted counts queued URLs evicted beyond PersistLimit (each
	// ends as a dropped result).
	URLsEvicted = Metric{"URLsEvicted", Count, Sum}
	// Results counts results published to the output queue, by DimStatus.
	Results = Metric{"Results", Count, Sum}
	// Requests counts HTTP requests sent, robots.txt included.
	Requests = Metric{"Requests", Count, Sum}
	// BytesFetched counts response body bytes read.
	BytesFetched = Metric{"BytesFetched", Bytes, Sum}
	// PolitenessWait is how long a ready URL waited for its host's delay
	// (the time between its host becoming workable and its request).
	PolitenessWait = Metric{"PolitenessWait", Milliseconds, Distribution}
	// ServerWait is how long a request waited at its server address's gate
	// (ServerDelay, ServerConnections), one value per request that waited:
	// its sample count is the gate waits, its sum their time.
	ServerWait = Metric{"ServerWait", Milliseconds, Distribution}
	// RefreshLag is how late a refreshing URL was fetched: the fetch's
	// time minus its due time (docs/refresh.md), one value per refetch.
	// Rising: the host is slower than its URLs' intervals, or the runs
	// fall behind.
	RefreshLag = Metric{"RefreshLag", Milliseconds, Distribution}
	// FetchLatency is one request's time, from sending to the body's end.
	FetchLatency = Metric{"FetchLatency", Milliseconds, Distribution}
	// RobotsDenials counts URLs denied by robots.txt rules.
	RobotsDenials = Metric{"RobotsDenials", Count, Sum}
	// GiveUps counts hosts whose queue was ended after GiveUpAfter
	// without a usable answer.
	GiveUps = Metric{"GiveUps", Count, Sum}
	// HostsWorked counts hosts a check run worked on (each once per run).
	HostsWorked = Metric{"HostsWorked", Count, Sum}
	// LeaseTakeovers counts virtual shards a run took over from another
	// owner's expired lease (its run died or overran), as the DynamoDB
	// store tells them (dynamo.Store.OnTakeover; local mode counts none).
	LeaseTakeovers = Metric{"LeaseTakeovers", Count, Sum}
	// PublishRetries counts result messages sent again after SQS failed
	// them.
	PublishRetries = Metric{"PublishRetries", Count, Sum}
	// StoreRetries counts store writes attempted again (a conflicting
	// concurrent write, or an answer lost and judged): the DynamoDB
	// store's Append and Commit attempts after the first (the SDK's own
	// retries of one request are not counted).
	StoreRetries = Metric{"StoreRetries", Count, Sum}
	// URLsPending is the backlog a check run saw in its shard, by
	// DimShard: sampled once at the end of each run, the URLs still
	// queued, as last read, in the hosts it worked (hosts not due are not
	// read, so it is a lower bound; one that grows run after run means
	// the shard falls behind).
	URLsPending = Metric{"URLsPending", Count, Gauge}
)

// All lists every metric, in the order of the declarations above.
func All() []Metric {
	return []Metric{
		URLsAccepted, URLsRejected, URLsEvicted, Results, Requests, BytesFetched,
		PolitenessWait, ServerWait, RefreshLag, FetchLatency, RobotsDenials, GiveUps, HostsWorked,
		LeaseTakeovers, PublishRetries, StoreRetries, URLsPending,
	}
}

// Lookup returns the metric of that name.
func Lookup(name string) (Metric, bool) {
	for _, m := range All() {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}
