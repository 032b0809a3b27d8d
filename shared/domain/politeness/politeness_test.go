package politeness_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/politeness"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func policy() politeness.Policy {
	return politeness.Policy{FetchDelay: 500 * time.Millisecond, DelayFactor: 2, MaxDelay: time.Minute,
		MaxBackoff: 10 * time.Minute, GiveUpAfter: time.Hour}
}

func TestNewPolicyTakesTheParameters(t *testing.T) {
	p := politeness.NewPolicy(params.Defaults())
	want := politeness.Policy{FetchDelay: time.Second, DelayFactor: params.DefaultDelayFactor, MaxDelay: time.Minute,
		MaxBackoff: 10 * time.Minute, GiveUpAfter: time.Hour}
	if p != want {
		t.Errorf("NewPolicy(Defaults()) = %+v, want %+v", p, want)
	}
}

func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     func(*politeness.Policy)
		s     politeness.State
		crawl time.Duration
		want  time.Duration
	}{
		{"fetch delay alone", nil, politeness.State{}, 0, 500 * time.Millisecond},
		{"crawl-delay above it", nil, politeness.State{}, 45 * time.Second, 45 * time.Second},
		{"crawl-delay of a day, not capped by MaxDelay", nil, politeness.State{}, 24 * time.Hour, 24 * time.Hour},
		{"quick response: fetch delay", nil, politeness.State{LastTook: 100 * time.Millisecond}, 0, 500 * time.Millisecond},
		{"slow response: factor x took", nil, politeness.State{LastTook: 600 * time.Millisecond}, 0, 1200 * time.Millisecond},
		{"factor 1", func(p *politeness.Policy) { p.DelayFactor = 1 }, politeness.State{LastTook: 600 * time.Millisecond}, 0, 600 * time.Millisecond},
		{"factor 0: off", func(p *politeness.Policy) { p.DelayFactor = 0 }, politeness.State{LastTook: 9 * time.Second}, 0, 500 * time.Millisecond},
		{"very slow response: capped by MaxDelay", nil, politeness.State{LastTook: 5 * time.Minute}, 0, time.Minute},
		{"learned rate delay", nil, politeness.State{RateDelay: 4 * time.Second}, 0, 4 * time.Second},
		{"learned rate delay capped by MaxDelay", nil, politeness.State{RateDelay: time.Hour}, 0, time.Minute},
		{"MaxDelay 0: no cap", func(p *politeness.Policy) { p.MaxDelay = 0 }, politeness.State{LastTook: 5 * time.Minute}, 0, 10 * time.Minute},
		{"fetch delay above MaxDelay stays", func(p *politeness.Policy) { p.FetchDelay = 2 * time.Minute }, politeness.State{LastTook: 5 * time.Minute}, 0, 2 * time.Minute},
		{"largest wins", nil, politeness.State{LastTook: time.Second, RateDelay: 3 * time.Second}, 2 * time.Second, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy()
			if tc.p != nil {
				tc.p(&p)
			}
			if got := p.Delay(tc.s, tc.crawl); got != tc.want {
				t.Errorf("Delay = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		s     politeness.State
		delay time.Duration
		want  time.Time
	}{
		{"never fetched", politeness.State{}, time.Second, time.Time{}.Add(time.Second)},
		{"last fetch + delay", politeness.State{LastFetch: t0}, 45 * time.Second, t0.Add(45 * time.Second)},
		{"a day's crawl-delay", politeness.State{LastFetch: t0}, 24 * time.Hour, t0.Add(24 * time.Hour)},
		{"pause beyond", politeness.State{LastFetch: t0, PauseUntil: t0.Add(time.Hour)}, time.Second, t0.Add(time.Hour)},
		{"pause within", politeness.State{LastFetch: t0, PauseUntil: t0.Add(time.Second)}, time.Minute, t0.Add(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Next(tc.delay); !got.Equal(tc.want) {
				t.Errorf("Next = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestFetchedOnlyMovesForward(t *testing.T) {
	s := politeness.State{LastFetch: t0}
	s.Fetched(t0.Add(-time.Second))
	if !s.LastFetch.Equal(t0) {
		t.Errorf("older fetch moved LastFetch to %v", s.LastFetch)
	}
	s.Fetched(t0.Add(time.Second))
	if !s.LastFetch.Equal(t0.Add(time.Second)) {
		t.Errorf("newer fetch: LastFetch %v", s.LastFetch)
	}
}

func TestFailuresAndAnswers(t *testing.T) {
	p := policy()
	for _, tc := range []struct {
		name string
		s    politeness.State
		do   func(*politeness.State)
		want politeness.State
	}{
		{"first failure starts the run and backs off 2x",
			politeness.State{LastFetch: t0},
			func(s *politeness.State) { p.Failed(s, t0, "refused") },
			politeness.State{LastFetch: t0, Errors: 1, FailingSince: t0, LastError: "refused", PauseUntil: t0.Add(time.Second)}},
		{"third failure: 8x, run kept",
			politeness.State{Errors: 2, FailingSince: t0.Add(-time.Minute), LastError: "a"},
			func(s *politeness.State) { p.Failed(s, t0, "b") },
			politeness.State{Errors: 3, FailingSince: t0.Add(-time.Minute), LastError: "b", PauseUntil: t0.Add(4 * time.Second)}},
		{"back-off capped by MaxBackoff",
			politeness.State{Errors: 20, FailingSince: t0},
			func(s *politeness.State) { p.Failed(s, t0, "x") },
			politeness.State{Errors: 21, FailingSince: t0, LastError: "x", PauseUntil: t0.Add(10 * time.Minute)}},
		{"back-off capped by the bound",
			politeness.State{Errors: 20, FailingSince: t0.Add(-59 * time.Minute)},
			func(s *politeness.State) { p.Failed(s, t0, "x") },
			politeness.State{Errors: 21, FailingSince: t0.Add(-59 * time.Minute), LastError: "x", PauseUntil: t0.Add(time.Minute)}},
		{"429 with Retry-After pauses as said, no learned delay",
			politeness.State{},
			func(s *politeness.State) { p.Refused(s, t0, "429", 429, 2*time.Hour, true) },
			politeness.State{Errors: 1, FailingSince: t0, LastError: "429", PauseUntil: t0.Add(2 * time.Hour)}},
		{"Retry-After capped at a day",
			politeness.State{},
			func(s *politeness.State) { p.Refused(s, t0, "503", 503, 30*24*time.Hour, true) },
			politeness.State{Errors: 1, FailingSince: t0, LastError: "503", PauseUntil: t0.Add(24 * time.Hour)}},
		{"500 with Retry-After: back-off only",
			politeness.State{},
			func(s *politeness.State) { p.Refused(s, t0, "500", 500, time.Hour, true) },
			politeness.State{Errors: 1, FailingSince: t0, LastError: "500", PauseUntil: t0.Add(time.Second)}},
		{"Retry-After shorter than the back-off: the back-off",
			politeness.State{Errors: 3, FailingSince: t0},
			func(s *politeness.State) { p.Refused(s, t0, "429", 429, time.Second, true) },
			politeness.State{Errors: 4, FailingSince: t0, LastError: "429", PauseUntil: t0.Add(8 * time.Second)}},
		{"Retry-After: 0 counts as absent",
			politeness.State{},
			func(s *politeness.State) { p.Refused(s, t0, "429", 429, 0, true) },
			politeness.State{Errors: 1, FailingSince: t0, LastError: "429", PauseUntil: t0.Add(time.Second), RateDelay: time.Second, RateSince: t0}},
		{"Retry-After in the past (given as 0) counts as absent on a 503",
			politeness.State{RateDelay: 4 * time.Second, RateSince: t0.Add(-time.Hour)},
			func(s *politeness.State) { p.Refused(s, t0, "503", 503, 0, true) },
			politeness.State{Errors: 1, FailingSince: t0, LastError: "503", PauseUntil: t0.Add(time.Second), RateDelay: 8 * time.Second, RateSince: t0}},
		{"429 without Retry-After raises the host's delay to 2x",
			politeness.State{},
			func(s *politeness.State) { p.Refused(s, t0, "429", 429, 0, false) },
			politeness.State{Errors: 1, FailingSince: t0, LastError: "429", PauseUntil: t0.Add(time.Second), RateDelay: time.Second, RateSince: t0}},
		{"503 without Retry-After doubles it",
			politeness.State{RateDelay: 4 * time.Second, RateSince: t0.Add(-time.Hour)},
			func(s *politeness.State) { p.Refused(s, t0, "503", 503, 0, false) },
			politeness.State{Errors: 1, FailingSince: t0, LastError: "503", PauseUntil: t0.Add(time.Second), RateDelay: 8 * time.Second, RateSince: t0}},
		{"doubling stops at MaxDelay",
			politeness.State{RateDelay: 50 * time.Second},
			func(s *politeness.State) { p.RateLimited(s, t0) },
			politeness.State{RateDelay: time.Minute, RateSince: t0}},
		{"answer ends the run and records the duration",
			politeness.State{Errors: 3, FailingSince: t0.Add(-time.Minute), LastError: "x", PauseUntil: t0},
			func(s *politeness.State) { p.Answered(s, t0, 600*time.Millisecond) },
			politeness.State{PauseUntil: t0, LastTook: 600 * time.Millisecond}},
		{"answer within the quiet period keeps the learned delay",
			politeness.State{RateDelay: 8 * time.Second, RateSince: t0.Add(-29 * time.Minute)},
			func(s *politeness.State) { p.Answered(s, t0, 0) },
			politeness.State{RateDelay: 8 * time.Second, RateSince: t0.Add(-29 * time.Minute)}},
		{"answer after a quiet period halves it and starts a new one",
			politeness.State{RateDelay: 8 * time.Second, RateSince: t0.Add(-30 * time.Minute)},
			func(s *politeness.State) { p.Answered(s, t0, 0) },
			politeness.State{RateDelay: 4 * time.Second, RateSince: t0}},
		{"halved below the floor it is forgiven",
			politeness.State{RateDelay: time.Second, RateSince: t0.Add(-time.Hour)},
			func(s *politeness.State) { p.Answered(s, t0, 0) },
			politeness.State{}},
		{"give-up clears the run and pause, keeps the learned delay",
			politeness.State{LastFetch: t0, Errors: 4, FailingSince: t0, LastError: "x", PauseUntil: t0.Add(time.Hour), RateDelay: 2 * time.Second, RateSince: t0},
			func(s *politeness.State) { s.GivenUp() },
			politeness.State{LastFetch: t0, RateDelay: 2 * time.Second, RateSince: t0}},
		{"drained clears the run, keeps the pause and back-off",
			politeness.State{Errors: 2, FailingSince: t0, LastError: "x", PauseUntil: t0.Add(time.Hour)},
			func(s *politeness.State) { s.Drained() },
			politeness.State{Errors: 2, PauseUntil: t0.Add(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			tc.do(&s)
			// LastFailed (when a failure ended) is checked in origins_test.go.
			s.LastFailed = tc.want.LastFailed
			if !reflect.DeepEqual(s, tc.want) {
				t.Errorf("got  %+v\nwant %+v", s, tc.want)
			}
		})
	}
}

// TestRateLimitedHostSettles: a server allowing one request a second,
// fetched with FetchDelay 500ms, refuses one request: the learned delay
// (1 s) then keeps every gap at a second or more, and after 30 quiet
// minutes it is forgiven.
func TestRateLimitedHostSettles(t *testing.T) {
	p := policy()
	var s politeness.State
	now, last, refused := t0, time.Time{}, 0
	for range 100 {
		next := s.Next(p.Delay(s, 0))
		if next.After(now) {
			now = next
		}
		if !last.IsZero() && now.Sub(last) < time.Second {
			refused++
			p.Refused(&s, now, "429", 429, 0, false)
		} else {
			p.Answered(&s, now, 0)
			last = now
		}
		s.Fetched(now)
	}
	if refused > 2 {
		t.Errorf("%d requests refused, want at most 2", refused)
	}
	if s.RateDelay != time.Second {
		t.Errorf("learned delay %v, want 1s", s.RateDelay)
	}
	p.Answered(&s, now.Add(31*time.Minute), 0)
	if s.RateDelay != 0 {
		t.Errorf("after a quiet half hour the learned delay is %v, want 0", s.RateDelay)
	}
}

func TestBoundAndExpired(t *testing.T) {
	p := policy()
	if _, failing := p.Bound(politeness.State{PauseUntil: t0.Add(24 * time.Hour)}); failing {
		t.Error("a host that only waits (a day's pause) has a failure bound: waiting must not count")
	}
	s := politeness.State{FailingSince: t0}
	if b, ok := p.Bound(s); !ok || !b.Equal(t0.Add(time.Hour)) {
		t.Errorf("Bound = %v %v, want %v", b, ok, t0.Add(time.Hour))
	}
	for _, tc := range []struct {
		name string
		s    politeness.State
		now  time.Time
		want bool
	}{
		{"answering", politeness.State{}, t0.Add(48 * time.Hour), false},
		{"within the bound", s, t0.Add(59 * time.Minute), false},
		{"at the bound", s, t0.Add(time.Hour), true},
		{"pause beyond the bound", politeness.State{FailingSince: t0, PauseUntil: t0.Add(2 * time.Hour)}, t0, true},
	} {
		if got := p.Expired(tc.s, tc.now); got != tc.want {
			t.Errorf("%s: Expired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestGivesUpOnlyAfterAsking checks that a failure run that outlasted
// GiveUpAfter gives the host up only once a request of the current run has
// failed: after a restart the host is asked first, and a deployment whose
// runs come further apart than the bound still gives up after one probe.
func TestGivesUpOnlyAfterAsking(t *testing.T) {
	p := policy()
	lastRun := politeness.State{FailingSince: t0, LastFetch: t0.Add(10 * time.Minute), Errors: 3}
	restart := t0.Add(3 * time.Hour)
	for _, tc := range []struct {
		name     string
		s        politeness.State
		now      time.Time
		runStart time.Time
		want     bool
	}{
		{"failed in this run, at the bound", lastRun, t0.Add(time.Hour), t0, true},
		{"failed in this run, within the bound", lastRun, t0.Add(30 * time.Minute), t0, false},
		{"failed only in an earlier run", lastRun, restart, restart, false},
		{"one probe of this run failed", func() politeness.State {
			s := lastRun
			p.Failed(&s, restart.Add(time.Second), "refused")
			s.Fetched(restart.Add(time.Second))
			return s
		}(), restart.Add(time.Second), restart, true},
		{"answering", politeness.State{LastFetch: restart}, restart.Add(48 * time.Hour), restart, false},
	} {
		if got := p.GivesUp(tc.s, tc.now, tc.runStart); got != tc.want {
			t.Errorf("%s: GivesUp = %v, want %v", tc.name, got, tc.want)
		}
	}
}
