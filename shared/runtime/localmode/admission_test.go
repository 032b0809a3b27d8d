package localmode

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// TestAdmissionByBudget: however large MaxConcurrentHosts is, the check
// loops together run no more host workers, and so no more requests at
// once, than the process's budget admits; every URL still gets its result
// (the hosts beyond the budget wait for a slot, none times out).
func TestAdmissionByBudget(t *testing.T) {
	t.Parallel()
	const hosts, perHost, workers = 24, 2, 3
	var inFlight, peak atomic.Int64
	site := startSite(t, demosite.Options{Hosts: hosts, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		// Long enough that hosts admitted at once overlap.
		time.Sleep(20 * time.Millisecond)
		fmt.Fprint(w, "page")
	})})
	var urls []string
	for _, h := range site.Hosts() {
		for i := range perHost {
			urls = append(urls, site.URL(h, i))
		}
	}
	dir := t.TempDir()
	outPath := filepath.Join(dir, "out.jsonl")
	rt := open(t, Options{
		State: filepath.Join(dir, "state.db"), Out: openOut(t, outPath), Addresses: fetch.PrivatePolicy(),
		Params: map[string]string{"FetchDelay": "10ms", "MaxConcurrentHosts": "10000"},
		Budget: &engine.Budget{Conns: workers},
	})
	// Bounds a hang only.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := rt.Run(ctx, RunOptions{Input: fileInput(t, writeLines(t, jsonLines(urls)))})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Stopped || len(rep.Missing) > 0 || rep.ByStatus[result.StatusFetched] != len(urls) {
		t.Fatalf("report %+v, want all %d urls fetched", rep, len(urls))
	}
	if got := peak.Load(); got > workers {
		t.Errorf("the site served %d requests at once, want at most the budget's %d workers", got, workers)
	}
	if got := peak.Load(); got < 2 {
		t.Errorf("the site never served two requests at once (peak %d): the loops did not share the budget's %d workers", got, workers)
	}
}
