package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/billing"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/s3warc"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// The whole-bodies benchmark (`-only bodies`): bodies of one size per run,
// each URL its own body (no two alike: deduplication would only lower the
// figures), fetched through the real check function on moto with the
// template's bucket and output queue. It measures the process's peak heap,
// the bytes fetched and kept per second, and what AWS would bill per
// million URLs for the bodies: the output queue's 64 KB chunks, the
// bucket's requests and storage, and a consumer's reads.

// BodySize is one row: Size-byte bodies, URLs of them over Hosts hosts.
type BodySize struct {
	Name        string
	Size        int64
	URLs, Hosts int
}

// FullBodies are the sizes of the issue: 1 KB, 100 KB, 1 MB and 50 MB.
func FullBodies() []BodySize {
	return []BodySize{
		{"1 KB", 1_000, 400, 40},
		{"100 KB", 100_000, 200, 40},
		{"1 MB", 1_000_000, 60, 20},
		{"50 MB", 50_000_000, 4, 2},
	}
}

// S3 list prices, us-east-1, S3 Standard.
const (
	priceS3Put     = 0.005 / 1000 // $ per PUT, COPY, POST, LIST request
	priceS3Get     = 0.0004 / 1000
	priceS3GBMonth = 0.023
	// bodyRetention is the template's BodyRetentionDays: how long the
	// bucket keeps a body, so what it is billed for.
	bodyRetentionDays = 14
)

// BodiesResult is one size's run.
type BodiesResult struct {
	BodySize
	Wall time.Duration
	// Stored and Inline count the fetched results by how they carry
	// their body; StoredBytes are the bytes of distinct stored objects.
	Stored, Inline int
	StoredBytes    int64
	BodyBytes      int64
	// PeakLive is the process's most live heap (after a collection's
	// mark); PeakHeap its most heap in objects, garbage included; BaseLive
	// the live heap just before the run, which earlier parts of a full
	// benchmark (moto clients, pipelines, caches) leave behind.
	PeakLive, PeakHeap, BaseLive uint64
	S3                           []billing.S3Line
	// Warc is set when the run kept its exchanges as WARC records
	// (WarcOutput): a stored body is then in its response record, read by
	// one ranged GET, not an object of its own. WarcBytes are the
	// segments' bytes in the bucket (robots.txt and request records
	// included), Segments their number.
	Warc      bool
	WarcBytes int64
	Segments  int
	// SendChunks and ReceiveChunks are the output queue's billed 64 KB
	// chunks: sent by the check function, received by the consumer (the
	// pipeline's collector); Deletes its delete requests.
	SendChunks, ReceiveChunks, Deletes int
}

func (r *BodiesResult) perURL(n float64) float64 { return n / float64(r.URLs) * 1e6 }

// Dollars per million URLs, by part.
func (r *BodiesResult) sqsSend() float64 { return r.perURL(float64(r.SendChunks)) * priceSQS }
func (r *BodiesResult) s3Requests(class string) float64 {
	n := 0
	for _, l := range r.S3 {
		if l.Class == class {
			n += l.Requests
		}
	}
	price := priceS3Get
	if class == billing.S3ClassPut {
		price = priceS3Put
	}
	return r.perURL(float64(n)) * price
}
func (r *BodiesResult) storage() float64 {
	return r.perURL(float64(r.StoredBytes+r.WarcBytes)/1e9) * priceS3GBMonth * bodyRetentionDays / 30
}

// consumer is what reading the results costs: receiving the chunks,
// deleting the messages, and a GET per stored body.
func (r *BodiesResult) consumer() float64 {
	return r.perURL(float64(r.ReceiveChunks+r.Deletes)) * priceSQS
}
func (r *BodiesResult) consumerGets() float64 { return r.perURL(float64(r.Stored)) * priceS3Get }

func (r *BodiesResult) total() float64 {
	return r.sqsSend() + r.s3Requests(billing.S3ClassPut) + r.s3Requests(billing.S3ClassGet) + r.storage() + r.consumer() + r.consumerGets()
}

// bodies runs every size.
func (e *benchEnv) bodies(ctx context.Context, sizes []BodySize) ([]*BodiesResult, error) {
	var out []*BodiesResult
	for _, sz := range sizes {
		r, err := e.bodiesRun(ctx, sz, false)
		if err != nil {
			return out, fmt.Errorf("bodies %s: %w", sz.Name, err)
		}
		e.log.Info("bodies", "size", sz.Name, "urls", sz.URLs, "wall", r.Wall, "peakLiveMiB", r.PeakLive>>20, "stored", r.Stored)
		out = append(out, r)
	}
	return out, nil
}

// bodiesRun is one size's run, with WarcOutput on when warc is set.
func (e *benchEnv) bodiesRun(ctx context.Context, sz BodySize, warc bool) (*BodiesResult, error) {
	site, err := e.site(sz.Hosts, "")
	if err != nil {
		return nil, err
	}
	defer site.Close()
	s3c, sqsc := billing.NewS3Counter(), billing.NewSQSCounter(nil)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	p, err := emulated.Start(ctx, emulated.Options{
		Endpoint: e.moto.Endpoint, Prefix: fmt.Sprintf("bodies%d-%d", sz.Size, e.seq.Add(1)), Addresses: fetch.PrivatePolicy(),
		// Throughput, not politeness, is measured here: no delay.
		Params: map[string]string{
			"FetchDelay": "0s", "MaxBodyBytes": fmt.Sprint(max(sz.Size, params.Defaults().MaxBodyBytes)),
			"FetchTimeout": "60s", "CheckHostPeriod": "2s",
		},
		TemplateParams: map[string]string{"WarcOutput": strconv.FormatBool(warc)},
		CheckRun:       2 * time.Minute,
		S3Options:      []func(*s3.Options){s3c.Option},
		SQSOptions:     []func(*sqs.Options){sqsc.Option},
		Log:            e.log,
	})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	sqsc.Name(p.Stack.OutputQueueURL, "output")
	var items []urlmsg.Input
	hosts := site.Hosts()
	for i := range sz.URLs {
		items = append(items, urlmsg.Input{URL: demosite.LargeURL(hosts[i%len(hosts)], sz.Size, uint64(i+1))})
	}
	sent, err := p.Send(ctx, items)
	if err != nil {
		return nil, err
	}
	res := &BodiesResult{BodySize: sz, Warc: warc}
	var mu sync.Mutex
	objects := map[string]int64{}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	var peakLive, peakHeap atomic.Uint64
	runtime.GC()
	base := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(base)
	res.BaseLive = base[0].Value.Uint64()
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			peakLive.Store(max(peakLive.Load(), s[0].Value.Uint64()))
			peakHeap.Store(max(peakHeap.Load(), s[1].Value.Uint64()))
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	rep, err := p.Run(ctx, sent.Expected, func(r result.Result, _ []byte) {
		mu.Lock()
		defer mu.Unlock()
		if r.Status != result.StatusFetched {
			return
		}
		res.BodyBytes += r.Bytes
		if r.Body == nil {
			res.Inline++
			return
		}
		res.Stored++
		if r.Body.Key != "" { // else in its WARC record
			objects[r.Body.Key] = r.Body.Bytes
		}
	})
	res.Wall = time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		return nil, fmt.Errorf("run: %w (report %+v)", err, rep)
	}
	if f := rep.ByStatus[result.StatusFetched]; f != sz.URLs {
		return nil, fmt.Errorf("%d of %d fetched: %+v", f, sz.URLs, rep.ByStatus)
	}
	for _, n := range objects {
		res.StoredBytes += n
	}
	res.PeakLive, res.PeakHeap = peakLive.Load(), peakHeap.Load()
	res.S3 = s3c.Lines()
	for _, l := range sqsc.Lines() {
		if l.Queue != "output" {
			continue
		}
		switch l.Op {
		case "SendMessageBatch", "SendMessage":
			res.SendChunks += l.Billed
		case "ReceiveMessage":
			res.ReceiveChunks += l.Billed
		case "DeleteMessageBatch", "DeleteMessage":
			res.Deletes += l.Requests
		}
	}
	// The bucket holds exactly the stored bodies and, with WARC output,
	// the sealed segments: nothing half-written.
	list := s3.NewListObjectsV2Paginator(stack.NewS3(p.AWS), &s3.ListObjectsV2Input{Bucket: &p.Stack.BodyBucket})
	for list.HasMorePages() {
		out, err := list.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range out.Contents {
			switch key := aws.ToString(o.Key); {
			case strings.HasPrefix(key, body.KeyPrefix):
			case warc && strings.HasPrefix(key, s3warc.Prefix):
				res.WarcBytes += aws.ToInt64(o.Size)
				res.Segments++
			default:
				return nil, fmt.Errorf("bucket holds %s after the run", key)
			}
		}
	}
	if warc && res.Segments == 0 {
		return nil, fmt.Errorf("WarcOutput on and no segment in the bucket")
	}
	return res, nil
}

// bodiesTable is the section `-only bodies` writes.
func bodiesTable(rs []*BodiesResult) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("Each size is its own run on moto: the real ingest and check handlers, the template's bucket and output queue (256 KiB messages, `InlineBodyBytes` %d), `MaxBodyBytes` at least the body, `FetchDelay` 0 (throughput, not politeness, is measured), each URL a distinct body of pseudo-random bytes (binary: inline as base64) from a loopback site. *bytes/s* are body bytes fetched and kept (inline, or streamed to S3 on moto) per second of wall time from sending the URLs to the last result. *peak live heap* is the most the process running the check function (with the pipeline's collector and ingest) held live after a collection; *peak heap* counts garbage not yet collected too; *before* is the live heap just before the run, which earlier sizes and parts of a full run (moto clients, pipelines, caches) leave behind. The live figure is read at collections only, so a run that triggers few of them shows little above *before*. Dollars per million URLs at us-east-1 list prices, for the bodies only (the per-URL DynamoDB and SQS costs of the cost section come on top): the output queue's billed 64 KB chunks as sent ($0.40 per million), S3 PUT-class requests (PUT, multipart create/part/complete, COPY: $0.005 per 1,000) and GET-class (HEAD: $0.0004 per 1,000), storage of the distinct bodies for %d days ($0.023 per GB-month), and a consumer's reading: receiving the chunks and deleting, plus one GET per stored body.\n\n",
		params.DefaultInlineBodyBytes, bodyRetentionDays)
	w("| body | URLs / hosts | inline / stored | wall | bytes/s | peak live heap / peak heap (before) | SQS chunks sent per URL | S3 requests per URL (put-class / get-class) | $/M: SQS send | $/M: S3 requests | $/M: S3 storage %dd | $/M: consumer reads | **$/M total** |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", bodyRetentionDays)
	for _, r := range rs {
		n := float64(r.URLs)
		put, get := 0, 0
		for _, l := range r.S3 {
			switch l.Class {
			case billing.S3ClassPut:
				put += l.Requests
			case billing.S3ClassGet:
				get += l.Requests
			}
		}
		w("| %s | %d / %d | %d / %d | %s | %s | %.1f / %.1f MiB (%.1f) | %.2f | %.2f / %.2f | %.2f | %.2f | %.2f | %.2f | **%.2f** |\n",
			r.Name, r.URLs, r.Hosts, r.Inline, r.Stored, secs(r.Wall), rate(float64(r.BodyBytes)/r.Wall.Seconds()),
			float64(r.PeakLive)/(1<<20), float64(r.PeakHeap)/(1<<20), float64(r.BaseLive)/(1<<20), float64(r.SendChunks)/n,
			float64(put)/n, float64(get)/n, r.sqsSend(), r.s3Requests(billing.S3ClassPut)+r.s3Requests(billing.S3ClassGet),
			r.storage(), r.consumer()+r.consumerGets(), r.total())
	}
	w("\n")
	return b.String()
}

func rate(bps float64) string {
	switch {
	case bps >= 1e6:
		return fmt.Sprintf("%.1f MB/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.0f KB/s", bps/1e3)
	}
	return fmt.Sprintf("%.0f B/s", bps)
}

var bodiesSection = ownSection{part: "bodies", name: "bodies", heading: "Whole bodies"}

// writeBodies replaces the bodies section of the markdown file at path
// (appending it when missing).
func writeBodies(path string, rs []*BodiesResult, m Machine) error {
	return bodiesSection.write(path, m.runLine(true), bodiesTable(rs))
}
