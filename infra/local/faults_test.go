package local_test

import (
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/demosite"
	"github.com/urldownloader/urldownloader/infra/faults"
	"github.com/urldownloader/urldownloader/infra/local"
	"github.com/urldownloader/urldownloader/shared/result"
)

// TestGuaranteesUnderFaults runs the reference design's integration test:
// a skewed, shuffled workload over many hosts, once clean and once with
// injected faults, and checks the promises: every URL comes out with its
// page, duplicates are counted (and rare at a low fault rate), the server
// never sees two requests to one host closer than the delay, and no host is
// left stuck (every URL finishes within the time bound).
func TestGuaranteesUnderFaults(t *testing.T) {
	const delay = 150 * time.Millisecond
	cases := []struct {
		name string
		inj  *faults.Injector
		// maxDupShare bounds duplicates as a share of the URLs.
		maxDupShare float64
		// wantKinds must each have been injected at least once.
		wantKinds []faults.Kind
	}{
		{name: "clean", maxDupShare: 0},
		{name: "rate 0.05", inj: faults.New(7, 0.05), maxDupShare: 0.05,
			wantKinds: []faults.Kind{faults.DynamoThrottle, faults.DynamoServerError, faults.DynamoConflict}},
		{name: "rate 0.25", inj: faults.New(5, 0.25), maxDupShare: 2,
			wantKinds: []faults.Kind{faults.DynamoThrottle, faults.DynamoServerError, faults.DynamoConflict,
				faults.SQSPartialFailure, faults.DuplicateSchedule}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			site, err := demosite.Start(demosite.Options{Hosts: 55})
			if err != nil {
				t.Fatal(err)
			}
			defer site.Close()
			p := start(t, local.Options{AllowPrivate: true, Faults: tc.inj,
				Params: map[string]string{"FetchDelay": delay.String(), "CheckHostPeriod": "2s"}})
			urls := site.SkewedURLs(12, 3)
			rep, got := runAll(t, p, inputs(urls), 4*time.Minute)
			t.Logf("%d urls: %+v duplicates=%d elapsed=%s faults=%v", len(urls), rep.ByStatus, rep.Duplicates, rep.Elapsed, rep.Faults)

			for _, r := range got {
				path := strings.TrimPrefix(r.URL, "http://"+r.Host)
				if r.Status != result.StatusFetched || r.Data != demosite.Body(r.Host, path) {
					t.Errorf("%s: %s %q, want fetched with its page", r.URL, r.Status, r.Data)
				}
			}
			if share := float64(rep.Duplicates) / float64(len(urls)); share > tc.maxDupShare {
				t.Errorf("duplicates %d of %d urls (%.1f%%), want at most %.0f%%", rep.Duplicates, len(urls), 100*share, 100*tc.maxDupShare)
			}
			if gap, host := demosite.MinGap(site.Requests()); gap < delay {
				t.Errorf("requests to %s only %s apart, want >= %s", host, gap, delay)
			}
			for _, k := range tc.wantKinds {
				if rep.Faults[k] == 0 {
					t.Errorf("no %s fault was injected (%v): the run did not test it", k, rep.Faults)
				}
			}
		})
	}
}
