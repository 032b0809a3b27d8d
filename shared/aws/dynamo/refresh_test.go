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
