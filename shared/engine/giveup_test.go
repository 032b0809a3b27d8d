package engine_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// probeLog records every request the engine makes, as its fetcher sees
// them: a dead or hanging host keeps no server log of its own.
type probeLog struct {
	mu     sync.Mutex
	probes []probe
}

type probe struct {
	host, path string
	end        time.Time
}

// wrap makes the env's engines record their requests here.
func (l *probeLog) wrap(e *env) {
	e.wrap = func(f engine.Fetcher) engine.Fetcher { return probeFetcher{f: f, log: l} }
}

func (l *probeLog) all() []probe {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]probe(nil), l.probes...)
}

// pages counts the requests that were not for robots.txt.
func (l *probeLog) pages() int {
	n := 0
	for _, p := range l.all() {
		if p.path != "/robots.txt" {
			n++
		}
	}
	return n
}

type probeFetcher struct {
	f   engine.Fetcher
	log *probeLog
}

func (pf probeFetcher) Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	resp, err := pf.f.Fetch(ctx, req)
	u, _ := url.Parse(req.URL)
	pf.log.mu.Lock()
	pf.log.probes = append(pf.log.probes, probe{host: u.Host, path: u.Path, end: time.Now()})
	pf.log.mu.Unlock()
	return resp, err
}

// loopbackIP returns a loopback address no other site of the test binary
// uses.
func loopbackIP() string { return fmt.Sprintf("127.0.1.%d", 2+nextIP.Add(1)%250) }

// deadHost returns host:port of a port nobody listens on: connections are
// refused at once.
func deadHost(t *testing.T) string {
	t.Helper()
	if networkOf(t) != nil {
		return loopbackIP() + ":9" // the in-memory network's ports start above 40000
	}
	ln, err := net.Listen("tcp", loopbackIP()+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// hangingHost returns host:port of a server that accepts connections and
// never answers.
func hangingHost(t *testing.T) string {
	t.Helper()
	var ln net.Listener
	if n := networkOf(t); n != nil {
		ln = n.Listen(loopbackIP())
	} else {
		var err error
		if ln, err = net.Listen("tcp", loopbackIP()+":0"); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// giveUpParams are short-bound parameters: a host gives up 2s after its
// first failure, probed at 200ms, 400ms, then every 500ms.
func giveUpParams() params.Params {
	p := testParams()
	p.GiveUpAfter = 2 * time.Second
	p.FetchDelay = 100 * time.Millisecond
	p.MaxBackoff = 500 * time.Millisecond
	p.FetchTimeout = 300 * time.Millisecond
	p.MaxAttempts = 20
	return p
}

// backoffSteps is how many probes a host that fails at once gets within
// GiveUpAfter: the first, then one per back-off step that starts before
// the bound (the engine's schedule, with requests taking no time).
func backoffSteps(p params.Params) int {
	n, at := 1, time.Duration(0)
	for errs := 1; ; errs++ {
		step := max(p.FetchDelay, 100*time.Millisecond) << min(errs, 30)
		if step <= 0 || step > p.MaxBackoff {
			step = p.MaxBackoff
		}
		at += step
		if at >= p.GiveUpAfter {
			return n
		}
		n++
	}
}

// TestGiveUpPerCause runs one failing host per cause of "no usable answer"
// and checks from the results and the requests made: every queued URL ends
// once, as fetch_error (denied when robots.txt could not be read), naming
// the bound, the number of failed requests and the last failure, no sooner
// than GiveUpAfter after the first failure (at once when the server asks for
// a pause beyond it) and soon after; the host was probed once per back-off
// step, not once per URL; each URL's attempts are its own requests; and the
// host's failure run, pause and error count are cleared.
func TestGiveUpPerCause(t *testing.T) {
	t.Parallel()
	hangPage := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	for _, tc := range []struct {
		name   string
		robots bool
		// host starts the failing host and returns its host:port.
		host       func(t *testing.T) string
		scheme     string
		wantStatus result.Status
		wantErr    []string
		// immediate: the host gives up at its first failure.
		immediate bool
		// early is how much sooner than GiveUpAfter the host may give up
		// (a Retry-After whose pause would end past the bound).
		early time.Duration
		// robotsAnswers: robots.txt is read (one request that is no
		// failure).
		robotsAnswers bool
		// maxProbes overrides the back-off schedule's count.
		maxProbes int
		// minGap is the least time between two probes.
		minGap time.Duration
	}{
		{
			name: "connection refused, robots.txt unreachable", robots: true, host: deadHost,
			wantStatus: result.StatusDenied, wantErr: []string{"connection refused", "robots.txt", "RFC 9309"},
		},
		{
			name: "connection refused", host: deadHost,
			wantStatus: result.StatusFetchError, wantErr: []string{"connection refused"},
		},
		{
			name: "accept and hang, robots.txt unreachable", robots: true, host: hangingHost,
			wantStatus: result.StatusDenied, wantErr: []string{"robots.txt", "no complete answer within 300ms"},
		},
		{
			name: "pages time out", robots: true,
			host:       func(t *testing.T) string { return newSite(t, withRobots(404, "", hangPage)).host },
			wantStatus: result.StatusFetchError, wantErr: []string{"no complete answer within 300ms"}, robotsAnswers: true,
		},
		{
			name: "TLS handshake fails, robots.txt unreachable", robots: true, scheme: "https",
			host:       func(t *testing.T) string { return newTLSSite(t, page).host },
			wantStatus: result.StatusDenied, wantErr: []string{"robots.txt", "certificate"},
		},
		{
			name: "robots.txt 503 forever", robots: true,
			host:       func(t *testing.T) string { return newSite(t, withRobots(503, "", page)).host },
			wantStatus: result.StatusDenied, wantErr: []string{"robots.txt: server answered 503"},
		},
		{
			name: "robots.txt 429 with Retry-After", robots: true,
			host: func(t *testing.T) string {
				return newSite(t, func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/robots.txt" {
						status(429, "Retry-After", "1")(w)
						return
					}
					page(w, r)
				}).host
			},
			// Probes at 0, 1s and 2s; the third pause would end past
			// the bound: given up then.
			wantStatus: result.StatusDenied, wantErr: []string{"robots.txt: server answered 429", "Retry-After"},
			maxProbes: 3, minGap: time.Second, early: time.Second,
		},
		{
			name: "pages answer 500", robots: true,
			host:       func(t *testing.T) string { return newSite(t, withRobots(404, "", status500)).host },
			wantStatus: result.StatusFetchError, wantErr: []string{"server answered 500"}, robotsAnswers: true,
		},
		{
			name: "pages answer 429 with a Retry-After beyond the bound", robots: true,
			host: func(t *testing.T) string {
				return newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
					status(429, "Retry-After", "3600")(w)
				})).host
			},
			wantStatus: result.StatusFetchError, wantErr: []string{"Retry-After", "beyond GiveUpAfter", "server answered 429"},
			immediate: true, maxProbes: 1, robotsAnswers: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := giveUpParams()
				p.RespectRobots = tc.robots
				e := newEnv(t, p)
				var log probeLog
				log.wrap(e)
				host := tc.host(t)
				scheme := tc.scheme
				if scheme == "" {
					scheme = "http"
				}
				var urls []string
				for i := range 5 {
					urls = append(urls, fmt.Sprintf("%s://%s/p%d", scheme, host, i))
				}
				e.seed(urls...)
				e.runUntil(len(urls), p.GiveUpAfter+10*time.Second)

				probes := log.all()
				if len(probes) == 0 {
					t.Fatalf("no request made; results:%s", describe(e.pub.all()))
				}
				failures := probes
				if tc.robotsAnswers {
					failures = probes[1:]
				}
				first := failures[0].end
				attempts := 0
				for _, u := range urls {
					res := e.pub.one(t, u)
					attempts += res.Attempts
					if res.Status != tc.wantStatus {
						t.Errorf("%s: %s %q, want %s", u, res.Status, res.Error, tc.wantStatus)
					}
					if !tc.immediate && tc.early == 0 && !strings.Contains(res.Error, "host gave no usable answer for") {
						t.Errorf("%s: error %q does not say the host gave no usable answer", u, res.Error)
					}
					if !strings.Contains(res.Error, fmt.Sprintf("(%d attempts)", len(failures))) {
						t.Errorf("%s: error %q does not count the host's %d failed requests", u, res.Error, len(failures))
					}
					for _, want := range tc.wantErr {
						if !strings.Contains(strings.ToLower(res.Error), strings.ToLower(want)) {
							t.Errorf("%s: error %q does not name %q", u, res.Error, want)
						}
					}
					waited := res.FetchedAt.Sub(first)
					if tc.immediate {
						if waited >= p.GiveUpAfter/2 {
							t.Errorf("%s ended %v after the first failure, want at once (Retry-After beyond the bound)", u, waited)
						}
					} else if waited < p.GiveUpAfter-tc.early-slack || waited > p.GiveUpAfter+p.FetchTimeout+3*time.Second {
						t.Errorf("%s ended %v after the first failure, want GiveUpAfter %v (plus at most a request and scheduling)", u, waited, p.GiveUpAfter)
					}
				}
				if attempts != log.pages() {
					t.Errorf("the results' attempts add up to %d, want the %d page requests made", attempts, log.pages())
				}
				limit := backoffSteps(p)
				if tc.maxProbes > 0 {
					limit = tc.maxProbes
				}
				if len(failures) > limit || (!tc.immediate && len(failures) < 2) {
					t.Errorf("%d failed requests in all for %d urls, want 2..%d (one per back-off step)", len(failures), len(urls), limit)
				}
				for i := 1; i < len(failures); i++ {
					if g := failures[i].end.Sub(failures[i-1].end); g < max(tc.minGap, p.FetchDelay)-slack {
						t.Errorf("probe %d came %v after the previous one, want >= %v", i, g, max(tc.minGap, p.FetchDelay))
					}
				}
				if h := e.load(host); h != nil && (h.Pending != 0 || !h.FailingSince.IsZero() || h.LastError != "" || h.Errors != 0 || !h.PauseUntil.IsZero()) {
					t.Errorf("stored host after the give-up %+v, want no queue, failure run, errors or pause", h)
				}
			})
		})
	}
}

func status500(w http.ResponseWriter, _ *http.Request) { status(500)(w) }

// newTLSSite serves h over TLS with the test server's own certificate,
// which the fetcher does not trust: every handshake fails.
func newTLSSite(t *testing.T, h http.HandlerFunc) *site {
	t.Helper()
	return startSite(t, h, true)
}

// TestGiveUpResetByUsableAnswer checks that a usable answer ends the
// failure run: a host that fails for longer than GiveUpAfter in all, but
// answers in between, is never given up.
func TestGiveUpResetByUsableAnswer(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := giveUpParams()
		p.MaxBackoff = 300 * time.Millisecond
		e := newEnv(t, p)
		fail := func(n int) []func(http.ResponseWriter) {
			var out []func(http.ResponseWriter)
			for range n {
				out = append(out, status(500))
			}
			return out
		}
		// /a fails 4 times (about 1s), /b 5 times (about 1.4s): 2.4s or more
		// of failures, over GiveUpAfter, broken by /a's page. /c answers 404:
		// usable too.
		f := newFlaky(map[string][]func(http.ResponseWriter){"/a": fail(4), "/b": fail(5)},
			map[string]func(http.ResponseWriter){"/c": status(404)})
		s := newSite(t, withRobots(404, "", f.serve))
		e.seed(s.url("/a"), s.url("/b"), s.url("/c"))
		e.runUntil(3, 20*time.Second)

		for path, want := range map[string]result.Status{"/a": result.StatusFetched, "/b": result.StatusFetched, "/c": result.StatusFetchError} {
			if res := e.pub.one(t, s.url(path)); res.Status != want || strings.Contains(res.Error, "no usable answer") {
				t.Errorf("%s: %s %q, want %s (the host answered in between)", path, res.Status, res.Error, want)
			}
		}
		reqs := s.requests()
		var failing time.Duration
		for i := 1; i < len(reqs); i++ {
			if reqs[i].Path != "/robots.txt" && reqs[i].Path != "/c" {
				failing += reqs[i].End.Sub(reqs[i-1].End)
			}
		}
		if failing < p.GiveUpAfter {
			t.Errorf("failures spanned %v in all, want more than GiveUpAfter %v for the test to mean something", failing, p.GiveUpAfter)
		}
		if h := e.load(s.host); h == nil || !h.FailingSince.IsZero() || h.LastError != "" {
			t.Errorf("stored host %+v, want no failure run after usable answers", h)
		}
	})
}

// TestGiveUpFreshBoundAfterwards checks that URLs queued after a host gave
// up get a failure run of their own: they are probed again and given up no
// sooner than GiveUpAfter after their own first failure.
func TestGiveUpFreshBoundAfterwards(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := giveUpParams()
		p.GiveUpAfter = 1500 * time.Millisecond
		e := newEnv(t, p)
		var log probeLog
		log.wrap(e)
		s := newSite(t, withRobots(404, "", status500))
		e.seed(s.url("/a"), s.url("/b"))
		e.runUntil(2, 15*time.Second)
		if res := e.pub.one(t, s.url("/b")); !strings.Contains(res.Error, "no usable answer") {
			t.Fatalf("/b: %s %q, want given up", res.Status, res.Error)
		}
		before := len(log.all())

		e.seed(s.url("/late"))
		e.runUntil(3, 15*time.Second)
		probes := log.all()[before:]
		if len(probes) < 2 {
			t.Fatalf("%d requests for the URL queued after the give-up, want it probed again, more than once", len(probes))
		}
		res := e.pub.one(t, s.url("/late"))
		if !strings.Contains(res.Error, "no usable answer") || res.Attempts != len(probes) {
			t.Errorf("/late: %s attempts=%d %q, want given up after its own %d attempts", res.Status, res.Attempts, res.Error, len(probes))
		}
		if waited := res.FetchedAt.Sub(probes[0].end); waited < p.GiveUpAfter-slack {
			t.Errorf("/late given up %v after its first failure, want a fresh bound of %v", waited, p.GiveUpAfter)
		}
	})
}

// hookPublisher calls before ahead of publishing.
type hookPublisher struct {
	next   hostqueue.Publisher
	before func(rs []result.Result)
}

func (h hookPublisher) Publish(ctx context.Context, rs []result.Result) error {
	h.before(rs)
	return h.next.Publish(ctx, rs)
}

// TestGiveUpBulk checks the bulk ending of a long queue: 250 URLs (three
// rounds) on a host whose robots.txt answers 503 end denied, one result
// each, after robots.txt was asked once per back-off step and no page was;
// a URL appended while the queue is being given up is not given up with
// the old failure run but stays queued, on a host with no failure run.
func TestGiveUpBulk(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := giveUpParams()
		p.GiveUpAfter = 1500 * time.Millisecond
		e := newEnv(t, p)
		var log probeLog
		log.wrap(e)
		s := newSite(t, withRobots(503, "", page))
		var urls []string
		for i := range 250 {
			urls = append(urls, s.url(fmt.Sprintf("/p%d", i)))
		}
		e.seed(urls...)
		late := s.url("/late")
		var once sync.Once
		var mu sync.Mutex
		var publishes []int
		eng := e.engine()
		eng.Publisher = hookPublisher{next: e.pub, before: func(rs []result.Result) {
			mu.Lock()
			publishes = append(publishes, len(rs))
			mu.Unlock()
			once.Do(func() {
				_, err := e.store.Append(t.Context(), hostqueue.AppendRequest{
					Key: s.host, Entries: []hostqueue.Entry{{ID: "late", URL: late}}, Limit: p.PersistLimit, Due: time.Now(),
				})
				if err != nil {
					t.Errorf("append during the give-up: %v", err)
				}
			})
		}}
		e.runWith(eng, "owner", 20*time.Second, 0, e.pub.has(len(urls)))

		for _, u := range urls {
			if res := e.pub.one(t, u); res.Status != result.StatusDenied || !strings.Contains(res.Error, "no usable answer") {
				t.Fatalf("%s: %s %q, want denied by the give-up", u, res.Status, res.Error)
			}
		}
		if rs := e.pub.byURL()[late]; len(rs) != 0 {
			t.Errorf("the URL appended during the give-up ended with the old failure run:%s", describe(rs))
		}
		mu.Lock()
		if len(publishes) < 3 {
			t.Errorf("given up in %d publishes %v, want rounds", len(publishes), publishes)
		}
		mu.Unlock()
		if n := log.pages(); n != 0 {
			t.Errorf("%d pages requested although robots.txt never answered", n)
		}
		if n := len(log.all()); n > backoffSteps(p) {
			t.Errorf("robots.txt requested %d times, want at most one per back-off step (%d)", n, backoffSteps(p))
		}
		h := e.load(s.host)
		if h == nil || h.Pending != 1 || len(h.Head) != 1 || h.Head[0].URL != late {
			t.Fatalf("stored host %+v, want only the late URL queued", h)
		}
		if !h.FailingSince.IsZero() || h.Errors != 0 || !h.PauseUntil.IsZero() || h.Due.IsZero() {
			t.Errorf("stored host failing since %v, errors %d, paused until %v, due %v: want a fresh, due host", h.FailingSince, h.Errors, h.PauseUntil, h.Due)
		}
	})
}

// notFoundFetcher answers "no such host" for one name, as a resolver
// would, without a lookup; other hosts go to the real fetcher.
type notFoundFetcher struct {
	f       engine.Fetcher
	name    string
	lookups *int
	mu      *sync.Mutex
}

func (n notFoundFetcher) Fetch(ctx context.Context, req fetch.Request) (*fetch.Response, error) {
	u, _ := url.Parse(req.URL)
	if u.Hostname() != n.name {
		return n.f.Fetch(ctx, req)
	}
	n.mu.Lock()
	*n.lookups++
	n.mu.Unlock()
	return nil, &fetch.Error{Kind: fetch.KindDNS, Op: "dial", URL: req.URL,
		Err: &net.DNSError{Err: "no such host", Name: n.name, IsNotFound: true}}
}

// TestUnresolvableHostLooksUpOnce checks that a name that does not resolve
// costs one lookup per session, not one per URL: every queued URL ends as
// fetch_error saying so, with or without robots.txt.
func TestUnresolvableHostLooksUpOnce(t *testing.T) {
	t.Parallel()
	for _, robots := range []bool{true, false} {
		t.Run(fmt.Sprintf("robots %v", robots), func(t *testing.T) {
			t.Parallel()
			virtual(t, func(t *testing.T) {
				p := testParams()
				p.RespectRobots = robots
				e := newEnv(t, p)
				var mu sync.Mutex
				lookups := 0
				e.wrap = func(f engine.Fetcher) engine.Fetcher {
					return notFoundFetcher{f: f, name: "gone.test", lookups: &lookups, mu: &mu}
				}
				var urls []string
				for i := range 25 {
					urls = append(urls, fmt.Sprintf("http://gone.test/p%d", i))
				}
				e.seed(urls...)
				e.runUntil(len(urls), 15*time.Second)
				for _, u := range urls {
					if res := e.pub.one(t, u); res.Status != result.StatusFetchError || !strings.Contains(res.Error, "no such host") {
						t.Errorf("%s: %s %q, want fetch_error naming no such host", u, res.Status, res.Error)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if lookups != 1 {
					t.Errorf("%d lookups for %d urls of one name, want 1", lookups, len(urls))
				}
			})
		})
	}
}

// TestGiveUpAsksAfterRestart checks that a failure run that outlasted
// GiveUpAfter while no run was under way gives no host up unasked: the
// next run probes each host once; the one that answers now has its URLs
// fetched, the one that still fails is given up after that one probe, not
// probed on (runs further apart than the bound still end).
func TestGiveUpAsksAfterRestart(t *testing.T) {
	t.Parallel()
	inBothWorlds(t, func(t *testing.T) {
		p := giveUpParams()
		e := newEnv(t, p)
		var down atomic.Bool
		down.Store(true)
		healed := newSite(t, withRobots(404, "", func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				status500(w, r)
				return
			}
			page(w, r)
		}))
		dead := newSite(t, withRobots(404, "", status500))
		pages := func(s *site) int { return len(s.paths()) - s.count("/robots.txt") }
		e.seed(healed.url("/a"), healed.url("/b"), dead.url("/c"), dead.url("/d"))

		// The first run stops after two failures of each host, well within
		// the bound.
		e.runUntilSeen(func() bool {
			return pages(healed) >= 2 && pages(dead) >= 2 && settled(healed.requests(), 1) && settled(dead.requests(), 1)
		}, 10*time.Second)
		if rs := e.pub.all(); len(rs) > 0 {
			t.Fatalf("first run ended %d urls (%s), want none: it stops within GiveUpAfter", len(rs), describe(rs))
		}
		for _, s := range []*site{healed, dead} {
			if h := e.load(s.host); h == nil || h.FailingSince.IsZero() {
				t.Fatalf("%s stored %+v, want a failure run under way", s.host, h)
			}
		}
		// Nothing runs for longer than the bound; then one host answers.
		time.Sleep(p.GiveUpAfter + 500*time.Millisecond)
		down.Store(false)
		deadBefore := pages(dead)
		e.runUntil(4, 15*time.Second)

		for _, path := range []string{"/a", "/b"} {
			if res := e.pub.one(t, healed.url(path)); res.Status != result.StatusFetched {
				t.Errorf("%s: %s %q, want fetched: the host answers now and was never asked in this run", path, res.Status, res.Error)
			}
		}
		for _, path := range []string{"/c", "/d"} {
			if res := e.pub.one(t, dead.url(path)); !strings.Contains(res.Error, "no usable answer") {
				t.Errorf("%s: %s %q, want given up", path, res.Status, res.Error)
			}
		}
		if n := pages(dead) - deadBefore; n != 1 {
			t.Errorf("the failing host got %d requests in the second run, want one probe before the give-up", n)
		}
	})
}
