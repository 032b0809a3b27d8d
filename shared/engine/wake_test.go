package engine_test

import (
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// TestWakeRunGivesWay: a wake-up for a shard another live run holds ends at
// once without touching its hosts; a wake-up for a free shard works the due
// hosts like a scheduled run and ends as soon as they are done.
func TestWakeRunGivesWay(t *testing.T) {
	t.Parallel()
	virtual(t, func(t *testing.T) {
		p := testParams()
		e := newEnv(t, p)
		s := newSite(t, withRobots(404, "", page))
		e.seed(s.url("/a"), s.url("/b"))

		// Another invocation holds every virtual shard of shard 0 of 1.
		now := time.Now()
		for v := range 16 {
			ok, err := e.store.AcquireShard(t.Context(), v, "holder", now.Add(time.Minute), now)
			if err != nil || !ok {
				t.Fatalf("take vshard %d: %v %v", v, ok, err)
			}
		}
		start := time.Now()
		sum := e.runRequest(e.engine(), engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "woken", Until: start.Add(20 * time.Second), Wake: true})
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("a wake-up of a held shard took %v, want it to end at once", took)
		}
		if len(sum.Leased) != 0 || sum.Hosts != 0 || len(s.paths()) != 0 {
			t.Errorf("held shard: leased %v, %d hosts, requests %v; want nothing done", sum.Leased, sum.Hosts, s.paths())
		}

		// Held in part (a run that took one virtual shard first): the wake-up
		// hands back the rest and leaves the shard to that run.
		for v := 1; v < 16; v++ {
			if err := e.store.ReleaseShard(t.Context(), v, "holder"); err != nil {
				t.Fatal(err)
			}
		}
		sum = e.runRequest(e.engine(), engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "woken", Until: time.Now().Add(20 * time.Second), Wake: true})
		if sum.Hosts != 0 || len(s.paths()) != 0 {
			t.Errorf("partly held shard: %d hosts, requests %v; want nothing done", sum.Hosts, s.paths())
		}
		now = time.Now()
		for v := 1; v < 16; v++ {
			ok, err := e.store.AcquireShard(t.Context(), v, "probe", now.Add(time.Second), now)
			if err != nil || !ok {
				t.Fatalf("vshard %d after a wake-up gave way: taken=%v err=%v, want it handed back", v, ok, err)
			}
			if err := e.store.ReleaseShard(t.Context(), v, "probe"); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.store.ReleaseShard(t.Context(), 0, "holder"); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		sum = e.runRequest(e.engine(), engine.RunRequest{Shard: 0, ShardCount: 1, Owner: "woken", Until: start.Add(20 * time.Second), Wake: true})
		if sum.Results[result.StatusFetched] != 2 || len(e.pub.all()) != 2 {
			t.Errorf("free shard: results %v (%d published), want both URLs fetched", sum.Results, len(e.pub.all()))
		}
		// Done, then lingering one to two CheckHostPeriods: well before Until.
		if took := time.Since(start); took > 2*p.CheckHostPeriod+5*time.Second {
			t.Errorf("a wake-up run took %v with nothing left to do, want it to end once idle (Until was 20s away)", took)
		}
		if h := e.load(s.host); h == nil || h.Pending != 0 || !h.Due.IsZero() {
			t.Errorf("host after the woken run: %+v, want drained and out of the due index", h)
		}
		// Its leases are handed back: a scheduled run takes the shard at once.
		now = time.Now()
		for v := range 16 {
			ok, err := e.store.AcquireShard(t.Context(), v, "next", now.Add(time.Minute), now)
			if err != nil || !ok {
				t.Errorf("vshard %d after the woken run: taken=%v err=%v, want free", v, ok, err)
			}
		}
	})
}
