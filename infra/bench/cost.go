package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/billing"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/zipf"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// CostResult is one billing scenario, from the first ingest to the last
// result.
type CostResult struct {
	Name, Shape  string
	URLs, Hosts  int
	Delay        time.Duration
	Wall         time.Duration
	Usage        billing.Usage
	SQS          []billing.SQSLine
	Results      map[string]int
	IngestCalls  int
	CheckInvokes int
	// WakeInvokes are the check invocations the wake queue made.
	WakeInvokes int
	Duplicates  int
	Store       StoreCalls
	// SideReads are the meter's own reads (not billed to the downloader).
	SideReads int
}

// kindOf names the store's item kinds (see shared/aws/dynamo/layout.go).
func kindOf(_ string, key map[string]types.AttributeValue) string {
	pk, _ := key["pk"].(*types.AttributeValueMemberS)
	sk, _ := key["sk"].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return "?"
	}
	switch {
	case strings.HasPrefix(pk.Value, "s#"):
		return "lease"
	case sk.Value == "h":
		return "host"
	case strings.HasPrefix(sk.Value, "c#"):
		return "chunk"
	case strings.HasPrefix(sk.Value, "r#"):
		return "robots"
	case strings.HasPrefix(sk.Value, "f#"):
		// Refreshing URLs (shared/aws/dynamo/refresh.go).
		return "refresh"
	case strings.HasPrefix(pk.Value, "d#") && strings.Contains(sk.Value, "#b#"):
		// The due index's items (shared/aws/dynamo/duelist.go, bucket.go).
		return "due bucket"
	case strings.HasPrefix(pk.Value, "d#"):
		return "due list"
	}
	return "?"
}

// Background kinds cost by the hour, not by the URL: lease renewals and the
// due-index polls of every check invocation.
func isBackground(kind string) bool {
	return kind == "lease" || strings.HasPrefix(kind, "query") && kind != "query refresh"
}

// RefusedAdds counts the due-bucket adds a full bucket refused, and all
// adds (UpdateItems on due buckets).
func (c *CostResult) RefusedAdds() (refused, adds int) {
	for _, l := range c.Usage.Lines {
		if l.Op == "UpdateItem" && l.Kind == "due bucket" {
			refused += l.Failed
			adds += l.Requests
		}
	}
	return refused, adds
}

// WriteUnits sums the write units (table and index) of the lines that pass
// keep.
func (c *CostResult) WriteUnits(keep func(kind string) bool) (table, index float64) {
	for _, l := range c.Usage.Lines {
		if keep(l.Kind) {
			table += l.WriteUnits
			index += l.IndexWriteUnits
		}
	}
	return table, index
}

// ReadUnits sums the read units of the lines that pass keep.
func (c *CostResult) ReadUnits(keep func(kind string) bool) float64 {
	var r float64
	for _, l := range c.Usage.Lines {
		if keep(l.Kind) {
			r += l.ReadUnits
		}
	}
	return r
}

// SQSRequests sums billed requests of the SQS lines that pass keep.
func (c *CostResult) SQSRequests(keep func(l billing.SQSLine) bool) int {
	n := 0
	for _, l := range c.SQS {
		if keep(l) {
			n += l.Billed
		}
	}
	return n
}

// The SQS requests the downloader itself makes (and AWS bills to its
// account): the event source mapping's receives that got messages, its
// deletes and visibility changes, and the results sent.
func ourSQS(l billing.SQSLine) bool {
	switch {
	case l.Queue == "input" && l.Op == "ReceiveMessage":
		return true
	case l.Queue == "input" && (l.Op == "DeleteMessageBatch" || l.Op == "ChangeMessageVisibilityBatch"):
		return true
	case l.Queue == "output" && strings.HasPrefix(l.Op, "SendMessage"):
		return true
	case l.Queue == "wake" && !idleSQS(l):
		// Ingest's wake-ups and the check function's mapping taking them.
		return true
	}
	return false
}

func idleSQS(l billing.SQSLine) bool {
	return (l.Queue == "input" || l.Queue == "wake") && l.Op == "ReceiveMessage"+billing.EmptySuffix
}

func (e *benchEnv) runTimeout(urlsOnOneHost int, delay time.Duration) time.Duration {
	return max(e.cfg.Timeout, time.Duration(urlsOnOneHost)*delay*3/2+time.Minute)
}

// trickle: hosts hosts with one URL each, each URL ingested as its own
// batch (an ingest invocation with one record, wake-ups included), while
// the checks run.
func (e *benchEnv) trickle(ctx context.Context) (*CostResult, error) {
	n := e.cfg.TrickleHosts
	site, err := e.site(n, "")
	if err != nil {
		return nil, err
	}
	defer site.Close()
	ctx, cancel := context.WithTimeout(ctx, e.runTimeout(1, e.cfg.CostDelay))
	defer cancel()
	b, err := e.start(ctx, "trickle", e.cfg.CostDelay, nil, 0, true)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var msgs []urlmsg.Message
	var bodies []string
	expected := map[string]urlmsg.Message{}
	for i, u := range site.URLs(1) {
		body, _ := json.Marshal(urlmsg.Input{URL: u})
		bodies = append(bodies, string(body))
		ms, _, err := urlmsg.Parse(fmt.Sprintf("trickle-%d", i), body)
		if err != nil || len(ms) != 1 {
			return nil, fmt.Errorf("parse %s: %v", u, err)
		}
		msgs = append(msgs, ms[0])
		expected[ms[0].ID] = ms[0]
	}
	start := time.Now()
	var wg sync.WaitGroup
	var rep driveReport
	var runErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep, runErr = b.drive(ctx, expected, nil)
	}()
	for i, m := range msgs {
		resp, err := b.p.Invoke(ctx, events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: fmt.Sprintf("trickle-%d", i), Body: bodies[i], EventSource: "aws:sqs",
		}}})
		if err == nil && len(resp.BatchItemFailures) > 0 {
			err = errors.New("record failed")
		}
		if err != nil {
			cancel()
			wg.Wait()
			return nil, fmt.Errorf("ingest %s: %w", m.URL, err)
		}
	}
	wg.Wait()
	if runErr != nil {
		return nil, fmt.Errorf("trickle run: %w", runErr)
	}
	rep.IngestInvocations = len(msgs)
	return b.result("trickle", fmt.Sprintf("%d hosts x 1 URL, one URL per ingest call", n), n, n, e.cfg.CostDelay, rep.DoneAt.Sub(start), rep), nil
}

// burst: urls URLs to one host, sent in 50-URL messages; the event source
// mapping delivers them in one batch.
func (e *benchEnv) burst(ctx context.Context) (*CostResult, error) {
	n := e.cfg.BurstURLs
	site, err := e.site(1, "")
	if err != nil {
		return nil, err
	}
	defer site.Close()
	ctx, cancel := context.WithTimeout(ctx, e.runTimeout(n, e.cfg.CostDelay))
	defer cancel()
	b, err := e.start(ctx, "burst", e.cfg.CostDelay, map[string]string{"PersistLimit": "1000"}, 50, true)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	start := time.Now()
	expected, err := b.send(ctx, site.URLs(n))
	if err != nil {
		return nil, err
	}
	rep, err := b.drive(ctx, expected, nil)
	if err != nil {
		return nil, fmt.Errorf("burst run: %w", err)
	}
	return b.result("burst", fmt.Sprintf("%d URLs to 1 host, PersistLimit 1000, 50 URLs per message", n), n, 1, e.cfg.CostDelay, rep.DoneAt.Sub(start), rep), nil
}

// wide: hosts x perHost URLs, shuffled, one URL per message, fed to the
// input queue as feedShuffled does.
func (e *benchEnv) wide(ctx context.Context) (*CostResult, error) {
	h, u := e.cfg.WideHosts, e.cfg.WidePerHost
	site, err := e.site(h, "")
	if err != nil {
		return nil, err
	}
	defer site.Close()
	ctx, cancel := context.WithTimeout(ctx, max(5*time.Minute, e.runTimeout(u, e.cfg.CostDelay)))
	defer cancel()
	b, err := e.start(ctx, "wide", e.cfg.CostDelay, nil, 1, true)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	urls := site.URLs(u)
	start := time.Now()
	rep, batch, err := b.feedShuffled(ctx, urls, 7)
	if err != nil {
		return nil, fmt.Errorf("wide run: %w", err)
	}
	shape := fmt.Sprintf("%d hosts x %d URLs shuffled, 1 URL per message, ESM batches of %d", h, u, batch)
	return b.result("wide", shape, len(urls), h, e.cfg.CostDelay, rep.DoneAt.Sub(start), rep), nil
}

// zipfList: host sizes from a Zipf law (internal/zipf, the simulation's
// Zipf shape): ZipfHosts hosts, host r (from 1) max(1, round(ZipfTop/r))
// URLs, shuffled, one URL per message, fed as wide is. Many hosts with one
// URL, a few with hundreds: what a real list looks like, and the page's
// first cost line. Its wall is bound by the busiest host (ZipfTop URLs,
// CostDelay apart).
func (e *benchEnv) zipfList(ctx context.Context) (*CostResult, error) {
	h, top := e.cfg.ZipfHosts, e.cfg.ZipfTop
	sizes := zipf.Sizes(h, float64(top), 1)
	per, err := hostsPerListener(h)
	if err != nil {
		return nil, err
	}
	if h > 2000 {
		// The pipeline's connections take both ends' descriptors in this
		// process (pipelineConns): 250 shared listeners leave them room.
		// What is billed does not depend on it.
		per = max(per, (h+249)/250)
	}
	site, err := e.siteWith(demosite.Options{Hosts: h, HostsPerListener: per})
	if err != nil {
		return nil, err
	}
	defer site.Close()
	// Twice the busiest host's bound: on moto its sessions hand over
	// between invocations and wait on commits, and the whole list's
	// busiest host (1,000 URLs) ran past 1.5 times its 250 s.
	ctx, cancel := context.WithTimeout(ctx, max(5*time.Minute, e.runTimeout(2*sizes[0], e.cfg.CostDelay)))
	defer cancel()
	b, err := e.start(ctx, "Zipf", e.cfg.CostDelay, nil, 1, true)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var urls []string
	for r, host := range site.Hosts() {
		for i := range sizes[r] {
			urls = append(urls, site.URL(host, i))
		}
	}
	start := time.Now()
	rep, batch, err := b.feedShuffled(ctx, urls, 13)
	if err != nil {
		return nil, fmt.Errorf("zipf run: %w", err)
	}
	ones := 0
	for _, n := range sizes {
		if n == 1 {
			ones++
		}
	}
	scale := "the simulation's list"
	if h != zipf.Hosts || top != zipf.Top {
		scale = fmt.Sprintf("the simulation's %d hosts and %d at the top scaled by %.2g", zipf.Hosts, zipf.Top, float64(h)/zipf.Hosts)
	}
	shape := fmt.Sprintf("Zipf: %d hosts, host r has max(1, round(%d/r)) URLs (%s; %d hosts with one URL), shuffled, 1 URL per message, ESM batches of %d", h, top, scale, ones, batch)
	return b.result("Zipf", shape, len(urls), h, e.cfg.CostDelay, rep.DoneAt.Sub(start), rep), nil
}

// Names of the place scenario's two rows.
const (
	placeByName = "place by name"
	placeByAddr = "place by address"
)

// placeRows: a list of one host per address (each demo host on a loopback
// address of its own), PlaceHosts x PlacePerHost URLs shuffled and fed as
// wide is, run twice: hosts placed in the shard of their name (the layout
// before placement by address) and in the shard of their address (issue
// 40: one gate per server on AWS). With one host per address placement
// moves no host and writes nothing more, so the two should bill alike;
// the target is at most 0.1 write units a URL more.
func (e *benchEnv) placeRows(ctx context.Context) ([]*CostResult, error) {
	var out []*CostResult
	for _, byName := range []bool{true, false} {
		r, err := e.placeRow(ctx, byName)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (e *benchEnv) placeRow(ctx context.Context, byName bool) (*CostResult, error) {
	h, u := e.cfg.PlaceHosts, e.cfg.PlacePerHost
	site, err := e.site(h, "")
	if err != nil {
		return nil, err
	}
	defer site.Close()
	ctx, cancel := context.WithTimeout(ctx, max(5*time.Minute, e.runTimeout(u, e.cfg.CostDelay)))
	defer cancel()
	name, how := placeByAddr, "the address it resolves to"
	if byName {
		name, how = placeByName, "its name"
	}
	b, err := e.start(ctx, "place", e.cfg.CostDelay, nil, 1, true, func(o *emulated.Options) { o.PlaceByName = byName })
	if err != nil {
		return nil, err
	}
	defer b.Close()
	urls := site.URLs(u)
	start := time.Now()
	rep, batch, err := b.feedShuffled(ctx, urls, 17)
	if err != nil {
		return nil, fmt.Errorf("%s run: %w", name, err)
	}
	shape := fmt.Sprintf("%d hosts, one per address, x %d URLs shuffled, 1 URL per message, ESM batches of %d; each host in the shard of %s", h, u, batch, how)
	return b.result(name, shape, len(urls), h, e.cfg.CostDelay, rep.DoneAt.Sub(start), rep), nil
}

// placeCost is the place scenario's comparison: write and read units per
// URL by address against by name; ok is false without both rows.
func placeCost(cs []*CostResult) (byName, byAddr *CostResult, ok bool) {
	for _, c := range cs {
		switch c.Name {
		case placeByName:
			byName = c
		case placeByAddr:
			byAddr = c
		}
	}
	return byName, byAddr, byName != nil && byAddr != nil
}

// feedShuffled shuffles urls (with seed) and sends them one URL per
// message, in batches as large as the template's event source mapping
// delivers them, and drives the run to its last result. The producer keeps
// one to two batches' worth of messages on the queue, sending the next
// batch's worth when at most one is left (rather than all at once: moto's
// queue slows down with its length, see internal/moto's patches). It
// returns the batch size with the report.
func (b *bench) feedShuffled(ctx context.Context, urls []string, seed uint64) (driveReport, int, error) {
	rng := rand.New(rand.NewPCG(seed, 11))
	rng.Shuffle(len(urls), func(i, j int) { urls[i], urls[j] = urls[j], urls[i] })
	batch := max(1, b.p.Stack.IngestEventSource.BatchSize)
	next := 0
	feed := func(ctx context.Context, ingested int) (map[string]urlmsg.Message, bool, error) {
		if next-ingested > batch {
			return nil, false, nil
		}
		wave := urls[next:min(next+batch, len(urls))]
		next += len(wave)
		sent, err := b.send(ctx, wave)
		return sent, next >= len(urls), err
	}
	rep, err := b.drive(ctx, nil, feed)
	return rep, batch, err
}

func (b *bench) result(name, shape string, urls, hosts int, delay, wall time.Duration, rep driveReport) *CostResult {
	return &CostResult{
		Name: name, Shape: shape, URLs: urls, Hosts: hosts, Delay: delay, Wall: wall,
		Usage: b.meter.Usage(), SQS: b.counter.Lines(), Results: rep.ByStatus,
		IngestCalls: rep.IngestInvocations, CheckInvokes: rep.CheckInvocations, WakeInvokes: rep.WakeInvocations, Duplicates: rep.Duplicates,
		Store: b.store.calls().plus(b.ingestStore.calls()), SideReads: b.meter.SideReads(),
	}
}

// costShapeNames are the cost scenarios, as -cost-shapes names them.
var costShapeNames = []string{"burst", "trickle", "wide", "zipf", "place", "refresh"}

// costShape reports whether the run includes the cost scenario name.
func (e *benchEnv) costShape(name string) bool {
	return !e.cfg.SkipCost && (e.cfg.CostShapes == nil || e.cfg.CostShapes[name])
}

// costAndLambda runs the billing scenarios, with the long, light burst in
// the background while the others (and the Lambda figures) run. The Zipf
// list comes first in the results: it is what a real list costs.
func (e *benchEnv) costAndLambda(ctx context.Context, res *Results) error {
	if err := e.moto.Reset(ctx); err != nil {
		return err
	}
	if e.cfg.Smoke {
		return e.smokeCost(ctx, res)
	}
	var wg sync.WaitGroup
	var burst *CostResult
	var burstErr error
	if e.costShape("burst") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.log.Info("cost: burst (background)", "urls", e.cfg.BurstURLs)
			burst, burstErr = e.burst(ctx)
			if burstErr == nil {
				e.log.Info("cost: burst done", "wall", burst.Wall.Round(time.Millisecond))
			}
		}()
	}
	var rest []*CostResult
	run := func(name string, f func(context.Context) (*CostResult, error)) error {
		if !e.costShape(name) {
			return nil
		}
		e.log.Info("cost: " + name)
		r, err := f(ctx)
		if err != nil {
			wg.Wait()
			return fmt.Errorf("cost %s: %w", name, err)
		}
		e.log.Info("cost: "+name+" done", "wall", r.Wall.Round(time.Millisecond), "urls", r.URLs)
		rest = append(rest, r)
		return nil
	}
	if err := run("trickle", e.trickle); err != nil {
		return err
	}
	// The Lambda figures before wide and Zipf, which load moto most.
	if !e.cfg.SkipLambda {
		lr, err := e.lambda(ctx)
		if err != nil {
			wg.Wait()
			return fmt.Errorf("lambda figures: %w", err)
		}
		res.Lambda = lr
	}
	if err := run("wide", e.wide); err != nil {
		return err
	}
	if err := run("zipf", e.zipfList); err != nil {
		return err
	}
	if err := run("refresh", e.refresh); err != nil {
		return err
	}
	if e.costShape("place") {
		e.log.Info("cost: place")
		rs, err := e.placeRows(ctx)
		if err != nil {
			wg.Wait()
			return fmt.Errorf("cost place: %w", err)
		}
		rest = append(rest, rs...)
	}
	// The local mode jobs need no moto: they take the rest of the burst's
	// time, which is bound by its one host's delay.
	if err := e.localJobs(ctx, res); err != nil {
		wg.Wait()
		return err
	}
	wg.Wait()
	if burstErr != nil {
		return fmt.Errorf("cost burst: %w", burstErr)
	}
	if burst != nil {
		rest = append([]*CostResult{burst}, rest...)
	}
	res.Cost = append(res.Cost, zipfFirst(rest)...)
	return nil
}

// zipfFirst puts the Zipf list's row first (the page's first cost line),
// the others in their order.
func zipfFirst(cs []*CostResult) []*CostResult {
	var out, others []*CostResult
	for _, c := range cs {
		if c.Name == "Zipf" {
			out = append(out, c)
		} else {
			others = append(others, c)
		}
	}
	return append(out, others...)
}

// PerMillion is what the measured DynamoDB units and the downloader's own
// SQS requests cost per million URLs at list prices, the table on demand.
func (c *CostResult) PerMillion() float64 { return c.perMillion(priceWRU, priceRRU) }

// PerMillionProvisioned is PerMillion with the table (and its index) on
// provisioned capacity used at billing.ProvisionedUse: a sustained load
// of this shape, its capacity auto-scaled to it.
func (c *CostResult) PerMillionProvisioned() float64 {
	return c.perMillion(billing.ProvisionedWriteUnit(billing.ProvisionedUse), billing.ProvisionedReadUnit(billing.ProvisionedUse))
}

// perMillion prices the units per URL at perWrite and perRead dollars a
// unit, and the downloader's SQS requests at list price, per million URLs.
func (c *CostResult) perMillion(perWrite, perRead float64) float64 {
	all := func(string) bool { return true }
	t, ix := c.WriteUnits(all)
	n := float64(c.URLs)
	return ((t+ix)/n*perWrite + c.ReadUnits(all)/n*perRead + float64(c.SQSRequests(ourSQS))/n*priceSQS) * 1e6
}

// smokeCost runs the four scenarios at once and then the Lambda figures:
// at smoke sizes nothing here is a timing.
func (e *benchEnv) smokeCost(ctx context.Context, res *Results) error {
	runs := []func(context.Context) (*CostResult, error){e.burst, e.trickle, e.wide, e.zipfList}
	out := make([]*CostResult, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, f := range runs {
		if !e.costShape(costShapeNames[i]) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = f(ctx)
		}()
	}
	var lerr error
	if !e.cfg.SkipLambda {
		res.Lambda, lerr = e.lambda(ctx)
	}
	wg.Wait()
	if err := e.localJobs(ctx, res); err != nil {
		return err
	}
	var got []*CostResult
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("cost %s: %w", costShapeNames[i], err)
		}
		if out[i] != nil {
			got = append(got, out[i])
		}
	}
	res.Cost = append(res.Cost, zipfFirst(got)...)
	if lerr != nil {
		return fmt.Errorf("lambda figures: %w", lerr)
	}
	return nil
}
