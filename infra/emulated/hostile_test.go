package emulated_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/emulated"
	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// hostileParams make a failing host end within seconds: GiveUpAfter 8s,
// requests cut at 1s, back-off capped at 2s. The healthy hosts' pace is
// FetchDelay.
const (
	hostileDelay    = 300 * time.Millisecond
	hostileGiveUp   = 8 * time.Second
	hostileTimeout  = time.Second
	hostileBackoff  = 2 * time.Second
	hostilePeriod   = 2 * time.Second
	hostileAttempts = 3
)

func hostileParams() map[string]string {
	return map[string]string{
		"FetchDelay": hostileDelay.String(), "GiveUpAfter": hostileGiveUp.String(), "FetchTimeout": hostileTimeout.String(),
		"MaxBackoff": hostileBackoff.String(), "CheckHostPeriod": hostilePeriod.String(), "MaxAttempts": fmt.Sprint(hostileAttempts),
	}
}

// hostileRun is one pipeline run and everything it produced.
type hostileRun struct {
	p       *emulated.Pipeline
	results []result.Result
	// at is when each result arrived, by index in results.
	at []time.Time
}

// runCollecting sends urls and runs the pipeline until every one, and every
// redirect target it spawns, has a result; it keeps every result. A run
// that times out is an error, and what it produced is still returned so
// the other checks say what went wrong.
func runCollecting(t *testing.T, p *emulated.Pipeline, urls []string, timeout time.Duration) *hostileRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	sent, err := p.Send(ctx, inputs(urls))
	if err != nil || len(sent.Rejected) > 0 {
		t.Fatalf("send: %v, rejected %+v", err, sent.Rejected)
	}
	run := &hostileRun{p: p}
	var mu sync.Mutex
	rep, err := p.Run(ctx, sent.Expected, func(r result.Result, _ []byte) {
		mu.Lock()
		defer mu.Unlock()
		run.results = append(run.results, r)
		run.at = append(run.at, time.Now())
	})
	if err != nil {
		var missing []string
		for _, m := range emulated.Missing(sent.Expected, rep.Missing) {
			missing = append(missing, m.URL)
		}
		t.Errorf("run: %v (%+v); without a result: %v", err, rep.ByStatus, missing)
	}
	return run
}

// phases are each host's fetch phase by the server's clock: from the start
// of its first request to the end of its last.
func phases(reqs []demosite.Request) map[string]time.Duration {
	first, last := map[string]time.Time{}, map[string]time.Time{}
	for _, r := range reqs {
		if f, ok := first[r.Host]; !ok || r.Start.Before(f) {
			first[r.Host] = r.Start
		}
		if r.End.After(last[r.Host]) {
			last[r.Host] = r.End
		}
	}
	out := map[string]time.Duration{}
	for h, f := range first {
		out[h] = last[h].Sub(f)
	}
	return out
}

// TestHostileSite runs healthy hosts alone, then the same healthy hosts
// beside every kind of hostile host, and checks the promises from both
// sides: every URL ends; each hostile host ends as its kind says, within
// the GiveUpAfter bound where it never answers; the healthy hosts get their
// pages at the pace they had alone (per-host fetch phases from the site's
// log, within 10%); paths robots.txt disallows before 500 KiB are never
// requested; no host sees two requests closer than the delay.
//
// It runs alone, before the package's other tests (which run side by side):
// its pace and give-up bounds are measured on the wall clock.
func TestHostileSite(t *testing.T) {
	const healthyHosts, pages = 4, 20

	// The healthy hosts alone: the pace to match.
	alone, err := demosite.Start(demosite.Options{Hosts: healthyHosts})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	p := start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: hostileParams()})
	runCollecting(t, p, alone.URLs(pages), time.Minute)
	alonePhases := phases(alone.Requests())

	// The same healthy hosts beside the hostile ones.
	healthy, err := demosite.Start(demosite.Options{Hosts: healthyHosts})
	if err != nil {
		t.Fatal(err)
	}
	defer healthy.Close()
	hostile, err := demosite.StartHostile(demosite.HostileOptions{Pages: 2, RetryAfter: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer hostile.Close()
	p = start(t, emulated.Options{Addresses: fetch.PrivatePolicy(), Params: hostileParams(), Resolve: hostile.Resolve()})
	urls := append(healthy.URLs(pages), hostile.URLs()...)
	run := runCollecting(t, p, urls, 80*time.Second)

	t.Run("healthy hosts fetched with their pages", func(t *testing.T) {
		n := 0
		for _, r := range run.results {
			if _, ok := hostile.ByHost(r.Host); ok {
				continue
			}
			n++
			path := strings.TrimPrefix(r.URL, "http://"+r.Host)
			if r.Status != result.StatusFetched || r.Data != demosite.Body(r.Host, path) {
				t.Errorf("%s: %s %q (%s), want fetched with its page", r.URL, r.Status, r.Data, r.Error)
			}
		}
		if n != healthyHosts*pages {
			t.Errorf("%d healthy results, want %d", n, healthyHosts*pages)
		}
	})

	t.Run("healthy hosts keep their pace", func(t *testing.T) {
		// The hostile hosts' work takes CPU from the healthy ones: on an
		// idle machine the phases match within 3%, on CI's loaded cores
		// they came out up to 11% slower. A healthy host held up behind a
		// hostile one loses at least FetchTimeout (1 s) per stall, and a
		// shared bottleneck does so at every request: twice the phase or
		// more. 25% tells the two apart without timing the machine.
		const maxPaceRatio = 1.25
		beside := phases(healthy.Requests())
		aloneHosts, besideHosts := alone.Hosts(), healthy.Hosts()
		var sumAlone, sumBeside time.Duration
		for i := range aloneHosts {
			a, b := alonePhases[aloneHosts[i]], beside[besideHosts[i]]
			sumAlone += a
			sumBeside += b
			t.Logf("healthy host %d: fetch phase %s alone, %s beside the hostile hosts (%.3f)", i, a.Round(time.Millisecond), b.Round(time.Millisecond), float64(b)/float64(a))
			if float64(b) > maxPaceRatio*float64(a) {
				t.Errorf("healthy host %d: fetch phase %s beside the hostile hosts, %s alone: more than %.0f%% slower", i, b, a, 100*(maxPaceRatio-1))
			}
		}
		ratio := float64(sumBeside) / float64(sumAlone)
		t.Logf("healthy hosts' fetch phases: %s alone, %s beside the hostile hosts: ratio %.3f", sumAlone, sumBeside, ratio)
		if ratio > maxPaceRatio || ratio < 1/maxPaceRatio {
			t.Errorf("healthy hosts' fetch phases %s beside the hostile hosts against %s alone (ratio %.3f), want within %.0f%%", sumBeside, sumAlone, ratio, 100*(maxPaceRatio-1))
		}
	})

	t.Run("hostile hosts end as their kind says", func(t *testing.T) {
		byHost := map[string][]int{}
		for i, r := range run.results {
			if h, ok := hostile.ByHost(r.Host); ok {
				byHost[h.Host] = append(byHost[h.Host], i)
				if msg := h.Expect(r); msg != "" {
					t.Errorf("%s: %s", h.Kind, msg)
				}
			}
		}
		// Every submitted hostile URL has a result (runCollecting
		// already waited for them; this checks the attribution).
		ids := map[string]bool{}
		for _, r := range run.results {
			ids[r.URL] = true
		}
		for _, h := range hostile.Hosts() {
			for _, u := range h.URLs {
				if !ids[u] {
					t.Errorf("%s: no result for %s", h.Kind, u)
				}
			}
		}
		// Hosts that never give a usable answer end within the bound:
		// GiveUpAfter from their first failure, plus a back-off step, a
		// recheck period, a request and slack for the commit; and not
		// before GiveUpAfter.
		bound := hostileGiveUp + hostileBackoff + 2*hostilePeriod + hostileTimeout + 5*time.Second
		for _, k := range []demosite.Kind{demosite.Refused, demosite.Hang, demosite.Robots503, demosite.Drip, demosite.Reset, demosite.RetryAfterBeyond} {
			h := hostile.Host(k)
			accepted, ok := run.p.AcceptedAt(h.Host)
			if !ok {
				t.Errorf("%s: no acceptance time", k)
				continue
			}
			if len(byHost[h.Host]) == 0 {
				continue // reported above
			}
			took := run.at[byHost[h.Host][len(byHost[h.Host])-1]].Sub(accepted)
			t.Logf("%-19s %d results, last %s after acceptance", k, len(byHost[h.Host]), took.Round(100*time.Millisecond))
			if took > bound {
				t.Errorf("%s: last result %s after acceptance, want at most %s (GiveUpAfter %s and slack)", k, took, bound, hostileGiveUp)
			}
			if k == demosite.Refused || k == demosite.Hang || k == demosite.Robots503 {
				if took < hostileGiveUp {
					t.Errorf("%s: given up %s after acceptance, before GiveUpAfter %s", k, took, hostileGiveUp)
				}
			}
		}
		// The redirect loop: each chain from loop-a ends once, as
		// fetch_error, after five (or six) redirects across both hosts.
		chains := len(hostile.Host(demosite.LoopA).URLs)
		var redirects, ends int
		for _, k := range []demosite.Kind{demosite.LoopA, demosite.LoopB} {
			for _, i := range byHost[hostile.Host(k).Host] {
				switch run.results[i].Status {
				case result.StatusRedirect:
					redirects++
				case result.StatusFetchError:
					ends++
				}
			}
		}
		if ends != chains || redirects < 5*chains || redirects > 6*chains {
			t.Errorf("redirect loop: %d chains ended with %d fetch_error and %d redirect results, want %d fetch_error and 5-6 redirects each", chains, ends, redirects, chains)
			for _, k := range []demosite.Kind{demosite.LoopA, demosite.LoopB} {
				for _, i := range byHost[hostile.Host(k).Host] {
					r := run.results[i]
					t.Logf("  %s %s %s attempts=%d location=%q error=%q", r.ID, r.URL, r.Status, r.Attempts, r.Location, r.Error)
				}
			}
		}
	})

	t.Run("server side", func(t *testing.T) {
		reqs := hostile.Requests()
		count := map[string]int{}
		var first429, firstPage time.Time
		r429 := hostile.Host(demosite.Robots429).Host
		for _, r := range reqs {
			h, _ := hostile.ByHost(r.Host)
			if h.NeverRequested(r.Path) {
				t.Errorf("%s: %s was requested, which it must never be", h.Kind, r.Path)
			}
			count[r.Host+" "+strings.SplitN(r.Path[1:], "/", 2)[0]]++
			if r.Host == r429 {
				if r.Path == "/robots.txt" && first429.IsZero() {
					first429 = r.Start
				} else if r.Path != "/robots.txt" && firstPage.IsZero() {
					firstPage = r.Start
				}
			}
		}
		if firstPage.IsZero() || firstPage.Sub(first429) < 2*time.Second {
			t.Errorf("robots-429: first page requested %s after the first 429, want at least its Retry-After (2s)", firstPage.Sub(first429))
		}
		// Failing pages are retried, never more than MaxAttempts each.
		for _, k := range []demosite.Kind{demosite.Drip, demosite.Reset, demosite.RetryAfterBeyond} {
			h := hostile.Host(k)
			if n := count[h.Host+" page"]; n > hostileAttempts*len(h.URLs) {
				t.Errorf("%s: %d page requests for %d urls, want at most %d each (MaxAttempts)", k, n, len(h.URLs), hostileAttempts)
			}
		}
		all := append(healthy.Requests(), reqs...)
		// The server stamps a response's end when its handler returns. For
		// the 600 KiB robots.txt that is when it notices the fetcher closed
		// the connection after the 500 KiB it reads: a moment after the
		// fetcher's own end, from which the delay counts (once seen: 0.56
		// ms). The shared/engine tests allow the same slack.
		// How long after the fetcher the handler notices is the
		// scheduler's business: under CI's load it was 11 ms once. That
		// slack applies to the host whose robots.txt is cut (and only
		// there); every other host's gaps are held to the server's stamps.
		const serverSlack, cutSlack = 2 * time.Millisecond, 50 * time.Millisecond
		for host, g := range demosite.Gaps(all) {
			slack := serverSlack
			if strings.HasPrefix(host, "big-robots.") {
				slack = cutSlack
			}
			if g.Min < hostileDelay-slack {
				t.Errorf("requests to %s only %s apart, want at least FetchDelay %s", host, g.Min, hostileDelay)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(count)) {
			t.Logf("hostile site saw %3d requests: %s", count[k], k)
		}
	})
}
