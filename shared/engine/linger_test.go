package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// loadCounter is the env's store, counting Load calls per key: each host
// session (one worker) loads its host exactly once.
type loadCounter struct {
	hostqueue.Store
	mu    sync.Mutex
	loads map[string]int
}

func (s *loadCounter) Load(ctx context.Context, key string, want int) (*hostqueue.Host, error) {
	s.mu.Lock()
	if s.loads == nil {
		s.loads = map[string]int{}
	}
	s.loads[key]++
	s.mu.Unlock()
	return s.Store.Load(ctx, key, want)
}

func (s *loadCounter) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads[key]
}

// checkReleased fails unless the host has left the due index with an empty
// queue.
func checkReleased(t *testing.T, e *env, key string) {
	t.Helper()
	h := e.load(key)
	if h == nil {
		t.Errorf("host %s: no state left, want its politeness state kept", key)
		return
	}
	if !h.Due.IsZero() || h.Pending != 0 {
		t.Errorf("host %s: due %v with %d pending at the end, want it out of the due index with nothing pending", key, h.Due, h.Pending)
	}
}

// checkFetched fails unless every url has exactly one fetched result.
func checkFetched(t *testing.T, pub *recorder, urls ...string) {
	t.Helper()
	for _, u := range urls {
		if r := pub.one(t, u); r.Status != result.StatusFetched {
			t.Errorf("%s: %s (err %q), want fetched", u, r.Status, r.Error)
		}
	}
}

// TestLingerJoinsLateURLs: URLs that arrive for a host while its worker
// lingers after draining the queue are fetched by that same worker in the
// same session: one Load, one dispatch, one robots.txt, the delay kept
// between the two batches, and the host's due time (its due-index key) left
// alone until the final release takes it out of the index.
func TestLingerJoinsLateURLs(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams() // CheckHostPeriod 1.5s
		e := newEnv(t, p)
		// A linger lasts until NextHostCheck, which is anywhere from a moment
		// to two periods away depending on where in its period the queue
		// drains. The server holds the last response of each batch until the
		// host's check time is at least a second away, so the late URLs are
		// appended (and the state below is read) while the worker lingers.
		var key atomic.Pointer[string]
		const lingerAtLeast = time.Second
		hold := func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/b" || r.URL.Path == "/d" {
				for k := key.Load(); time.Until(hostqueue.NextHostCheck(time.Now(), *k, p.CheckHostPeriod)) < lingerAtLeast; {
					time.Sleep(5 * time.Millisecond)
				}
			}
			page(w, r)
		}
		s := newSite(t, withRobots(http.StatusOK, "User-agent: *\nAllow: /\n", hold))
		hostKey := hostqueue.QueueKey(s.host, false)
		key.Store(&hostKey)
		first := []string{s.url("/a"), s.url("/b")}
		late := []string{s.url("/c"), s.url("/d")}
		e.seed(first...)
		seeded := e.load(hostKey)
		if seeded == nil || seeded.Due.IsZero() {
			t.Fatalf("seeded host %s is not due: %+v", hostKey, seeded)
		}

		// Append the late URLs as an ingest would, as soon as the first batch
		// is published (the worker then lingers for at least a second).
		type appended struct {
			at  time.Time
			res hostqueue.IngestResult
			err string
		}
		appendDone := make(chan appended, 1)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		go func() {
			for len(e.pub.all()) < len(first) {
				if ctx.Err() != nil {
					appendDone <- appended{err: "the first batch was never published"}
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			var msgs []urlmsg.Message
			for i, u := range late {
				m, err := urlmsg.Validate(urlmsg.Input{URL: u})
				if err != nil {
					appendDone <- appended{err: err.Error()}
					return
				}
				m.ID = urlmsg.MakeID("late-"+t.Name(), i, m.URL)
				msgs = append(msgs, m)
			}
			in := &hostqueue.Ingester{Store: e.store, Publisher: e.pub, Now: time.Now}
			res := in.Ingest(ctx, hostqueue.IngestParams{PersistLimit: p.PersistLimit}, msgs)
			appendDone <- appended{at: time.Now(), res: res}
		}()

		// Stop once all four results are out: the worker is then lingering
		// again after its second batch; note the host's stored state then,
		// before the run's end makes the worker commit.
		var mu sync.Mutex
		var during *hostqueue.Host
		var duringErr error
		stop := func() bool {
			if len(e.pub.all()) < len(first)+len(late) {
				return false
			}
			h, err := e.store.Load(ctx, hostKey, 10)
			mu.Lock()
			during, duringErr = h, err
			mu.Unlock()
			return true
		}
		store := &loadCounter{Store: e.store}
		eng := e.engine()
		eng.Store = store
		sum := e.runWith(eng, "owner-"+t.Name(), 20*time.Second, 0, stop)

		a := <-appendDone
		if a.err != "" {
			t.Fatalf("late append: %s", a.err)
		}
		if len(a.res.Failed) != 0 || a.res.Appended != len(late) {
			t.Fatalf("late append: %+v, want %d appended", a.res, len(late))
		}
		reqs := s.requests()
		t.Logf("requests %v; late URLs appended %v after the first batch's last response", s.paths(), a.at.Sub(reqs[min(2, len(reqs)-1)].End))

		checkFetched(t, e.pub, append(append([]string(nil), first...), late...)...)
		if n := len(e.pub.all()); n != len(first)+len(late) {
			t.Errorf("%d results, want %d:%s", n, len(first)+len(late), describe(e.pub.all()))
		}
		// One session: one dispatch, one Load of the host.
		if sum.Hosts != 1 {
			t.Errorf("summary counts %d host sessions, want 1 (the late URLs joining the lingering worker)", sum.Hosts)
		}
		if n := store.count(hostKey); n != 1 {
			t.Errorf("host loaded %d times, want once (one session)", n)
		}
		if n := s.count("/robots.txt"); n != 1 {
			t.Errorf("robots.txt requested %d times, want once", n)
		}
		if len(reqs) != 1+len(first)+len(late) {
			t.Errorf("server saw %d requests %v, want robots.txt and %d pages", len(reqs), s.paths(), len(first)+len(late))
		}
		for i, g := range gaps(reqs) {
			if g < p.FetchDelay-slack {
				t.Errorf("gap %d (%s -> %s) is %v, want >= FetchDelay %v", i, reqs[i].Path, reqs[i+1].Path, g, p.FetchDelay)
			}
		}
		// The late URLs were fetched after they were appended (not a lucky
		// first Load that already held them).
		if len(reqs) == 5 && reqs[3].Start.Before(a.at) {
			t.Errorf("the first late URL was requested at %v, before it was appended at %v", reqs[3].Start, a.at)
		}

		// While lingering after the second batch, the host was still due at
		// its original due time: carrying on wrote no new due time (no
		// due-index write), and its done entries were not committed yet.
		mu.Lock()
		h, herr := during, duringErr
		mu.Unlock()
		switch {
		case herr != nil:
			t.Errorf("load %s while lingering: %v", hostKey, herr)
		case h == nil:
			t.Errorf("the run stopped before all results were out")
		case !h.Due.Equal(seeded.Due):
			t.Errorf("host due at %v while lingering after the late batch, want its due time untouched (%v)", h.Due, seeded.Due)
		}
		checkReleased(t, e, hostKey)
	})
}

// TestLingerEndsWhenStarved: with room for one host only, the worker that
// drained its host stops lingering as soon as another host is due and waits
// for the slot, instead of holding it for its whole linger.
func TestLingerEndsWhenStarved(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.MaxConcurrentHosts = 1
		// A linger lasts until NextHostCheck: up to two periods, and with an
		// hour's period practically never less than a minute.
		p.CheckHostPeriod = time.Hour
		e := newEnv(t, p)
		a := newSite(t, page)
		b := newSite(t, page)
		ua, ub := a.url("/one"), b.url("/one")
		e.seed(ua, ub)

		sum, _ := runBounded(e, 15*time.Second, 20*time.Second, e.pub.has(2))

		checkFetched(t, e.pub, ua, ub)
		ra, rb := a.requests(), b.requests()
		if len(ra) == 0 || len(rb) == 0 {
			t.Fatalf("requests: %d to a, %d to b; want both hosts worked", len(ra), len(rb))
		}
		// Whichever host got the slot first, the other's first request must
		// follow the first's last response closely, not after its linger.
		firstReqs, secondReqs := ra, rb
		if rb[0].Start.Before(ra[0].Start) {
			firstReqs, secondReqs = rb, ra
		}
		if !secondReqs[0].Start.After(firstReqs[len(firstReqs)-1].End) {
			t.Errorf("both hosts worked at once (%v and %v) with MaxConcurrentHosts 1", firstReqs, secondReqs)
		}
		if wait := secondReqs[0].Start.Sub(firstReqs[len(firstReqs)-1].End); wait > 5*time.Second {
			t.Errorf("second host's first request came %v after the first host's last response, want < 5s (the linger must yield the slot)", wait)
		} else {
			t.Logf("second host started %v after the first host's last response", wait)
		}
		if sum.Hosts != 2 {
			t.Errorf("summary counts %d host sessions, want 2", sum.Hosts)
		}
		checkReleased(t, e, hostqueue.QueueKey(a.host, false))
		checkReleased(t, e, hostqueue.QueueKey(b.host, false))
	})
}

// TestLingerEndsAtRunEnd: a lingering worker does not hold the run past its
// Until, and its commit releases the drained host.
func TestLingerEndsAtRunEnd(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.CheckHostPeriod = time.Hour // the linger would last up to two hours
		e := newEnv(t, p)
		s := newSite(t, page)
		u := s.url("/only")
		e.seed(u)

		const until = 3 * time.Second
		_, took := runBounded(e, until, until+12*time.Second, nil)

		checkFetched(t, e.pub, u)
		if took > until+3*time.Second {
			t.Errorf("run took %v with Until %v from its start, want it to end within a few seconds of Until", took, until)
		}
		t.Logf("run took %v (Until %v)", took, until)
		checkReleased(t, e, hostqueue.QueueKey(s.host, false))
	})
}

// runBounded runs shard 0 of 1 on a new engine until d from now (or stop),
// as runWith does, but cancels the run after limit whatever its workers do,
// so that a linger that ignores the run's end fails the test instead of
// hanging it for up to two (long) periods. It returns how long Run took.
func runBounded(e *env, d, limit time.Duration, stop func() bool) (engine.Summary, time.Duration) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), limit)
	defer cancel()
	if stop != nil {
		go func() {
			for ctx.Err() == nil && !stop() {
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
		}()
	}
	start := time.Now()
	sum, err := e.engine().Run(ctx, engine.RunRequest{
		Shard: 0, ShardCount: 1, Owner: "owner-" + e.t.Name(), Until: start.Add(d), Tick: 250 * time.Millisecond,
	})
	took := time.Since(start)
	if err != nil {
		e.t.Fatalf("run: %v", err)
	}
	return sum, took
}

// TestLingerPollTakesUpLateURLs: with Engine.LingerPoll (local mode's
// embedded store), URLs appended while a worker lingers are fetched after
// the host's delay, not when the linger ends: the server holds /b until the
// host's check time is at least a second away, so without the poll the gap
// before /c would be at least that second.
func TestLingerPollTakesUpLateURLs(t *testing.T) {
	t.Parallel()
	for _, told := range []bool{false, true} {
		name := "polling the store"
		if told {
			name = "told by ingest (Appends), no polling"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lingerTakesUpLateURLs(t, told)
		})
	}
}

func lingerTakesUpLateURLs(t *testing.T, told bool) {
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		var key atomic.Pointer[string]
		const lingerAtLeast = time.Second
		hold := func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/b" {
				for k := key.Load(); time.Until(hostqueue.NextHostCheck(time.Now(), *k, p.CheckHostPeriod)) < lingerAtLeast; {
					time.Sleep(5 * time.Millisecond)
				}
			}
			page(w, r)
		}
		s := newSite(t, withRobots(http.StatusOK, "User-agent: *\nAllow: /\n", hold))
		hostKey := hostqueue.QueueKey(s.host, false)
		key.Store(&hostKey)
		first := []string{s.url("/a"), s.url("/b")}
		late := []string{s.url("/c")}
		e.seed(first...)
		appends := &engine.Appends{}
		var ingestStore hostqueue.Store = e.store
		if told {
			ingestStore = appends.Telling(e.store)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		appended := make(chan error, 1)
		go func() {
			for len(e.pub.all()) < len(first) {
				if ctx.Err() != nil {
					appended <- ctx.Err()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			m, err := urlmsg.Validate(urlmsg.Input{URL: late[0]})
			if err != nil {
				appended <- err
				return
			}
			m.ID = urlmsg.MakeID("poll-"+t.Name(), 0, m.URL)
			in := &hostqueue.Ingester{Store: ingestStore, Publisher: e.pub, Now: time.Now}
			if res := in.Ingest(ctx, hostqueue.IngestParams{PersistLimit: p.PersistLimit}, []urlmsg.Message{m}); len(res.Failed) != 0 || res.Appended != 1 {
				appended <- fmt.Errorf("append: %+v", res)
				return
			}
			appended <- nil
		}()
		eng := e.engine()
		loads := &loadCounter{Store: e.store}
		eng.Store = loads
		if told {
			eng.Appends = appends
		} else {
			eng.LingerPoll = 100 * time.Millisecond
		}
		sum := e.runWith(eng, "owner-"+t.Name(), 20*time.Second, 0, func() bool {
			return len(e.pub.all()) >= len(first)+len(late)
		})
		if err := <-appended; err != nil {
			t.Fatalf("late append: %v", err)
		}
		checkFetched(t, e.pub, append(append([]string(nil), first...), late...)...)
		if sum.Hosts != 1 {
			t.Errorf("summary counts %d host sessions, want 1", sum.Hosts)
		}
		reqs := s.requests()
		if len(reqs) != 4 {
			t.Fatalf("server saw %v, want robots.txt and 3 pages", s.paths())
		}
		if g := reqs[3].Start.Sub(reqs[2].End); g >= lingerAtLeast || g < p.FetchDelay-slack {
			t.Errorf("gap from /b to /c is %v, want about FetchDelay %v plus a poll, well under the linger (>= %v)", g, p.FetchDelay, lingerAtLeast)
		}
		// Told, the session reads the host once, at its start (the
		// appends since each read close the channel it watches), where
		// polling reads it every LingerPoll.
		if n := loads.count(hostKey); told && n != 1 {
			t.Errorf("%d loads of the host, want the session's one, no polling", n)
		}
		if n := appends.Watched(); n != 0 {
			t.Errorf("%d keys still watched after the run, want none", n)
		}
	})
}

// TestFinishedHostDoesNotLinger: a host no URL will come to any more
// (Engine.Finished) is released as soon as its queue is emptied, without
// waiting for late URLs, in one commit.
func TestFinishedHostDoesNotLinger(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		p.CheckHostPeriod = time.Minute // a linger would hold the worker a minute
		e := newEnv(t, p)
		s := newSite(t, page)
		e.seed(s.url("/1"))
		eng := e.engine()
		eng.Finished = func(string) bool { return true }
		start := time.Now()
		e.runWith(eng, "owner", 5*time.Minute, 0, func() bool {
			now, _ := eng.Workers()
			return len(e.pub.all()) >= 1 && now == 0
		})
		checkFetched(t, e.pub, s.url("/1"))
		if took := time.Since(start); took >= p.CheckHostPeriod {
			t.Errorf("the worker ended %s after the start, want it released before a linger of %s", took, p.CheckHostPeriod)
		}
		if h := e.load(s.host); h != nil && h.Pending != 0 {
			t.Errorf("host state %+v, want its queue empty", h)
		}
	})
}
