package emulated_test

import (
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestLambdaConcurrency runs 4 shards' schedules and ingest on an account
// that lets 2 invocations run at once: Lambda refuses the others
// (TooManyRequestsException), they are retried later, and every URL still
// ends in one result.
func TestLambdaConcurrency(t *testing.T) {
	t.Parallel()
	site, err := demosite.Start(demosite.Options{Hosts: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	// Schedules apart, as EventBridge's are (once a minute, a run lasting
	// most of it; here 2 s runs every 6 s, room for a run slowed by a
	// loaded machine): without gaps, four check loops that start
	// again at once keep both slots and ingest never gets one (its
	// records then reach the DLQ, as they would on AWS; see the deploying
	// docs' concurrency section).
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), ShardCount: 4, LambdaConcurrency: 2, CheckRun: 2 * time.Second, ScheduleEvery: 6 * time.Second,
		Params: map[string]string{"FetchDelay": "100ms", "CheckHostPeriod": "2s"}})
	noRedelivery(t, p)
	rep, _ := runAll(t, p, inputs(site.URLs(3)), 3*time.Minute)
	if rep.ByStatus[result.StatusFetched] != 18 || rep.Duplicates != 0 {
		t.Errorf("fetched %d of 18 with %d duplicates: %+v", rep.ByStatus[result.StatusFetched], rep.Duplicates, rep.ByStatus)
	}
	if rep.Throttles == 0 || p.Throttles() == 0 {
		t.Errorf("throttles %d (pipeline %d): four shards and ingest on 2 slots were never refused", rep.Throttles, p.Throttles())
	}
}

func TestLambdaConcurrencyDefault(t *testing.T) {
	t.Setenv(emulated.EnvLambdaConcurrency, "")
	if emulated.DefaultLambdaConcurrency != 1000 {
		t.Errorf("DefaultLambdaConcurrency = %d, want AWS's 1,000", emulated.DefaultLambdaConcurrency)
	}
	t.Setenv(emulated.EnvLambdaConcurrency, "zero")
	if _, err := emulated.Start(t.Context(), emulated.Options{Endpoint: "http://127.0.0.1:1"}); err == nil {
		t.Errorf("%s=zero: started, want an error", emulated.EnvLambdaConcurrency)
	}
}
