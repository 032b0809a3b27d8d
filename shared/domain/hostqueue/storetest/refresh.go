package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
)

// refreshing makes n refreshing URLs of tag, every hour.
func refreshing(tag string, n int) []hostqueue.Refresh {
	out := make([]hostqueue.Refresh, n)
	for i := range out {
		id := fmt.Sprintf("%s-r%03d", tag, i)
		out[i] = hostqueue.Refresh{ID: id, URL: "https://" + tag + ".example/feed/" + id,
			Schedule: refresh.Schedule{Every: time.Hour, Adapt: i%2 == 1, EmitUnchanged: i%3 == 1}}
	}
	return out
}

func (e *env) appendRefreshes(key string, rs []hostqueue.Refresh, limit int) hostqueue.AppendResult {
	e.t.Helper()
	res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Refreshes: rs, RefreshCap: limit, Limit: 10, Due: T0})
	if err != nil {
		e.t.Fatalf("append %d refreshes to %s: %v", len(rs), key, err)
	}
	return res
}

// testRefreshKept: refreshing URLs are kept beside the queue, not in it,
// each due first within its interval, loaded earliest first with every
// field as it went in; the host is due at its earliest one.
func testRefreshKept(t *testing.T, h Harness, e *env) {
	h.skipRefresh(t)
	const key = "refresh.example"
	rs := refreshing("k", 5)
	res := e.appendRefreshes(key, rs, 100)
	if res.RefreshRefused != 0 || res.Pending != 0 || !res.Activated {
		t.Errorf("append = %+v, want nothing refused or pending, the host activated", res)
	}
	got := e.load(key, 10)
	if got.Pending != 0 || got.Refreshing != 5 || len(got.Refreshes) != 5 {
		t.Fatalf("host pending %d refreshing %d (%d loaded), want 0, 5, 5", got.Pending, got.Refreshing, len(got.Refreshes))
	}
	byID := map[string]hostqueue.Refresh{}
	for i, r := range got.Refreshes {
		byID[r.ID] = r
		if i > 0 && r.Due.Before(got.Refreshes[i-1].Due) {
			t.Errorf("refreshes not loaded earliest first: %v before %v", got.Refreshes[i-1].Due, r.Due)
		}
		if r.Due.Before(T0) || !r.Due.Before(T0.Add(time.Hour)) {
			t.Errorf("%s first due %v, want within the first hour", r.ID, r.Due.Sub(T0))
		}
	}
	for _, want := range rs {
		r := byID[want.ID]
		want.Due = r.Due
		if r != want {
			t.Errorf("loaded %+v\nwant %+v", r, want)
		}
	}
	if !got.Due.Equal(got.Refreshes[0].Due) {
		t.Errorf("host due %v, want its earliest refresh %v", got.Due.Sub(T0), got.Refreshes[0].Due.Sub(T0))
	}
	keys, err := e.store.DueHosts(e.ctx(), got.VirtualShard, got.Due.Add(-time.Millisecond), 10)
	if err != nil || len(keys) != 0 {
		t.Errorf("DueHosts before the first refresh = %v (%v), want none", keys, err)
	}
	if keys, err = e.store.DueHosts(e.ctx(), got.VirtualShard, got.Due, 10); err != nil || len(keys) != 1 {
		t.Errorf("DueHosts at the first refresh = %v (%v), want the host", keys, err)
	}
}

// testRefreshCap: new refreshing URLs beyond the cap are refused, the
// rest of the request with them; resending a kept one is not new.
func testRefreshCap(t *testing.T, h Harness, e *env) {
	h.skipRefresh(t)
	const key = "cap.example"
	rs := refreshing("c", 5)
	if res := e.appendRefreshes(key, rs[:3], 4); res.RefreshRefused != 0 {
		t.Fatalf("3 under a cap of 4: %d refused", res.RefreshRefused)
	}
	// rs[0] again is kept already; rs[3] fills the cap; rs[4] is over it.
	again := []hostqueue.Refresh{rs[0], rs[3], rs[4]}
	if res := e.appendRefreshes(key, again, 4); res.RefreshRefused != 1 {
		t.Errorf("over the cap: %d refused, want 1 (the last)", res.RefreshRefused)
	}
	if got := e.load(key, 10); got.Refreshing != 4 {
		t.Errorf("refreshing %d, want the cap, 4", got.Refreshing)
	}
}

// testRefreshCommit: a commit records a refetch (the next due time and
// the content's state) and ends schedules; released with an empty queue,
// the host is due at its earliest refresh, and leaves the due index when
// it has none.
func testRefreshCommit(t *testing.T, h Harness, e *env) {
	h.skipRefresh(t)
	const key = "commit.example"
	rs := refreshing("m", 2)
	e.appendRefreshes(key, rs, 10)
	got := e.load(key, 10)
	first := got.Refreshes[0]
	first.Due, first.ETag, first.SHA256, first.Seq, first.Failing = T0.Add(3*time.Hour), `"v2"`, "abc", 1, true
	second := got.Refreshes[1]
	next := e.commit(key, hostqueue.Commit{Refreshed: []hostqueue.Refresh{first}, Release: true, NextDue: T0, Want: 10})
	if next.Refreshing != 2 || next.Refreshes[1] != first {
		t.Fatalf("after the refetch: refreshes %+v, want %+v last", next.Refreshes, first)
	}
	if !next.Due.Equal(second.Due) {
		t.Errorf("host due %v, want the other refresh's %v", next.Due.Sub(T0), second.Due.Sub(T0))
	}
	// Politeness comes first: NextDue after the earliest refresh wins.
	late := T0.Add(2 * time.Hour)
	if next = e.commit(key, hostqueue.Commit{Release: true, NextDue: late, Want: 10}); !next.Due.Equal(late) {
		t.Errorf("host due %v, want NextDue %v", next.Due.Sub(T0), late.Sub(T0))
	}
	next = e.commit(key, hostqueue.Commit{RefreshEnded: []string{first.URL, second.URL}, Release: true, NextDue: T0, Want: 10})
	if next.Refreshing != 0 || !next.Due.IsZero() {
		t.Errorf("after both ended: refreshing %d due %v, want none and out of the due index", next.Refreshing, next.Due)
	}
}

// testRefreshStop: a stop marks the kept schedule and makes it (and the
// host) due now, and the append names it (AppendResult.Stopped); a stop
// for a URL with none is kept, due now, to be answered under its own id.
func testRefreshStop(t *testing.T, h Harness, e *env) {
	h.skipRefresh(t)
	const key = "stop.example"
	rs := refreshing("s", 1)
	e.appendRefreshes(key, rs, 10)
	e.clock.Advance(time.Minute)
	now := T0.Add(time.Minute)
	stop := hostqueue.Refresh{ID: "stop-1", URL: rs[0].URL, Stop: true}
	lone := hostqueue.Refresh{ID: "stop-2", URL: "https://stop.example/never", Stop: true}
	res, err := e.store.Append(e.ctx(), hostqueue.AppendRequest{Key: key, Refreshes: []hostqueue.Refresh{stop, lone}, RefreshCap: 1, Limit: 10, Due: now})
	if err != nil {
		t.Fatal(err)
	}
	// The stop that marked a schedule is named, for its id's own answer;
	// the lone one is kept for the engine to answer.
	if len(res.Stopped) != 1 || res.Stopped[0] != stop.ID {
		t.Errorf("append says %v stopped a kept schedule, want [%s]", res.Stopped, stop.ID)
	}
	got := e.load(key, 10)
	if got.Refreshing != 2 || !got.Due.Equal(now) {
		t.Fatalf("refreshing %d due %v, want 2 due now %v", got.Refreshing, got.Due.Sub(T0), now.Sub(T0))
	}
	for _, r := range got.Refreshes {
		if !r.Stop || !r.Due.Equal(now) {
			t.Errorf("%s: stop %v due %v, want a stop due now", r.URL, r.Stop, r.Due.Sub(T0))
		}
		if r.URL == rs[0].URL && r.ID != rs[0].ID {
			t.Errorf("the stopped schedule's id is %s, want its own %s", r.ID, rs[0].ID)
		}
	}
}

// testRefreshResend: a kept URL sent again takes the new interval and
// switches, and keeps its id, seq, validators, due time and failing mark
// (so the next good fetch is still sent after a failure).
func testRefreshResend(t *testing.T, h Harness, e *env) {
	h.skipRefresh(t)
	const key = "resend.example"
	rs := refreshing("e", 1)
	e.appendRefreshes(key, rs, 10)
	kept := e.load(key, 10).Refreshes[0]
	kept.ETag, kept.SHA256, kept.Seq, kept.Failing = `"v1"`, "abc", 1, true
	e.commit(key, hostqueue.Commit{Refreshed: []hostqueue.Refresh{kept}, Release: true, NextDue: T0, Want: 10})
	again := hostqueue.Refresh{ID: "e-again", URL: kept.URL,
		Schedule: refresh.Schedule{Every: 2 * time.Hour, Adapt: true, EmitUnchanged: true}}
	e.appendRefreshes(key, []hostqueue.Refresh{again}, 10)
	got := e.load(key, 10)
	if got.Refreshing != 1 {
		t.Fatalf("refreshing %d after the resend, want 1", got.Refreshing)
	}
	want := kept
	want.Every, want.Adapt, want.EmitUnchanged = 2*time.Hour, true, true
	if r := got.Refreshes[0]; r != want {
		t.Errorf("after the resend %+v\nwant %+v", r, want)
	}
}

// skipRefresh skips a refresh case on a store that does not keep
// refreshing URLs yet.
func (h Harness) skipRefresh(t *testing.T) {
	if h.NoRefresh != "" {
		t.Skip(h.NoRefresh)
	}
}
