package main

import (
	"time"

	"github.com/urldownloader/urldownloader/shared/aws/ssmparams"
	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// Parameter Store: one bucket of SSMRate transactions a second shared by
// every function of the account and region (GetParameter, GetParameters
// and GetParametersByPath alike: "Parameter Store ... 40 transactions per
// second (default throughput)",
// https://docs.aws.amazon.com/general/latest/gr/ssm.html). Each function
// instance reads its parameters (paramCalls calls) at its start and again
// whenever its cache is paramTTL old, less a jitter. A call past the second's share is
// throttled and retried as the SDK does; one throttled three times fails
// the load: a reload keeps the values in force, a first load is tried
// again every 2 s until the invocation's time is up (then it fails: ingest
// hands its batch back, a check run is skipped).

// paramCalls is one load's calls: the parameters by name, NamesPerCall
// a GetParameters call (shared/aws/ssmparams).
var paramCalls = (len(params.Names()) + ssmparams.NamesPerCall - 1) / ssmparams.NamesPerCall

const (
	// paramTTL is how long an instance keeps its parameters.
	paramTTL = params.MaxTTL
	// paramJitter is params.Cache's maxJitter: a reload comes early by
	// up to this share of paramTTL, drawn anew each time.
	paramJitter = 0.25
	// firstLoadRetry is params.Cache's wait between first loads that fail.
	firstLoadRetry = 2 * time.Second
)

// reloadEvery is the time to an instance's next reload.
func (s *Sim) reloadEvery() int64 {
	return int64(float64(paramTTL) * (1 - paramJitter*s.rng.Float64()))
}

// The reasons Parameter Store's and Lambda's throttles are counted under.
const (
	ssmThrottle    = "SSM parameters"
	lambdaThrottle = "Lambda invocation"
)

// ssmModel is the account's Parameter Store bucket.
type ssmModel struct {
	sec                     int64
	used                    float64
	calls, throttled, fails int64
	retries                 int64 // first loads tried again
}

// loadParams is one load, from at after now: its wait (latency and
// retries) and whether it succeeded.
func (s *Sim) loadParams(at int64) (int64, bool) {
	m := &s.ssm
	var wait int64
	for range paramCalls {
		m.calls++
		for attempt := 1; ; attempt++ {
			t := s.now + at + wait
			lat := s.cfg.SQSLatency.sample(s.rng, s.cfg.FixedLatency)
			if sc := t / sec; sc != m.sec {
				m.sec, m.used = sc, 0
			}
			if m.used+1 <= s.cfg.SSMRate {
				m.used++
				wait += lat
				break
			}
			m.throttled++
			s.ddb.throttled[ssmThrottle]++
			if attempt == 3 {
				return wait + lat, false
			}
			wait += lat + int64(s.rng.Float64()*float64(int64(1)<<attempt)*float64(sec))
		}
	}
	return wait, true
}

// firstLoad is a new instance's parameter load (params.Cache.WaitLoaded):
// tried again every firstLoadRetry until it succeeds or bound has passed,
// when the invocation fails (a failed operation). It returns the wait.
func (s *Sim) firstLoad(bound time.Duration) (int64, bool) {
	var wait int64
	for {
		w, ok := s.loadParams(wait)
		wait += w
		if ok {
			return wait, true
		}
		m := &s.ssm
		m.retries++
		if wait+int64(firstLoadRetry) > int64(bound) {
			m.fails++
			s.ddb.failed["parameter load"]++
			return wait, false
		}
		wait += int64(firstLoadRetry)
	}
}

// reloadParams reloads an invocation's parameters every paramTTL, less
// a jitter, while it runs.
func (s *Sim) reloadParams(inv *invocation) {
	s.after(s.reloadEvery(), func() {
		if inv.ended {
			return
		}
		// A failed reload keeps the values in force (params.Cache).
		s.loadParams(0)
		s.reloadParams(inv)
	})
}
