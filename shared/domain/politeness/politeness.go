// Package politeness holds a host's politeness state and every rule on it:
// the delay between two requests (fixed, robots.txt Crawl-delay, adaptive to
// the host's response time, learned from its rate limits), back-off after
// failures, Retry-After, and the failure run's bound. It is pure: time is
// an argument, nothing is read or written; the stores only persist State
// and the check engine only calls these transitions.
package politeness

import (
	"net/http"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// MaxRetryAfter caps a server's Retry-After, so one odd header cannot park
// a host for weeks; MaxBackoff caps it further when larger.
const MaxRetryAfter = 24 * time.Hour

// QuietPeriod is how long a host whose delay was raised by rate limits must
// answer without one before the raise is halved (NUTCH-2946 and
// StormCrawler forgive after 30 quiet minutes).
const QuietPeriod = 30 * time.Minute

// rateFloor is the smallest learned delay: a host limiting us while we wait
// nothing (FetchDelay 0) is first slowed to one request a second.
const rateFloor = time.Second

// backoffFloor keeps a zero FetchDelay from retrying in a tight loop.
const backoffFloor = 100 * time.Millisecond

// State is one host's politeness state, kept in the store across
// invocations and runs.
type State struct {
	// LastFetch is when the last response to this host ended; requests
	// start no sooner than LastFetch plus the host's delay.
	LastFetch time.Time
	// PauseUntil holds the host back (Retry-After, back-off) until then.
	PauseUntil time.Time
	// Errors counts consecutive failed requests, for exponential back-off.
	Errors int
	// FailingSince is when the host's current run of failures began; zero
	// while it answers. Past GiveUpAfter its queued URLs are given up.
	FailingSince time.Time
	// LastError says what the latest of those failures was.
	LastError string
	// RateDelay is the host's own delay learned from rate-limit signals
	// (429 or 503 without Retry-After); zero when it never limited us or
	// has been forgiven.
	RateDelay time.Duration
	// RateSince is when RateDelay was last raised or halved: the start of
	// the quiet period that lowers it next.
	RateSince time.Time
	// LastTook is how long the last response took (request sent to last
	// byte): the adaptive delay after it is DelayFactor times that.
	LastTook time.Duration
	// LastFailed is when the latest failed request of the failure run
	// ended (AskedSince); zero in states stored before it was kept, where
	// LastFetch stands in.
	LastFailed time.Time

	// Origin is the origin (scheme://host:port) whose failure run the
	// fields PauseUntil, Errors, FailingSince, LastError and LastFailed
	// hold; "" until the host's first origin is worked (and in states
	// stored before origins were told apart: the first origin worked
	// takes their run). Others holds the failure runs of the host's other
	// origins, only while they fail. The delay (LastFetch and the learned
	// delays) stays one per host: see Switch.
	Origin string
	Others map[string]Run
}

// Run is one origin's failure run, kept in State.Others while another
// origin's is in the State's own fields.
type Run struct {
	PauseUntil   time.Time
	Errors       int
	FailingSince time.Time
	LastError    string
	LastFailed   time.Time
}

// MaxOrigins bounds the failure runs a host keeps for its other origins
// (State.Others), so a host's stored state stays small (a DynamoDB item
// is at most 400 KB, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html):
// beyond it the run asked least recently is dropped, and its origin
// starts afresh when asked again.
const MaxOrigins = 8

// run is the failure run in s's own fields.
func (s *State) run() Run {
	return Run{PauseUntil: s.PauseUntil, Errors: s.Errors, FailingSince: s.FailingSince, LastError: s.LastError, LastFailed: s.LastFailed}
}

func (s *State) setRun(r Run) {
	s.PauseUntil, s.Errors, s.FailingSince, s.LastError, s.LastFailed = r.PauseUntil, r.Errors, r.FailingSince, r.LastError, r.LastFailed
}

// held tells whether a run is worth keeping at now: its origin fails, or
// is paused beyond now.
func (r Run) held(now time.Time) bool {
	return !r.FailingSince.IsZero() || r.Errors > 0 || r.PauseUntil.After(now)
}

// Switch makes origin's failure run the one in s's own fields, so every
// rule (Failed, Answered, Bound, GivesUp, Next) applies to that origin
// alone: one origin's failures pace and give up only its own URLs, while
// the delay between any two requests to the host stays one. The run it
// replaces goes to Others while it fails or is paused (an origin that
// answers costs nothing stored); past MaxOrigins the run failed least
// recently is dropped.
func (s *State) Switch(origin string, now time.Time) {
	if origin == s.Origin || origin == "" {
		return
	}
	if s.Origin == "" {
		// The host's first origin, or a state stored before origins were
		// told apart: its run, if any, is this origin's.
		s.Origin = origin
		return
	}
	cur := s.run()
	next := s.Others[origin]
	delete(s.Others, origin)
	if cur.held(now) {
		if s.Others == nil {
			s.Others = map[string]Run{}
		}
		s.Others[s.Origin] = cur
		for len(s.Others) > MaxOrigins {
			var oldest string
			for o, r := range s.Others {
				if oldest == "" || r.LastFailed.Before(s.Others[oldest].LastFailed) {
					oldest = o
				}
			}
			delete(s.Others, oldest)
		}
	}
	if len(s.Others) == 0 {
		s.Others = nil
	}
	s.setRun(next)
	s.Origin = origin
}

// PausedUntil is when origin's own pause (back-off, Retry-After) ends: the
// zero time when it has none.
func (s State) PausedUntil(origin string) time.Time {
	if origin == s.Origin || s.Origin == "" {
		return s.PauseUntil
	}
	return s.Others[origin].PauseUntil
}

// EarliestPause is the earliest pause of the host's origins: the
// host is due again when the first of them may be asked.
func (s State) EarliestPause() time.Time {
	t := s.PauseUntil
	for _, r := range s.Others {
		if r.PauseUntil.Before(t) {
			t = r.PauseUntil
		}
	}
	return t
}

// Policy is the parameters the rules read, taken once from params.
type Policy struct {
	FetchDelay  time.Duration
	DelayFactor float64
	MaxDelay    time.Duration
	MaxBackoff  time.Duration
	GiveUpAfter time.Duration
}

// NewPolicy takes the politeness parameters from p.
func NewPolicy(p params.Params) Policy {
	return Policy{FetchDelay: p.FetchDelay, DelayFactor: p.DelayFactor, MaxDelay: p.MaxDelay,
		MaxBackoff: p.MaxBackoff, GiveUpAfter: p.GiveUpAfter}
}

// Delay is the pause after the last response before the next request: the
// largest of FetchDelay, the robots.txt Crawl-delay, DelayFactor x the last
// response's duration (capped by MaxDelay) and the learned rate-limit
// delay. Only the adaptive parts are capped by MaxDelay: FetchDelay and a
// Crawl-delay are what the operator and the site asked for.
func (p Policy) Delay(s State, crawlDelay time.Duration) time.Duration {
	adaptive := time.Duration(p.DelayFactor * float64(s.LastTook))
	adaptive = max(adaptive, s.RateDelay)
	if p.MaxDelay > 0 {
		adaptive = min(adaptive, p.MaxDelay)
	}
	return max(p.FetchDelay, crawlDelay, adaptive)
}

// Next is when the host may be requested again, given its delay.
func (s State) Next(delay time.Duration) time.Time {
	next := s.LastFetch.Add(delay)
	if s.PauseUntil.After(next) {
		next = s.PauseUntil
	}
	return next
}

// Fetched records that a request ended at t (answered or not).
func (s *State) Fetched(t time.Time) {
	if t.After(s.LastFetch) {
		s.LastFetch = t
	}
}

// Answered records a usable answer at now that took took: the failure run
// and back-off end, the adaptive delay follows took, and a learned
// rate-limit delay is halved once a quiet period has passed since it was
// last raised or halved (gone when it falls to FetchDelay or below).
func (p Policy) Answered(s *State, now time.Time, took time.Duration) {
	s.Errors = 0
	s.FailingSince, s.LastError, s.LastFailed = time.Time{}, "", time.Time{}
	s.LastTook = max(0, took)
	if s.RateDelay > 0 && now.Sub(s.RateSince) >= QuietPeriod {
		s.RateDelay /= 2
		s.RateSince = now
		if s.RateDelay <= p.FetchDelay || s.RateDelay < rateFloor {
			s.RateDelay, s.RateSince = 0, time.Time{}
		}
	}
}

// Failed records a request at now that got no usable answer (msg says what
// happened): the failure run goes on and the host backs off, no further
// than the run's bound so the give-up is not late.
func (p Policy) Failed(s *State, now time.Time, msg string) {
	p.fail(s, now, msg)
	s.PauseUntil = now.Add(p.Backoff(*s))
	if b, _ := p.Bound(*s); s.PauseUntil.After(b) {
		s.PauseUntil = b
	}
}

func (p Policy) fail(s *State, now time.Time, msg string) {
	if s.FailingSince.IsZero() {
		s.FailingSince = now
	}
	s.LastFailed = now
	s.LastError = msg
	s.Errors++
}

// Refused records a page's answer at now with status code (not usable:
// 5xx, 429, 408) and the server's Retry-After when it sent one. A 429 or
// 503 with a Retry-After (see AsksToWait) pauses the host for the larger
// of what the server says (up to MaxRetryAfter, or MaxBackoff when longer)
// and the host's back-off; without one it is a rate-limit signal that
// raises the host's own delay for good (see RateLimited). Either way the
// failure run goes on and the host backs off.
func (p Policy) Refused(s *State, now time.Time, msg string, code int, retryAfter time.Duration, retryAfterSet bool) {
	limit := code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
	if AsksToWait(code, retryAfter, retryAfterSet) {
		p.Failed(s, now, msg)
		asked := now.Add(min(retryAfter, max(p.MaxBackoff, MaxRetryAfter)))
		if asked.After(s.PauseUntil) {
			s.PauseUntil = asked
		}
		return
	}
	if limit {
		p.RateLimited(s, now)
	}
	p.Failed(s, now, msg)
}

// AsksToWait reports whether an answer with status code and Retry-After
// tells the host's own pause: a 429 or 503 whose Retry-After lies in the
// future. "Retry-After: 0" or a date in the past (a server whose clock runs
// behind sends one on every answer) counts as absent, or a rate-limited
// host would be asked again at once, every time, with no back-off.
func AsksToWait(code int, retryAfter time.Duration, retryAfterSet bool) bool {
	limit := code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
	return limit && retryAfterSet && retryAfter > 0
}

// RateLimited raises the host's learned delay at now: twice the delay it
// had (at least rateFloor), doubling per signal up to MaxDelay.
func (p Policy) RateLimited(s *State, now time.Time) {
	cur := max(s.RateDelay, p.FetchDelay)
	next := max(2*cur, rateFloor)
	if p.MaxDelay > 0 {
		next = min(next, max(p.MaxDelay, cur))
	}
	s.RateDelay, s.RateSince = next, now
}

// Backoff is the pause after the s.Errors-th failure in a row:
// FetchDelay x 2^Errors, capped by MaxBackoff.
func (p Policy) Backoff(s State) time.Duration {
	base := max(p.FetchDelay, backoffFloor)
	back := base << min(s.Errors, 30)
	if back <= 0 || back > p.MaxBackoff {
		back = p.MaxBackoff
	}
	return back
}

// Bound is when the host's failure run reaches GiveUpAfter; false when the
// host is not failing. Only failures count: waiting (a delay, a pause) does
// not start or stretch a run.
func (p Policy) Bound(s State) (time.Time, bool) {
	if s.FailingSince.IsZero() {
		return time.Time{}, false
	}
	return s.FailingSince.Add(p.GiveUpAfter), true
}

// Expired reports whether the host must give up at now: its failure run has
// lasted GiveUpAfter, or the server asked for a pause beyond that.
func (p Policy) Expired(s State, now time.Time) bool {
	b, failing := p.Bound(s)
	return failing && (s.PauseUntil.After(b) || !now.Before(b))
}

// GivesUp reports whether the host must give up at now in a run that began
// at runStart: Expired, and the latest request, which failed (the host is
// failing), was made in this run. A failure run that outlasted GiveUpAfter
// while no process ran (a stop and a restart later) gets one probe first:
// the host may answer now. A deployment whose runs come further apart than
// GiveUpAfter still gives a failing host up, after one probe per run.
func (p Policy) GivesUp(s State, now, runStart time.Time) bool {
	return p.Expired(s, now) && p.AskedSince(s, runStart)
}

// AskedSince reports whether a failing origin's latest failed request
// (LastFailed; LastFetch in a state stored before it was kept) ended at or
// after runStart. Another origin's requests to the host do not count: they
// asked nothing of this one.
func (p Policy) AskedSince(s State, runStart time.Time) bool {
	last := s.LastFailed
	if last.IsZero() {
		last = s.LastFetch
	}
	return !s.FailingSince.IsZero() && !last.Before(runStart)
}

// GivenUp records the end of a give-up: the failure run, its pause and its
// error count are cleared so URLs that arrive later start afresh. The
// learned rate-limit delay and the last fetch stay: they are politeness.
func (s *State) GivenUp() {
	s.Errors = 0
	s.FailingSince, s.LastError, s.LastFailed = time.Time{}, "", time.Time{}
	s.PauseUntil = time.Time{}
}

// Drained records that every URL of the failure run has ended: later URLs
// get a bound of their own; the pause and back-off stay.
func (s *State) Drained() {
	s.FailingSince, s.LastError, s.LastFailed = time.Time{}, "", time.Time{}
	for o, r := range s.Others {
		r.FailingSince, r.LastError, r.LastFailed = time.Time{}, "", time.Time{}
		s.Others[o] = r
	}
}
