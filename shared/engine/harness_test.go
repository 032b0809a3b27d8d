package engine_test

// The harness runs the real check engine and the real fetcher against HTTP
// servers that log every request with the server's own clock; results go
// to a recording publisher. It runs in one of two worlds:
//
//   - virtual (a test wrapped in virtual): a testing/synctest bubble whose
//     clock moves only when every goroutine of the test waits, so delays,
//     back-off, leases and lingering cost no wall-clock time and every
//     time is exact; the store is the embedded SQLite store in memory and
//     the servers sit on an in-memory network (fetchtest), since a
//     goroutine blocked on a real socket would stop the clock. Most
//     behaviour tests run here.
//   - real (any other test): the DynamoDB store on a table made from
//     template.yaml on the test binary's moto server, servers on loopback,
//     the wall clock. A smaller set of politeness tests keeps the engine
//     honest against the real emulator and network.

import (
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/stack"
	"github.com/urldownloader/urldownloader/shared/aws/dynamo"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/server"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
	"github.com/urldownloader/urldownloader/shared/web/fetch/fetchtest"
)

// networks holds the in-memory network of each test running in virtual
// (by its bubble's *testing.T); a test not found here runs in the real
// world.
var networks sync.Map

// virtual runs f on virtual time: in a testing/synctest bubble, with an
// in-memory network that newSite and the env's fetchers use and the
// in-memory SQLite store. Time moves only when every goroutine of the
// bubble waits; if they all wait on each other with no timer left, the
// test panics with their stacks (a deadlock is never silent), and every
// goroutine must have ended when f and its cleanups return. Call
// t.Parallel and t.Run outside: a bubble allows neither.
func virtual(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		networks.Store(t, &fetchtest.Network{})
		t.Cleanup(func() { networks.Delete(t) })
		f(t)
	})
}

// networkOf is the in-memory network of a test in virtual, or nil.
func networkOf(t *testing.T) *fetchtest.Network {
	n, ok := networks.Load(t)
	if !ok {
		return nil
	}
	return n.(*fetchtest.Network)
}

// slack absorbs scheduler and timer noise in lower bounds measured on the
// server: the engine sleeps at least the delay, but the two clocks read at
// slightly different points (the server logs a response's end just before
// the bytes leave; the engine takes its time after the last byte arrived).
const slack = 15 * time.Millisecond

// testParams are small-delay parameters for engine tests. They pass
// params.Validate except where a test changes them on purpose.
func testParams() params.Params {
	p := params.Defaults()
	p.CheckHostPeriod = 1500 * time.Millisecond
	p.FetchDelay = 150 * time.Millisecond
	p.FetchTimeout = 2 * time.Second
	p.MaxBodyBytes = 64 << 10
	p.MaxBackoff = 5 * time.Second
	p.MaxCrawlDelay = 5 * time.Second
	p.MaxConcurrentHosts = 16
	return p
}

// recorder is a Publisher that keeps every result in memory.
type recorder struct {
	mu      sync.Mutex
	results []result.Result
	// fail, when set, makes Publish fail (and record nothing); refused
	// counts the failed calls.
	fail    atomic.Bool
	refused atomic.Int32
}

func (r *recorder) Publish(_ context.Context, rs []result.Result) error {
	if r.fail.Load() {
		r.refused.Add(1)
		return fmt.Errorf("recorder: publishing %d results refused", len(rs))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, rs...)
	return nil
}

// has returns a stop condition: the recorder holds at least n results.
func (r *recorder) has(n int) func() bool {
	return func() bool { return len(r.all()) >= n }
}

func (r *recorder) all() []result.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.results)
}

// byURL returns the results per URL (a URL seen twice has two).
func (r *recorder) byURL() map[string][]result.Result {
	out := map[string][]result.Result{}
	for _, res := range r.all() {
		out[res.URL] = append(out[res.URL], res)
	}
	return out
}

// one returns the only result for url, failing the test when there is not
// exactly one.
func (r *recorder) one(t *testing.T, url string) result.Result {
	t.Helper()
	rs := r.byURL()[url]
	if len(rs) != 1 {
		t.Fatalf("%d results for %s, want exactly 1; all results: %s", len(rs), url, describe(r.all()))
	}
	return rs[0]
}

func describe(rs []result.Result) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n  %s %s http=%d attempts=%d loc=%q err=%q", r.URL, r.Status, r.HTTPStatus, r.Attempts, r.Location, r.Error)
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// env is one test's deployment: its own table, a store on it, a recorder,
// and a fetcher that may reach loopback.
type env struct {
	t *testing.T
	// st and ddb are the real world's stack and client; nil in virtual.
	st    *stack.Stack
	ddb   *dynamodb.Client
	store hostqueue.Store
	// net is the in-memory network of a test in virtual; nil in the real
	// world.
	net *fetchtest.Network
	pub *recorder
	log *slog.Logger

	// wrap, when set, wraps each engine's fetcher (a test's stand-in for
	// DNS: see TestDomainQueueSharesDelay).
	wrap func(engine.Fetcher) engine.Fetcher
	// gate, when set, is every engine's gate per server address, which
	// their fetchers meet too.
	gate *server.Gate
	// shard, when set, places every seeded host in this virtual shard, as
	// ingest places the names of one server address together on AWS.
	shard *int

	mu sync.Mutex
	p  params.Params
}

// newEnv returns the test's deployment in its world (see virtual).
func newEnv(t *testing.T, p params.Params) *env {
	t.Helper()
	e := &env{t: t, pub: &recorder{}, p: p, net: networkOf(t)}
	if e.net != nil {
		s, err := sqlite.NewMemory(time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		e.store = s
	} else {
		st, cfg := stack.DeployForTest(t, stack.Options{})
		e.st, e.ddb = st, dynamodb.NewFromConfig(cfg)
		e.store = dynamo.New(e.ddb, st.TableName, time.Now)
	}
	level := slog.LevelError + 1 // quiet unless CHECK_TEST_LOG is set
	if os.Getenv("CHECK_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	e.log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: level}))
	return e
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// setParams changes the parameters engines made from now on see.
func (e *env) setParams(p params.Params) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.p = p
}

func (e *env) params() params.Params {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.p
}

// engine returns a new engine, as a fresh function instance would have: no
// robots.txt in memory, its own fetcher, the shared store and recorder.
func (e *env) engine() *engine.Engine {
	var mu sync.Mutex
	var f *fetch.Fetcher
	var key params.Params
	e.t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if f != nil {
			f.CloseIdleConnections()
		}
	})
	return &engine.Engine{
		Store:     e.store,
		Publisher: e.pub,
		Fetcher: func(p params.Params) engine.Fetcher {
			mu.Lock()
			defer mu.Unlock()
			if f == nil || key != p {
				if f != nil {
					f.CloseIdleConnections()
				}
				opts := fetch.Options{
					UserAgent: p.UserAgent, Timeout: p.FetchTimeout, MaxBodyBytes: p.MaxBodyBytes, AllowPrivate: true,
				}
				if e.net != nil {
					opts.Network = e.net
				}
				if e.gate != nil {
					opts.Gate = engine.FetchGate(e.gate)
				}
				f, key = fetch.New(opts, time.Now), p
			}
			if e.wrap != nil {
				return e.wrap(f)
			}
			return f
		},
		Params: func(context.Context) params.Params { return e.params() },
		Clock:  engine.RealClock{},
		Log:    e.log,
		Gate:   e.gate,
	}
}

// seed queues urls on their hosts, due at once. Entries get stable IDs.
func (e *env) seed(urls ...string) map[string]string {
	e.t.Helper()
	return e.seedEntries(nil, urls...)
}

// seedEntries is seed with a hook to set validators on each entry.
func (e *env) seedEntries(edit func(*hostqueue.Entry), urls ...string) map[string]string {
	e.t.Helper()
	ids := map[string]string{}
	byKey := map[string][]hostqueue.Entry{}
	var order []string
	p := e.params()
	for i, raw := range urls {
		m, err := urlmsg.Validate(urlmsg.Input{URL: raw})
		if err != nil {
			e.t.Fatalf("seed %s: %v", raw, err)
		}
		if m.URL != raw {
			e.t.Fatalf("seed %s: normalises to %s; use the normal form so results match", raw, m.URL)
		}
		ent := hostqueue.Entry{ID: urlmsg.MakeID(e.t.Name(), i, m.URL), URL: m.URL}
		if edit != nil {
			edit(&ent)
		}
		key := hostqueue.QueueKey(m.Host, p.QueueMode == params.QueueByDomain)
		if _, ok := byKey[key]; !ok {
			order = append(order, key)
		}
		byKey[key] = append(byKey[key], ent)
		ids[m.URL] = ent.ID
	}
	for _, key := range order {
		req := hostqueue.AppendRequest{Key: key, Entries: byKey[key], Limit: p.PersistLimit, Due: time.Now()}
		if e.shard != nil {
			req.Shard, req.Placed = *e.shard, true
		}
		_, err := e.store.Append(e.t.Context(), req)
		if err != nil {
			e.t.Fatalf("seed %s: %v", key, err)
		}
	}
	return ids
}

// run runs shard 0 of 1 on a new engine until d from now: a run that ends
// by its Until, as an invocation does.
func (e *env) run(d time.Duration) engine.Summary {
	e.t.Helper()
	return e.runWith(e.engine(), "owner-"+e.t.Name(), d, 0, nil)
}

// runUntil runs shard 0 of 1 on a new engine until the recorder holds want
// results (from all runs so far), or max has passed. Stopping early keeps
// the tests short, and a generous max keeps them stable on a loaded machine
// (under -race a run may take a second or more to lease its 16 shards).
func (e *env) runUntil(want int, max time.Duration) engine.Summary {
	e.t.Helper()
	return e.runWith(e.engine(), "owner-"+e.t.Name(), max, 0, e.pub.has(want))
}

// runUntilSeen runs shard 0 of 1 on a new engine until stop says so (for
// example once the server has seen some requests), or max has passed. The
// run is stopped by cancelling its context: its workers stop before their
// next request, publish and commit, as they do at Until.
func (e *env) runUntilSeen(stop func() bool, max time.Duration) engine.Summary {
	e.t.Helper()
	return e.runWith(e.engine(), "owner-"+e.t.Name(), max, 0, stop)
}

// runWith runs shard 0 of 1 on eng as owner until d from now or, when stop
// is set, until it reports true.
func (e *env) runWith(eng *engine.Engine, owner string, d, leaseWait time.Duration, stop func() bool) engine.Summary {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	defer cancel()
	if stop != nil {
		go func() {
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					if stop() {
						cancel()
						return
					}
				}
			}
		}()
	}
	sum, err := eng.Run(ctx, engine.RunRequest{
		Shard: 0, ShardCount: 1, Owner: owner, Until: time.Now().Add(d),
		LeaseWait: leaseWait, Tick: 250 * time.Millisecond,
	})
	if err != nil {
		e.t.Fatalf("run: %v", err)
	}
	return sum
}

// runRequest runs eng with req as it is.
func (e *env) runRequest(eng *engine.Engine, req engine.RunRequest) engine.Summary {
	e.t.Helper()
	sum, err := eng.Run(e.t.Context(), req)
	if err != nil {
		e.t.Fatalf("run: %v", err)
	}
	return sum
}

// load returns a host's stored state (nil when it has none).
func (e *env) load(key string) *hostqueue.Host {
	e.t.Helper()
	h, err := e.store.Load(e.t.Context(), key, 100)
	if err != nil {
		if errors.Is(err, hostqueue.ErrNotFound) {
			return nil
		}
		e.t.Fatalf("load %s: %v", key, err)
	}
	return h
}

// dueNow makes a host due at once while keeping its politeness state (last
// fetch, pause, errors, attempts), so a test can check that the worker
// itself, not only the due index, honours that state.
func (e *env) dueNow(key string) {
	e.t.Helper()
	h := e.load(key)
	if h == nil {
		e.t.Fatalf("dueNow %s: no such host", key)
	}
	_, err := e.store.Commit(e.t.Context(), key, hostqueue.Commit{Attempts: h.Attempts,
		Release: true, NextDue: time.Now(), Want: 10, IdleTTL: time.Hour,
		State: politeness.State{LastFetch: h.LastFetch, PauseUntil: h.PauseUntil, Errors: h.Errors},
	})
	if err != nil {
		e.t.Fatalf("dueNow %s: %v", key, err)
	}
}

// site is one loopback HTTP server whose requests are logged with the
// server's clock (as demosite.Request, so demosite.Gaps applies).
type site struct {
	srv  *httptest.Server
	host string

	mu   sync.Mutex
	reqs []demosite.Request
	hdrs []http.Header
}

var nextIP atomic.Int32

// newSite serves h on a loopback address of its own (127.0.1.x), so that
// each site is a distinct host even without the port: on the test's
// in-memory network in virtual, else on the real loopback.
func newSite(t *testing.T, h http.HandlerFunc) *site {
	t.Helper()
	return startSite(t, h, false)
}

func startSite(t *testing.T, h http.HandlerFunc, tls bool) *site {
	t.Helper()
	ip := loopbackIP()
	s := &site{}
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() {
			s.mu.Lock()
			s.reqs = append(s.reqs, demosite.Request{Host: s.host, Path: r.URL.RequestURI(), Start: start, End: time.Now()})
			s.hdrs = append(s.hdrs, r.Header.Clone())
			s.mu.Unlock()
		}()
		h(w, r)
	})
	if n := networkOf(t); n != nil {
		s.srv = n.NewUnstartedServer(ip, logged)
	} else {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatalf("listen on %s: %v", ip, err)
		}
		s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: logged}}
	}
	if tls {
		s.srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // the failed handshakes
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.host = s.srv.Listener.Addr().String()
	t.Cleanup(s.srv.Close)
	return s
}

// url returns the absolute URL of path on the site.
func (s *site) url(path string) string { return "http://" + s.host + path }

func (s *site) requests() []demosite.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// paths lists the requested paths (with query) in order.
func (s *site) paths() []string {
	var out []string
	for _, r := range s.requests() {
		out = append(out, r.Path)
	}
	return out
}

// seen returns a stop condition: the server answered its n-th request a
// moment ago (so the engine has read the answer: a run cancelled while the
// response is still on its way would see a cancelled request instead).
func (s *site) seen(n int) func() bool {
	return func() bool { return settled(s.requests(), n) }
}

// settled reports whether reqs holds n requests, the last answered more
// than 100ms ago.
func settled(reqs []demosite.Request, n int) bool {
	return len(reqs) >= n && time.Since(reqs[len(reqs)-1].End) > 100*time.Millisecond
}

// count returns how many times path was requested.
func (s *site) count(path string) int {
	n := 0
	for _, p := range s.paths() {
		if p == path {
			n++
		}
	}
	return n
}

// header returns the headers of the i-th request.
func (s *site) header(i int) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hdrs[i]
}

// gaps returns, in order, the time from each response's end to the next
// request's start.
func gaps(reqs []demosite.Request) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(reqs); i++ {
		out = append(out, reqs[i].Start.Sub(reqs[i-1].End))
	}
	return out
}

// minGap is the smallest of gaps, or -1 with fewer than two requests.
func minGap(reqs []demosite.Request) time.Duration {
	m := time.Duration(-1)
	for _, g := range gaps(reqs) {
		if m < 0 || g < m {
			m = g
		}
	}
	return m
}

// withRobots answers /robots.txt with status and body and hands every other
// path to h.
func withRobots(status int, body string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			if status == http.StatusOK {
				w.Header().Set("Content-Type", "text/plain")
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
			return
		}
		h(w, r)
	}
}

// page serves a small text page naming its path.
func page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "page %s\n", r.URL.Path)
}

// inBothWorlds runs f twice, as subtests "virtual" and "real": the
// politeness tests that keep the engine honest against the real emulator,
// network and clock, and are exact on the virtual one.
func inBothWorlds(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Run("virtual", func(t *testing.T) {
		t.Parallel()
		virtual(t, f)
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		f(t)
	})
}
