package dynamo_test

import (
	"strings"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// TestCommitKeepsSmallRobotsInline: a small robots.txt answer (a bare 404,
// a short file) is kept in the host item, written with the commit at no
// extra write; a large one gets an item of its own. Both read back.
func TestCommitKeepsSmallRobotsInline(t *testing.T) {
	e := newEnv(t)
	e.readYourWrites() // the robots cache's GetItem right after the commit
	const host = "inline-robots.example"
	e.append(host, entries("a", 0, 1, 100), 10)
	small := hostqueue.Robots{Status: 404, FetchedAt: t0}
	big := hostqueue.Robots{Status: 200, Body: []byte(strings.Repeat("Disallow: /x", 1) + "\n" + randomLines(400)), FetchedAt: t0}
	h, err := e.store.Commit(t.Context(), host, hostqueue.Commit{Want: 10, IdleTTL: time.Hour, Robots: map[string]hostqueue.Robots{
		"http://" + host: small, "https://" + host: big,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := h.Robots["http://"+host]; !ok || got.Status != 404 {
		t.Errorf("inline robots after commit: %+v, want the 404 kept in the host state", h.Robots)
	}
	if _, ok := h.Robots["https://"+host]; ok {
		t.Errorf("the large robots.txt was kept inline")
	}
	loaded := e.fresh()
	lh, err := loaded.Load(t.Context(), host, 1)
	if err != nil {
		t.Fatal(err)
	}
	if lh.Robots["http://"+host].Status != 404 {
		t.Errorf("a fresh store does not see the inline 404: %+v", lh.Robots)
	}
	// The host state says which origins have an item of their own, so a
	// reader looks up only those.
	if !lh.RobotsItems["https://"+host] || lh.RobotsItems["http://"+host] || len(lh.RobotsItems) != 1 {
		t.Errorf("RobotsItems = %v, want only the large answer's origin", lh.RobotsItems)
	}
	if r, err := loaded.Robots(t.Context(), host, "http://"+host); err != nil || r != nil {
		t.Errorf("small robots.txt has an item of its own (%+v, %v); want none", r, err)
	}
	r, err := loaded.Robots(t.Context(), host, "https://"+host)
	if err != nil || r == nil || string(r.Body) != string(big.Body) {
		t.Errorf("large robots.txt item: %+v, %v; want it stored whole", r, err)
	}
}

// randomLines returns n distinct rule lines that compress poorly enough to
// exceed the inline limit.
func randomLines(n int) string {
	var b strings.Builder
	x := uint32(2463534242)
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteString("Disallow: /p")
		for j := 0; j < 6; j++ {
			b.WriteByte(byte('a' + (x>>(j*4))%26))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
