package emulated_test

import (
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestWakeStartsIdleShards: with the schedule as deployed (each shard once
// a minute, an idle invocation ending at once), URLs that arrive after the
// shards' invocations found nothing are fetched within seconds: ingest
// wakes the shards through the wake queue instead of leaving the URLs to
// the next minute.
func TestWakeStartsIdleShards(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	p := start(t, emulated.Options{
		Addresses: fetch.PrivatePolicy(), ScheduleEvery: time.Minute, CheckRun: 55 * time.Second, IngestBatchingWindow: 5 * time.Second,
		Params: map[string]string{"FetchDelay": "100ms", "CheckHostPeriod": "2s"},
	})
	if p.Stack.WakeEventSource.QueueURL == "" {
		t.Fatal("the template gives CheckFunction no wake queue")
	}
	began := time.Now()
	// The URLs reach the store only after the input mapping's batching
	// window, well after every shard's first scheduled invocation ended
	// idle; the next ones are a minute away.
	rep, _ := runAll(t, p, inputs(site.URLs(3)), 3*time.Minute)
	took := time.Since(began)
	if rep.ByStatus[result.StatusFetched] != 18 {
		t.Errorf("fetched %d of 18: %+v", rep.ByStatus[result.StatusFetched], rep.ByStatus)
	}
	if rep.WakeInvocations == 0 {
		t.Errorf("no check invocation came from the wake queue (report %+v)", rep)
	}
	if took > 40*time.Second {
		t.Errorf("took %v: the URLs waited for the next scheduled minute instead of a wake-up", took)
	}
	if gap, host := demosite.MinGap(site.Requests()); gap < 100*time.Millisecond {
		t.Errorf("requests to %s only %s apart, want >= 100ms", host, gap)
	}
	t.Logf("18 URLs in %v, %d scheduled and %d woken check invocations", took.Round(time.Millisecond), rep.CheckInvocations, rep.WakeInvocations)
}
