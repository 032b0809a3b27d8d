package hostqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// TestIngestKeepsRefreshesApart: refreshing URLs (and stops) go beside
// the queue, not in it, so HoldBack's count of the last entries still
// names plain URLs; those the cap refuses fail as invalid input, naming
// MaxRefreshPerHost.
func TestIngestKeepsRefreshesApart(t *testing.T) {
	store := &fakeStore{t: t, append: func(_ context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		// One plain URL held back, one refresh over the cap.
		return hostqueue.AppendResult{Appended: len(req.Entries) - 1, HeldBack: 1, RefreshRefused: 1}, nil
	}}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }, Overflow: hostqueue.HoldBack}
	msgs := []urlmsg.Message{
		msg("p1", "a.example", "http://a.example/1"),
		{ID: "r1", Host: "a.example", URL: "http://a.example/feed", Refresh: time.Hour, RefreshAdapt: true, ETag: `"e"`},
		msg("p2", "a.example", "http://a.example/2"),
		{ID: "s1", Host: "a.example", URL: "http://a.example/old", RefreshStop: true},
		{ID: "r2", Host: "a.example", URL: "http://a.example/feed2", Refresh: time.Hour},
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 50, RefreshCap: 7}, msgs)
	req := store.byKey()["a.example"]
	if got := entryIDs(req.Entries); len(got) != 2 || got[0] != "p1" || got[1] != "p2" {
		t.Errorf("queued entries %v, want the plain p1, p2", got)
	}
	if len(req.Refreshes) != 3 || req.RefreshCap != 7 {
		t.Fatalf("refreshes %+v cap %d, want r1, s1, r2 under cap 7", req.Refreshes, req.RefreshCap)
	}
	r1 := req.Refreshes[0]
	if r1.ID != "r1" || r1.Every != time.Hour || !r1.Adapt || r1.ETag != `"e"` || r1.Stop || !req.Refreshes[1].Stop {
		t.Errorf("refreshes %+v, want r1 hourly, adaptive, with its etag; s1 a stop", req.Refreshes)
	}
	if len(res.Failed) != 2 || !errors.Is(res.Failed[2], hostqueue.ErrQueueFull) {
		t.Errorf("failed %v, want p2 (index 2) held back and r2 (index 4) refused", res.Failed)
	}
	if err := res.Failed[4]; !errors.Is(err, hostqueue.ErrRefreshCap) || !errors.Is(err, urlmsg.ErrInvalid) {
		t.Errorf("r2: %v, want ErrRefreshCap, invalid input", err)
	}
	if res.Appended != 1+2 {
		t.Errorf("appended %d, want 3 (p1, r1, s1)", res.Appended)
	}
}

// TestIngestAnswersAStopUnderItsID: a stop that ended a kept schedule
// gets its own result (stopped, final) once the store applied it; the
// schedule's final result is the engine's, under the schedule's id. A
// stop the store kept as lone (no schedule) is left to the engine, and
// one whose answer cannot be published fails, to come again.
func TestIngestAnswersAStopUnderItsID(t *testing.T) {
	store := &fakeStore{t: t, append: func(_ context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
		return hostqueue.AppendResult{Appended: len(req.Entries), Stopped: []string{"s1"}}, nil
	}}
	pub := &fakePublisher{}
	in := &hostqueue.Ingester{Store: store, Publisher: pub, Now: func() time.Time { return testNow }}
	msgs := []urlmsg.Message{
		{ID: "s1", Host: "a.example", URL: "http://a.example/feed", RefreshStop: true},
		{ID: "s2", Host: "a.example", URL: "http://a.example/none", RefreshStop: true},
		msg("p1", "a.example", "http://a.example/1"),
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 50, RefreshCap: 7}, msgs)
	if len(res.Failed) != 0 {
		t.Fatalf("failed %v, want none", res.Failed)
	}
	if len(pub.published) != 1 {
		t.Fatalf("published %+v, want the answer to s1 alone", pub.published)
	}
	r := pub.published[0]
	if r.ID != "s1" || r.URL != "http://a.example/feed" || r.Status != result.StatusStopped || !r.Final || r.Seq != 1 {
		t.Errorf("answer %+v, want s1's: stopped, final, seq 1", r)
	}

	pub.err = errors.New("queue gone")
	res = in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 50, RefreshCap: 7}, msgs)
	if err := res.Failed[0]; err == nil || !strings.Contains(err.Error(), "queue gone") || len(res.Failed) != 1 {
		t.Errorf("failed %v, want s1 alone failed with the publisher's error", res.Failed)
	}
}

// TestIngestRefusesRefreshWhereNotKept: with NoRefresh (a store that keeps
// no refreshing URLs), they are refused as invalid, naming why; plain
// URLs go on.
func TestIngestRefusesRefreshWhereNotKept(t *testing.T) {
	store := &fakeStore{t: t}
	in := &hostqueue.Ingester{Store: store, Publisher: &fakePublisher{}, Now: func() time.Time { return testNow }, NoRefresh: "not on this store"}
	msgs := []urlmsg.Message{
		{ID: "r1", Host: "a.example", URL: "http://a.example/feed", Refresh: time.Hour},
		msg("p1", "a.example", "http://a.example/1"),
	}
	res := in.Ingest(context.Background(), hostqueue.IngestParams{PersistLimit: 50, RefreshCap: 7}, msgs)
	if err := res.Failed[0]; !errors.Is(err, hostqueue.ErrRefreshUnsupported) || !errors.Is(err, urlmsg.ErrInvalid) || !strings.Contains(err.Error(), "not on this store") {
		t.Errorf("refresh item: %v, want ErrRefreshUnsupported naming why", err)
	}
	if req := store.byKey()["a.example"]; len(res.Failed) != 1 || len(req.Refreshes) != 0 || len(req.Entries) != 1 {
		t.Errorf("failed %v, appended %+v; want only the plain URL queued", res.Failed, req)
	}
}
