package emulated_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/billing"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestRefreshWaitsAtNoCost is issue 41's point 4 on the stack: once a
// host's only work is a refresh due later, the check functions, looking
// at their shards back to back, read and write none of its items (host
// item, refresh items: counted on the billing meter) until it is due;
// then it is fetched again, not before.
func TestRefreshWaitsAtNoCost(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	host := site.Hosts()[0]
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	rawCfg, err := moto.AWSConfig(ctx, moto.Shared(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	raw := dynamodb.NewFromConfig(rawCfg)
	// The host's own items, whatever kind: its pk is "h#<key>".
	watched := func(_ string, key map[string]types.AttributeValue) string {
		if pk, ok := key["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "h#") && strings.Contains(pk.Value, host) {
			sk, _ := key["sk"].(*types.AttributeValueMemberS)
			if sk != nil && sk.Value != "h" {
				return "watched " + sk.Value[:2]
			}
			return "watched"
		}
		return "other"
	}
	const checkRun = 5 * time.Second
	meter := billing.NewMeterWith(raw, watched, billing.MeterOptions{QueryKinds: true})
	p := start(t, emulated.Options{
		Endpoint: moto.Shared(t).Endpoint, Addresses: fetch.PrivatePolicy(), CheckRun: checkRun,
		Params:        map[string]string{"FetchDelay": "100ms", "CheckHostPeriod": "2s"},
		DynamoOptions: []func(*dynamodb.Options){meter.Option},
	})
	noRedelivery(t, p)
	store := dynamo.New(raw, p.Stack.TableName, time.Now) // unmetered: the test's own reads
	sent, err := p.Send(ctx, []urlmsg.Input{{URL: site.URL(host, 0), Refresh: "1m", EmitUnchanged: true}})
	if err != nil || len(sent.Rejected) > 0 {
		t.Fatalf("send: %v %+v", err, sent.Rejected)
	}
	var key string
	for _, m := range sent.Expected {
		key = hostqueue.QueueKey(m.Host, false)
	}
	_, got := runExpected(ctx, t, p, sent.Expected)
	var first result.Result
	for _, r := range got {
		first = r
	}
	if first.Seq != 1 || first.Changed == nil || !*first.Changed {
		t.Fatalf("first result %+v, want seq 1, changed", first)
	}

	// The second run keeps the checks looking at their shards while the
	// host waits; it ends at the refetch's result.
	var mu sync.Mutex
	var second []result.Result
	done := make(chan error, 1)
	go func() {
		_, err := p.Run(ctx, sent.Expected, func(r result.Result, _ []byte) {
			mu.Lock()
			defer mu.Unlock()
			second = append(second, r)
		})
		done <- err
	}()
	// Wait for the session to release the host to its next refresh.
	var due time.Time
	for due.IsZero() {
		h, err := store.Load(ctx, key, 0)
		switch {
		case err != nil:
			t.Fatalf("load %s: %v", key, err)
		case h.Refreshing != 1:
			t.Fatalf("refreshing %d, want 1", h.Refreshing)
		case h.Due.After(time.Now()):
			due = h.Due
		default:
			select {
			case <-ctx.Done():
				t.Fatalf("the host was never released to its next refresh (due %v)", h.Due)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	// The looks just after the release read the host once per index item
	// its sessions left behind (its entries of past due times: leaving
	// writes nothing, and an index item goes once every host it names has
	// left it, shared/aws/dynamo/duelist.go). They are the last session's
	// tail, over in a look or two; the wait is measured after them.
	meter.Reset()
	time.Sleep(5 * time.Second)
	tail := 0
	for _, l := range meter.Usage().Lines {
		if strings.HasPrefix(l.Kind, "watched") {
			tail += l.Requests
		}
	}
	meter.Reset()
	// A check run looks whether a host falls due before its own end (it
	// stays for it, engine.run.idle): that look reads the due index only
	// (hostqueue.LookAhead), so the wait is measured up to the due time,
	// less a moment for the clocks.
	quiet := time.Until(due) - 300*time.Millisecond
	if quiet < 5*time.Second {
		t.Fatalf("the next refresh is due in %v: too soon to watch the wait", time.Until(due))
	}
	time.Sleep(quiet)
	waited := meter.Usage()
	looks := 0
	for _, l := range waited.Lines {
		if strings.HasPrefix(l.Kind, "watched") && (l.ReadUnits > 0 || l.WriteUnits > 0 || l.Requests > 0) {
			t.Errorf("while waiting %v for the refresh: %s %s on the host's items, %d requests, %.1f read and %.1f write units", quiet.Round(time.Second), l.Op, l.Kind, l.Requests, l.ReadUnits, l.WriteUnits)
		}
		if l.Op == "Query" && !strings.HasPrefix(l.Kind, "watched") {
			looks += l.Requests
		}
	}
	if looks == 0 {
		t.Errorf("no check looked at the due index while the host waited: the test shows nothing")
	}
	if err := <-done; err != nil {
		t.Fatalf("second run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(second) == 0 || second[0].Seq != 2 || second[0].Changed == nil || *second[0].Changed {
		t.Fatalf("after the wait: %+v, want the refetch, seq 2, unchanged", second)
	}
	if at := second[0].FetchedAt; at.Before(due.Add(-time.Millisecond)) {
		t.Errorf("refetched at %v, before its due time %v", at, due)
	}
	var units float64
	for _, l := range meter.Usage().Lines {
		if strings.HasPrefix(l.Kind, "watched") {
			units += l.ReadUnits + l.WriteUnits
		}
	}
	if units == 0 {
		t.Errorf("the refetch billed nothing on the host's items: the meter does not see them")
	}
	t.Logf("%d requests on the host's items in the 5 s after its release; then waited %v with %d due-index queries and none; the refetch billed %.1f units", tail, quiet.Round(time.Second), looks, units)
}
