package dynamo_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/refresh"
)

// TestRefreshesBesideRobotsItems: a host's robots.txt stored in an item of
// its own (pk "h#<key>", sk "r#<origin>") is not read as a refreshing URL,
// nor counted among them, and a fresh store (another Lambda instance, no
// cached view) loads the same refreshes.
func TestRefreshesBesideRobotsItems(t *testing.T) {
	e := newEnv(t)
	e.readYourWrites()
	const host = "refresh-robots.example"
	var rs []hostqueue.Refresh
	for i := range 3 {
		rs = append(rs, hostqueue.Refresh{ID: fmt.Sprintf("r%d", i), URL: fmt.Sprintf("https://%s/feed/%d", host, i),
			Schedule: refresh.Schedule{Every: time.Hour}})
	}
	if _, err := e.store.Append(t.Context(), hostqueue.AppendRequest{Key: host, Refreshes: rs, RefreshCap: 10, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	big := hostqueue.Robots{Status: 200, Body: []byte(randomLines(400)), FetchedAt: t0}
	if _, err := e.store.Commit(t.Context(), host, hostqueue.Commit{Want: 10, Robots: map[string]hostqueue.Robots{"https://" + host: big}}); err != nil {
		t.Fatal(err)
	}
	h, err := e.fresh().Load(t.Context(), host, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !h.RobotsItems["https://"+host] {
		t.Fatalf("the large robots.txt has no item of its own: %+v", h.RobotsItems)
	}
	if h.Refreshing != 3 || len(h.Refreshes) != 3 {
		t.Fatalf("refreshing %d, loaded %+v; want the 3 refreshes alone", h.Refreshing, h.Refreshes)
	}
	for _, r := range h.Refreshes {
		if r.URL == "" || r.ID == "" || r.Every != time.Hour {
			t.Errorf("loaded %+v, not one of the refreshes appended", r)
		}
	}
}

// TestRefreshAttemptsKeptOnRelease: a host whose only work is refreshing
// URLs keeps their failed attempts through a release, so MaxAttempts
// counts them across sessions (as the SQLite store does).
func TestRefreshAttemptsKeptOnRelease(t *testing.T) {
	e := newEnv(t)
	const key = "feeds-attempts.example"
	r := hostqueue.Refresh{ID: "feed-1", URL: "http://" + key + "/rss", Schedule: refresh.Schedule{Every: time.Hour}}
	if _, err := e.store.Append(t.Context(), hostqueue.AppendRequest{Key: key, Refreshes: []hostqueue.Refresh{r}, RefreshCap: 10, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Commit(t.Context(), key, hostqueue.Commit{Attempts: map[string]int{"feed-1": 2}, Release: true, NextDue: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	h, err := e.fresh().Load(t.Context(), key, 10)
	if err != nil {
		t.Fatal(err)
	}
	if h.Attempts["feed-1"] != 2 || h.Refreshing != 1 {
		t.Errorf("after the release: attempts %v, refreshing %d; want feed-1: 2, 1", h.Attempts, h.Refreshing)
	}
}

// TestPlainURLsDueBeforeALaterRefresh: a host due only by a refresh
// hours away becomes due at once when plain URLs come (as the SQLite
// store does).
func TestPlainURLsDueBeforeALaterRefresh(t *testing.T) {
	e := newEnv(t)
	e.readYourWrites() // the due index's Query right after the append
	const key = "feeds-weekly.example"
	r := hostqueue.Refresh{ID: "weekly", URL: "http://" + key + "/weekly", Schedule: refresh.Schedule{Every: 100 * time.Hour}}
	if _, err := e.store.Append(t.Context(), hostqueue.AppendRequest{Key: key, Refreshes: []hostqueue.Refresh{r}, RefreshCap: 10, Limit: 10, Due: t0}); err != nil {
		t.Fatal(err)
	}
	h, err := e.store.Load(t.Context(), key, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Due.After(t0) {
		t.Skipf("the refresh's first due time fell at %v; the test wants it later", h.Due)
	}
	res, err := e.store.Append(t.Context(), hostqueue.AppendRequest{Key: key, Entries: entries("p", 0, 1, 100), Limit: 10, Due: t0})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := e.store.DueHosts(t.Context(), res.Shard, t0, 10)
	if err != nil || len(keys) != 1 || keys[0] != key {
		t.Errorf("due hosts at the append %v (%v), want %s: its plain url waits for no refresh", keys, err, key)
	}
}

// TestRefreshesBeyondOneTransaction: a transaction holds at most 100
// items, so an append of more refreshes than one write can change, and a
// commit refetching them all, go in several writes; the cap still
// refuses from the first new one beyond it, across them.
func TestRefreshesBeyondOneTransaction(t *testing.T) {
	e := newEnv(t)
	const key = "many-feeds.example"
	var rs []hostqueue.Refresh
	for i := range 130 {
		rs = append(rs, hostqueue.Refresh{ID: fmt.Sprintf("f%03d", i), URL: fmt.Sprintf("https://%s/feed/%03d", key, i),
			Schedule: refresh.Schedule{Every: time.Hour}})
	}
	res, err := e.store.Append(t.Context(), hostqueue.AppendRequest{Key: key, Refreshes: rs, RefreshCap: 120, Limit: 10, Due: t0})
	if err != nil {
		t.Fatal(err)
	}
	if res.RefreshRefused != 10 {
		t.Errorf("refused %d, want the 10 beyond the cap of 120", res.RefreshRefused)
	}
	h, err := e.fresh().Load(t.Context(), key, 200)
	if err != nil {
		t.Fatal(err)
	}
	if h.Refreshing != 120 || len(h.Refreshes) != 120 {
		t.Fatalf("refreshing %d, loaded %d; want 120, 120", h.Refreshing, len(h.Refreshes))
	}
	next := make([]hostqueue.Refresh, len(h.Refreshes))
	for i, r := range h.Refreshes {
		r.Due, r.Seq, r.SHA256 = t0.Add(2*time.Hour+time.Duration(i)*time.Second), 1, "abc"
		next[i] = r
	}
	got, err := e.store.Commit(t.Context(), key, hostqueue.Commit{Refreshed: next[:110], RefreshEnded: []string{next[110].URL}, Release: true, NextDue: t0, Want: 200})
	if err != nil {
		t.Fatal(err)
	}
	if got.Refreshing != 119 || len(got.Refreshes) != 119 {
		t.Fatalf("after the commit: refreshing %d, loaded %d; want 119", got.Refreshing, len(got.Refreshes))
	}
	// The 9 not refetched are due first, then the 110 in order.
	if r := got.Refreshes[9]; r.URL != next[0].URL || !r.Due.Equal(next[0].Due) || r.Seq != 1 {
		t.Errorf("10th after the commit %+v, want the first refetched, due %v, seq 1", r, next[0].Due)
	}
	if !got.Due.Equal(got.Refreshes[0].Due) {
		t.Errorf("host due %v, want its earliest refresh %v", got.Due, got.Refreshes[0].Due)
	}
}
