package politeness_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

// TestOriginRunsApart: failures of one origin of a host back off and give
// up that origin only; another origin of the host is paced by the host's
// delay alone, and the runs survive a round trip through the stores'
// encoding.
func TestOriginRunsApart(t *testing.T) {
	p := policy()
	p.GiveUpAfter = time.Minute
	const httpO, httpsO = "http://h", "https://h"
	var s politeness.State
	now := t0
	s.Switch(httpO, now)
	s.Fetched(now)
	p.Answered(&s, now, 0)
	now = now.Add(time.Second)
	s.Switch(httpsO, now)
	s.Fetched(now)
	p.Failed(&s, now, "refused")
	https := s.PauseUntil
	if !https.After(now) {
		t.Fatalf("https not paused: %+v", s)
	}
	now = now.Add(time.Second)
	s.Switch(httpO, now)
	if s.Next(p.Delay(s, 0)) != s.LastFetch.Add(p.FetchDelay) {
		t.Errorf("http paced until %v, want the host's delay after %v only", s.Next(p.Delay(s, 0)), s.LastFetch)
	}
	if s.PausedUntil(httpsO) != https || s.EarliestPause().IsZero() == false {
		t.Errorf("PausedUntil(https) %v, want %v; earliest %v, want none (http is not paused)", s.PausedUntil(httpsO), https, s.EarliestPause())
	}
	// http answers for longer than GiveUpAfter: https gives up (it was
	// asked in this run), http never.
	for range 70 {
		now = now.Add(time.Second)
		s.Fetched(now)
		p.Answered(&s, now, 0)
	}
	if p.GivesUp(s, now, t0) {
		t.Errorf("http gives up: %+v", s)
	}
	var back politeness.State
	if err := politeness.DecodeOrigins(politeness.EncodeOrigins(s), &back); err != nil {
		t.Fatal(err)
	}
	back.Switch(httpsO, now)
	if !p.GivesUp(back, now, t0) {
		t.Errorf("https does not give up after the round trip: %+v", back)
	}
	if p.GivesUp(back, now, now.Add(-time.Second)) {
		t.Errorf("https gives up though not asked since the run began (the http requests asked it nothing)")
	}
}

// TestOriginsBounded: at most MaxOrigins other origins' runs are kept, the
// one failed least recently dropped, and a healthy host with one origin
// stores nothing.
func TestOriginsBounded(t *testing.T) {
	p := policy()
	var s politeness.State
	s.Switch("http://h", t0)
	p.Answered(&s, t0, 0)
	if e := politeness.EncodeOrigins(s); e != "" {
		t.Errorf("one healthy origin stores %q, want nothing", e)
	}
	for i := range politeness.MaxOrigins + 3 {
		now := t0.Add(time.Duration(i) * time.Second)
		s.Switch(fmt.Sprintf("http://h:%d", 8000+i), now)
		p.Failed(&s, now, "refused")
	}
	s.Switch("http://h", t0.Add(time.Hour))
	if len(s.Others) != politeness.MaxOrigins {
		t.Fatalf("%d origins kept, want %d", len(s.Others), politeness.MaxOrigins)
	}
	if _, ok := s.Others["http://h:8000"]; ok {
		t.Errorf("the origin failed least recently was kept")
	}
	var back politeness.State
	if err := politeness.DecodeOrigins(politeness.EncodeOrigins(s), &back); err != nil {
		t.Fatal(err)
	}
	if !sameRuns(back.Others, s.Others) || back.Origin != s.Origin {
		t.Errorf("round trip: %+v, want %+v", back.Others, s.Others)
	}
}

func sameRuns(a, b map[string]politeness.Run) bool {
	if len(a) != len(b) {
		return false
	}
	for o, r := range a {
		q, ok := b[o]
		if !ok || !r.PauseUntil.Equal(q.PauseUntil) || !r.FailingSince.Equal(q.FailingSince) ||
			!r.LastFailed.Equal(q.LastFailed) || r.Errors != q.Errors || r.LastError != q.LastError {
			return false
		}
	}
	return true
}
