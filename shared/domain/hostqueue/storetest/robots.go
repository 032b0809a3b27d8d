package storetest

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// largeRobots is a robots.txt no store keeps in a host's own state: 64 KiB
// of random lines, which no compression brings down to a few hundred bytes.
func largeRobots(seed uint64, at time.Time) hostqueue.Robots {
	r := rand.New(rand.NewPCG(seed, 1))
	var b bytes.Buffer
	b.WriteString("User-agent: *\n")
	for b.Len() < 64<<10 {
		b.WriteString("Disallow: /")
		for range 40 {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		b.WriteByte('\n')
	}
	return hostqueue.Robots{Status: 200, Body: b.Bytes(), FetchedAt: at}
}

func sameRobots(a, b hostqueue.Robots) bool {
	return a.Status == b.Status && bytes.Equal(a.Body, b.Body) && a.FetchedAt.Equal(b.FetchedAt)
}

func testRobots(t *testing.T, _ Harness, e *env) {
	const key = "robots.example"
	const origin = "https://robots.example"
	get := func(s hostqueue.RobotsCache, key, origin string) *hostqueue.Robots {
		t.Helper()
		r, err := s.Robots(e.ctx(), key, origin)
		if err != nil {
			t.Fatalf("Robots(%s, %s): %v", key, origin, err)
		}
		return r
	}
	if r := get(e.robots, key, origin); r != nil {
		t.Errorf("Robots before any was stored = %+v, want nil", r)
	}

	// Stored apart, by queue key and origin.
	first := largeRobots(1, T0)
	if err := e.robots.PutRobots(e.ctx(), key, origin, first); err != nil {
		t.Fatal(err)
	}
	if r := get(e.peerRobots, key, origin); r == nil || !sameRobots(*r, first) {
		t.Errorf("Robots after PutRobots = %v, want the stored answer", r)
	}
	if r := get(e.peerRobots, "other.example", origin); r != nil {
		t.Errorf("Robots under another key = %+v, want nil", r)
	}
	second := hostqueue.Robots{Status: 200, Body: []byte("User-agent: *\nDisallow: /b\n"), FetchedAt: T0.Add(time.Hour)}
	if err := e.robots.PutRobots(e.ctx(), key, origin, second); err != nil {
		t.Fatal(err)
	}
	if r := get(e.peerRobots, key, origin); r == nil || !sameRobots(*r, second) {
		t.Errorf("Robots after a second PutRobots = %v, want the second answer", r)
	}

	// With a commit: small answers in the host's state, large ones apart
	// and marked there.
	const host = "state.example"
	small404 := hostqueue.Robots{Status: 404, FetchedAt: T0}
	small200 := hostqueue.Robots{Status: 200, Body: []byte("User-agent: *\nDisallow: /private\n"), FetchedAt: T0.Add(time.Second)}
	large := largeRobots(2, T0.Add(2*time.Second))
	e.append(host, entries("a", 0, 2), 10)
	h := e.commit(host, hostqueue.Commit{Want: 1, Robots: map[string]hostqueue.Robots{
		"http://state.example":       small404,
		"https://state.example":      small200,
		"https://state.example:8443": large,
	},
		State: politeness.State{LastFetch: T0},
	})
	check := func(what string, h *hostqueue.Host, want map[string]hostqueue.Robots) {
		t.Helper()
		if len(h.Robots) != len(want) {
			t.Errorf("%s: Robots has %d origins, want %d: %v", what, len(h.Robots), len(want), h.Robots)
		}
		for o, w := range want {
			if got, ok := h.Robots[o]; !ok || !sameRobots(got, w) {
				t.Errorf("%s: Robots[%s] = %+v, want %+v", what, o, got, w)
			}
		}
		if len(h.RobotsItems) != 1 || !h.RobotsItems["https://state.example:8443"] {
			t.Errorf("%s: RobotsItems = %v, want only the large answer's origin", what, h.RobotsItems)
		}
		if r := get(e.peerRobots, host, "https://state.example:8443"); r == nil || !sameRobots(*r, large) {
			t.Errorf("%s: the large answer is not stored apart", what)
		}
	}
	want := map[string]hostqueue.Robots{"http://state.example": small404, "https://state.example": small200}
	check("returned", h, want)
	check("loaded", e.load(host, 1), want)

	// A later answer replaces its origin's; the others stay, through an
	// idle release too.
	newer := hostqueue.Robots{Status: 200, Body: []byte("User-agent: *\nAllow: /\n"), FetchedAt: T0.Add(time.Hour)}
	e.commit(host, hostqueue.Commit{Done: ids(entries("a", 0, 2)), Release: true, IdleTTL: 24 * time.Hour,
		Robots: map[string]hostqueue.Robots{"http://state.example": newer}})
	want["http://state.example"] = newer
	check("after an update and release", e.load(host, 1), want)
}
