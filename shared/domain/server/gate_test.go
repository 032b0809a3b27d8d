package server_test

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/server"
)

// bubbleClock is the wall clock, which runs on the synctest bubble's fake
// time: sleeps take no real time and every test is exact.
type bubbleClock struct{}

func (bubbleClock) Now() time.Time { return time.Now() }
func (bubbleClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var (
	shared = netip.MustParseAddr("192.0.2.1")
	other  = netip.MustParseAddr("192.0.2.2")
)

// span is one request as the server saw it.
type span struct{ start, end time.Time }

// hammer sends n requests from each of hosts at once through g, each
// taking hold, and returns them in start order.
func hammer(t *testing.T, g *server.Gate, s params.Server, hosts, n int, hold time.Duration) []span {
	t.Helper()
	var mu sync.Mutex
	var spans []span
	var wg sync.WaitGroup
	for h := range hosts {
		host := string(rune('a'+h)) + ".example"
		wg.Go(func() {
			for range n {
				p, err := g.Acquire(context.Background(), host, shared, s)
				if err != nil {
					t.Error(err)
					return
				}
				sp := span{start: time.Now()}
				time.Sleep(hold)
				sp.end = time.Now()
				p.Leave(200)
				mu.Lock()
				spans = append(spans, sp)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	return spans
}

func TestGateSpacesOneAddress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := server.New(bubbleClock{})
		s := params.Server{Delay: 200 * time.Millisecond, Connections: 1}
		spans := hammer(t, g, s, 8, 5, 30*time.Millisecond)
		if len(spans) != 40 {
			t.Fatalf("%d requests, want 40", len(spans))
		}
		for i := 1; i < len(spans); i++ {
			if gap := spans[i].start.Sub(spans[i-1].start); gap < s.Delay {
				t.Errorf("requests %d and %d started %v apart, want at least %v", i-1, i, gap, s.Delay)
			}
			if spans[i].start.Before(spans[i-1].end.Add(s.Delay)) {
				t.Errorf("request %d started %v after the previous one ended, want at least %v", i, spans[i].start.Sub(spans[i-1].end), s.Delay)
			}
		}
	})
}

func TestGateConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := server.New(bubbleClock{})
		s := params.Server{Delay: 100 * time.Millisecond, Connections: 2}
		spans := hammer(t, g, s, 6, 3, time.Second)
		most := 0
		for _, a := range spans {
			n := 0
			for _, b := range spans {
				if !b.start.After(a.start) && b.end.After(a.start) {
					n++
				}
			}
			most = max(most, n)
		}
		if most != 2 {
			t.Errorf("at most %d requests in flight, want 2 (ServerConnections)", most)
		}
		for i := 1; i < len(spans); i++ {
			if gap := spans[i].start.Sub(spans[i-1].start); gap < s.Delay {
				t.Errorf("starts %v apart, want at least %v", gap, s.Delay)
			}
		}
	})
}

// A run cannot know what the one before it sent: each address's first
// request waits a delay from the opening.
func TestGateStartsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := server.New(bubbleClock{})
		open := time.Now()
		g.Open(open)
		s := params.Server{Delay: 300 * time.Millisecond, Connections: 1}
		p, _ := g.Acquire(context.Background(), "a.example", shared, s)
		if got := time.Since(open); got != s.Delay {
			t.Errorf("first request after %v, want %v", got, s.Delay)
		}
		p.Leave(200)
		// Later openings close again only addresses idle since.
		time.Sleep(time.Second)
		g.Open(time.Now())
		before := time.Now()
		p, _ = g.Acquire(context.Background(), "a.example", shared, s)
		p.Leave(0)
		if got := time.Since(before); got != s.Delay {
			t.Errorf("first request of a new run after %v, want %v", got, s.Delay)
		}
	})
}

func TestGateOffAndBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := server.New(bubbleClock{})
		g.Open(time.Now())
		before := time.Now()
		for range 10 {
			p, err := g.Acquire(context.Background(), "cdn.example", shared, params.Server{})
			if p != nil || err != nil {
				t.Fatalf("no gate: Acquire = %v, %v, want nil, nil", p, err)
			}
			p.Leave(0)
		}
		if time.Since(before) != 0 {
			t.Error("requests without a gate waited")
		}
		s := params.Server{Delay: time.Minute, Connections: 1}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := g.Acquire(ctx, "a.example", shared, s); err == nil {
			t.Fatal("Acquire past its context's deadline succeeded")
		}
		if got := time.Since(before); got != time.Second {
			t.Errorf("a bounded wait took %v, want the context's 1s", got)
		}
	})
}

// The engine claims the address it expects; the fetcher enters where the
// connection really goes: the same address costs no second wait, another
// one gives the claim back and waits there.
func TestGateClaimAndEnter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := server.New(bubbleClock{})
		s := params.Server{Delay: 200 * time.Millisecond, Connections: 1}
		claim, _ := g.Acquire(context.Background(), "a.example", shared, s)
		ctx := server.WithClaim(context.Background(), claim)
		before := time.Now()
		p, err := g.Enter(ctx, "a.example", shared, s)
		if err != nil || p != claim || time.Since(before) != 0 {
			t.Fatalf("Enter on the claimed address = %v, %v after %v; want the claim at once", p, err, time.Since(before))
		}
		p.Leave(200)
		claim.Cancel() // a no-op once entered

		// DNS moved the host: the claim on shared is given back.
		claim, _ = g.Acquire(context.Background(), "a.example", shared, s)
		time.Sleep(time.Second)
		busy, _ := g.Acquire(context.Background(), "b.example", other, s)
		go func() {
			time.Sleep(50 * time.Millisecond)
			busy.Leave(200)
		}()
		before = time.Now()
		p, err = g.Enter(server.WithClaim(context.Background(), claim), "a.example", other, s)
		if err != nil || p == claim || p.Addr() != other {
			t.Fatalf("Enter on another address = %v, %v; want a pass of its own", p, err)
		}
		if got := time.Since(before); got != 250*time.Millisecond {
			t.Errorf("waited %v on the real address, want its in-flight request's 50ms plus the delay", got)
		}
		p.Leave(200)
		// The claim went back: shared takes a request at once.
		before = time.Now()
		q, _ := g.Acquire(context.Background(), "c.example", shared, s)
		q.Leave(0)
		if time.Since(before) != 0 {
			t.Errorf("the given-back claim still held its address %v", time.Since(before))
		}
	})
}

// Several hosts of one address answering 503 slow the address; one host
// alone does not; good answers bring the delay back.
func TestGateSlowsAStrugglingServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := server.New(bubbleClock{})
		s := params.Server{Delay: 100 * time.Millisecond, Connections: 1}
		gap := func(host string, status int) time.Duration {
			p, _ := g.Acquire(context.Background(), host, shared, s)
			p.Leave(status)
			before := time.Now()
			q, _ := g.Acquire(context.Background(), host, shared, s)
			q.Leave(200)
			return time.Since(before)
		}
		if d := gap("a.example", 503); d != s.Delay {
			t.Errorf("one host's 503: next request after %v, want the plain delay %v", d, s.Delay)
		}
		p, _ := g.Acquire(context.Background(), "a.example", shared, s)
		p.Leave(503)
		p, _ = g.Acquire(context.Background(), "b.example", shared, s)
		p.Leave(429)
		before := time.Now()
		p, _ = g.Acquire(context.Background(), "c.example", shared, s)
		slowed := time.Since(before)
		p.Leave(200)
		if slowed <= s.Delay {
			t.Errorf("after 503 and 429 from two hosts: next request after %v, want more than %v", slowed, s.Delay)
		}
		if w := g.Waiting(); len(w) != 0 {
			t.Errorf("Waiting() = %v with no request waiting", w)
		}
		for range 40 {
			p, _ = g.Acquire(context.Background(), "c.example", shared, s)
			p.Leave(200)
		}
		before = time.Now()
		p, _ = g.Acquire(context.Background(), "c.example", shared, s)
		p.Leave(200)
		if got := time.Since(before); got != s.Delay {
			t.Errorf("after good answers: next request after %v, want the delay back to %v", got, s.Delay)
		}
	})
}

func TestGateBacklogAndWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := server.New(bubbleClock{})
		s := params.Server{Delay: 200 * time.Millisecond, Connections: 1}
		p, _ := g.Acquire(context.Background(), "a.example", shared, s)
		var wg sync.WaitGroup
		for _, h := range []string{"b.example", "c.example", "d.example"} {
			wg.Go(func() {
				q, _ := g.Acquire(context.Background(), h, shared, s)
				q.Leave(200)
			})
		}
		synctest.Wait()
		g.Hold("e.example", shared)
		w := g.Waiting()
		if len(w) != 1 || w[0].Addr != shared || w[0].Hosts != 4 || w[0].Delay != s.Delay {
			t.Errorf("Waiting() = %+v, want 4 hosts on %v at %v", w, shared, s.Delay)
		}
		if b := g.Backlog(shared, s); b < 3*s.Delay {
			t.Errorf("Backlog = %v with 3 waiting, want at least %v", b, 3*s.Delay)
		}
		if b := g.Backlog(other, s); b != 0 {
			t.Errorf("Backlog of an unused address = %v", b)
		}
		p.Leave(200)
		wg.Wait()
	})
}

// Requests waiting on one address are served in their order of arrival.
func TestGateFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := server.New(bubbleClock{})
		s := params.Server{Delay: 100 * time.Millisecond, Connections: 1}
		busy, _ := g.Acquire(context.Background(), "a.example", shared, s)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for i := range 6 {
			host := string(rune('b'+i)) + ".example"
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				p, _ := g.Acquire(context.Background(), host, shared, s)
				mu.Lock()
				order = append(order, host)
				mu.Unlock()
				time.Sleep(time.Duration(10-i) * time.Millisecond)
				p.Leave(200)
			})
		}
		time.Sleep(50 * time.Millisecond)
		busy.Leave(200)
		wg.Wait()
		want := []string{"b.example", "c.example", "d.example", "e.example", "f.example", "g.example"}
		if !slices.Equal(order, want) {
			t.Errorf("served in order %v, want their arrival order %v", order, want)
		}
	})
}
