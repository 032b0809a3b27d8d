package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/fetch/fetchtest"
)

// The drift test: the model of the check function (check.go) re-states
// the engine's run and worker loop step by step, so a rule changed on one
// side alone (a delay, a back-off, a round, a linger) would let the
// simulation's figures drift from what the product does. It runs one
// workload through both, the real engine on virtual time (a synctest
// bubble, the in-memory SQLite store, servers on an in-memory network, as
// the engine's own tests do) and the simulation with every latency zero,
// and requires each host's requests at the same times, within a tenth of
// the host's delay.

// driftHosts is the workload's size; driftFailing answers 500 to every
// page, driftCrawl asks for a Crawl-delay of driftCrawlDelay.
const (
	driftHosts      = 50
	driftFailing    = 7
	driftCrawl      = 13
	driftCrawlDelay = 3 * time.Second
)

// driftSizes is how many URLs each host has.
func driftSizes() []int {
	sizes := make([]int, driftHosts)
	for i := range sizes {
		sizes[i] = 2 + i%5*3 // 2 to 14 URLs: some hosts take two rounds of ten
	}
	return sizes
}

// driftAnswer is how long the k-th request to host i (robots.txt first)
// takes, on both sides: 20 to 700 ms drawn from the seed, so that
// DelayFactor x the answer's duration is the delay of some requests and
// FetchDelay of others.
func driftAnswer(seed uint64, i, k int) time.Duration {
	return time.Duration(20+int(mix(seed, i, 100+uint64(k))*680)) * time.Millisecond
}

// driftKey is host i's queue key: the address the in-memory network gives
// its server (ports are handed out in order from 40001).
func driftKey(i int) string { return fmt.Sprintf("127.0.1.%d:%d", i+1, 40001+i) }

func driftParams() params.Params {
	p := params.Defaults()
	p.FetchDelay = 500 * time.Millisecond
	p.DelayFactor = 2
	p.FetchTimeout = 2 * time.Second
	p.MaxBackoff = 4 * time.Second
	p.MaxCrawlDelay = 10 * time.Second
	p.MaxConcurrentHosts = 64
	p.RespectRobots = true
	return p
}

// driftDelay is the delay a host's tolerance is a tenth of.
func driftDelay(i int, p params.Params) time.Duration {
	if i == driftCrawl {
		return driftCrawlDelay
	}
	return p.FetchDelay
}

// TestEngineAndModelAgree: every host gets the same number of requests
// from the engine and from the model, each within a tenth of the host's
// delay of the other. Host driftFailing backs off and ends its URLs after
// MaxAttempts, host driftCrawl is paced by its Crawl-delay, the hosts of
// more than ten URLs work two rounds (the second while the first is
// committed).
func TestEngineAndModelAgree(t *testing.T) {
	const seed = 7
	p := driftParams()
	model := driftModel(t, seed, p)
	var first int64 = -1
	for _, ts := range model {
		if first < 0 || ts[0] < first {
			first = ts[0]
		}
	}
	if first < 0 {
		t.Fatal("the model made no request")
	}
	// The engine starts when the model's first request starts, at the
	// same offset from a whole day (epoch is midnight, as is the bubble's
	// start), so the staggered check times (NextHostCheck) fall alike.
	got := driftEngine(t, seed, p, time.Duration(first))
	bad := 0
	for i := range driftHosts {
		key := driftKey(i)
		m, e := model[key], got[key]
		tol := driftDelay(i, p) / 10
		var diffs []string
		for k := range max(len(m), len(e)) {
			switch {
			case k >= len(m):
				diffs = append(diffs, fmt.Sprintf("#%d engine only at %s", k+1, e[k]))
			case k >= len(e):
				diffs = append(diffs, fmt.Sprintf("#%d model only at %s", k+1, time.Duration(m[k]-first)))
			default:
				if d := time.Duration(m[k]-first) - e[k]; d > tol || d < -tol {
					diffs = append(diffs, fmt.Sprintf("#%d model %s, engine %s", k+1, time.Duration(m[k]-first), e[k]))
				}
			}
		}
		if len(diffs) > 0 {
			bad++
			t.Errorf("host %d (%s): %d requests in the model, %d by the engine, tolerance %s: %s",
				i, key, len(m), len(e), tol, strings.Join(diffs[:min(len(diffs), 4)], "; "))
		}
	}
	if bad > 0 {
		t.Logf("%d of %d hosts differ", bad, driftHosts)
	}
	// The workload does what it is for: the failing host is tried
	// MaxAttempts times a URL, the Crawl-delay spaces its host's requests.
	if got, want := len(got[driftKey(driftFailing)]), 1+driftSizes()[driftFailing]*p.MaxAttempts; got != want {
		t.Errorf("failing host: %d requests, want %d (robots.txt and MaxAttempts a URL)", got, want)
	}
	crawl := got[driftKey(driftCrawl)]
	for k := 2; k < len(crawl); k++ {
		if gap := crawl[k] - crawl[k-1]; gap < driftCrawlDelay {
			t.Errorf("Crawl-delay host: request %d came %s after the one before, want %s or more", k+1, gap, driftCrawlDelay)
		}
	}
}

// driftModel runs the workload through the simulation, every latency
// zero, one shard and a run long enough for every URL, and returns each
// host's request starts (simulated nanoseconds).
func driftModel(t *testing.T, seed uint64, p params.Params) map[string][]int64 {
	t.Helper()
	c := Defaults()
	c.Name, c.Seed, c.P = "drift", seed, p
	c.Sizes = driftSizes()
	c.FixedLatency = true
	c.DynamoLatency, c.QueryLatency, c.SQSLatency, c.InvokeOverhead = Dist{}, Dist{}, Dist{}, Dist{}
	c.ColdStart = 0
	// The bubble spends no time on CPU: no per-invocation request rate.
	c.InvocationRPS = 0
	c.ShardCount = 1
	c.CheckRun, c.CheckTimeout = 10*time.Minute, 15*time.Minute
	c.MaxTime = 30 * time.Minute
	c.Web.DisallowP = 0
	// One message holds the whole list: one ingest queues every host at
	// once, as the engine side seeds its store before the run.
	c.URLsPerMessage = 1 << 20
	c.IngestWindow = 0
	s := New(c)
	s.shape = func(h *host) {
		h.key = driftKey(int(h.rank))
		h.kind, h.robotsKind, h.crawlDelay = 0, robots404, 0
		if h.rank == driftCrawl {
			h.robotsKind, h.crawlDelay = robotsSmall, int64(driftCrawlDelay)
		}
	}
	count := map[*host]int{}
	s.answer = func(h *host, robots bool) scripted {
		k := count[h]
		count[h]++
		d := driftAnswer(seed, int(h.rank), k)
		switch {
		case robots && h.robotsKind == robots404:
			return scripted{respNotFound, d}
		case robots:
			return scripted{respOK, d}
		case h.rank == driftFailing:
			return scripted{respServerError, d}
		}
		return scripted{respOK, d}
	}
	s.hostStarts = map[string][]int64{}
	r := s.Run()
	for _, v := range r.Check() {
		t.Errorf("model: %s", v)
	}
	if r.Ended != r.URLs {
		t.Fatalf("model: %d of %d URLs ended", r.Ended, r.URLs)
	}
	return s.hostStarts
}

// driftEngine runs the workload through the real engine in a synctest
// bubble, one run of shard 0 of 1 starting after wait, and returns each
// host's request starts as the servers saw them, from the run's start.
func driftEngine(t *testing.T, seed uint64, p params.Params, wait time.Duration) map[string][]time.Duration {
	t.Helper()
	out := map[string][]time.Duration{}
	synctest.Test(t, func(t *testing.T) {
		var netw fetchtest.Network
		var mu sync.Mutex
		starts := map[string][]time.Time{}
		total := 0
		for i, n := range driftSizes() {
			srv := netw.NewUnstartedServer(fmt.Sprintf("127.0.1.%d", i+1), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				k := len(starts[r.Host])
				starts[r.Host] = append(starts[r.Host], time.Now())
				mu.Unlock()
				time.Sleep(driftAnswer(seed, i, k))
				switch {
				case r.URL.Path == "/robots.txt" && i == driftCrawl:
					fmt.Fprintf(w, "User-agent: *\nCrawl-delay: %d\n", int(driftCrawlDelay.Seconds()))
				case r.URL.Path == "/robots.txt":
					http.NotFound(w, r)
				case i == driftFailing:
					http.Error(w, "failing", http.StatusInternalServerError)
				default:
					_, _ = io.WriteString(w, "page "+r.URL.Path)
				}
			}))
			srv.Start()
			t.Cleanup(srv.Close)
			if got := srv.Listener.Addr().String(); got != driftKey(i) {
				t.Fatalf("server %d listens on %s, want %s", i, got, driftKey(i))
			}
			total += n
		}
		store, err := sqlite.NewMemory(time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		time.Sleep(wait)
		for i, n := range driftSizes() {
			var ents []hostqueue.Entry
			for j := range n {
				u := fmt.Sprintf("http://%s/p/%d", driftKey(i), j)
				ents = append(ents, hostqueue.Entry{ID: urlmsg.MakeID("drift", i*100+j, u), URL: u})
			}
			if _, err := store.Append(t.Context(), hostqueue.AppendRequest{Key: driftKey(i), Entries: ents, Limit: p.PersistLimit, Due: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		pub := &driftPublisher{}
		f := fetch.New(fetch.Options{UserAgent: p.UserAgent, Timeout: p.FetchTimeout, MaxBodyBytes: p.MaxBodyBytes, AllowPrivate: true, Network: &netw}, time.Now)
		t.Cleanup(f.CloseIdleConnections)
		eng := &engine.Engine{
			Store: store, Publisher: pub,
			Fetcher: func(params.Params) engine.Fetcher { return f },
			Params:  func(context.Context) params.Params { return p },
			Clock:   engine.RealClock{},
			Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		until, deadline := runTimes(Config{CheckRun: 10 * time.Minute, CheckTimeout: 15 * time.Minute})
		start := time.Now()
		if _, err := eng.Run(t.Context(), engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "drift",
			Until: start.Add(until), Deadline: start.Add(deadline), LeaseWait: leaseWait}); err != nil {
			t.Fatal(err)
		}
		if n := pub.count(); n != total {
			t.Fatalf("engine: %d results, want %d", n, total)
		}
		for key, ts := range starts {
			sort.Slice(ts, func(a, b int) bool { return ts[a].Before(ts[b]) })
			for _, at := range ts {
				out[key] = append(out[key], at.Sub(start))
			}
		}
	})
	return out
}

// driftPublisher counts the engine's results.
type driftPublisher struct {
	mu sync.Mutex
	n  int
}

func (d *driftPublisher) Publish(_ context.Context, rs []result.Result) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n += len(rs)
	return nil
}

func (d *driftPublisher) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}
