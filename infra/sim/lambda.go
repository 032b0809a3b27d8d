package main

// Lambda: invocations, their concurrency and GB-seconds. An invocation
// pays the invoke overhead, and a cold start when no instance of its
// function is idle; it is billed from its start to its end at the
// function's memory size.

type lambdaKind int

const (
	lambdaIngest lambdaKind = iota
	lambdaCheck
)

type runState struct {
	conc                  [2]int
	peak                  [2]int
	peakTotal             int
	gbs                   [2]float64
	invocations           [2]int64
	idle                  [2]int // warm instances
	lastCold              bool   // the latest invocation started a new instance
	wakeThrottled         bool   // the wake queue waits for concurrency
	workers, peakWorkers  int
	wakeInFlight          int
	wakeQueue             []wakeMsg
	nextID                int
	phase                 []int64
	scheduled, woken      int64
	idleRuns, contendRuns int64
	// blocked counts scheduled runs that never held a lease (a woken run
	// had the shard) and waited out their whole run; blockedGBs their cost.
	blocked    int64
	blockedGBs float64
}

type wakeMsg struct {
	shard int
	gen   generation
}

// lambdaStart begins an invocation and returns its start-up time.
func (s *Sim) lambdaStart(k lambdaKind, warm *bool) int64 {
	r := &s.runs
	r.conc[k]++
	r.invocations[k]++
	s.m.series(s.now).invocations++
	r.peak[k] = max(r.peak[k], r.conc[k])
	r.peakTotal = max(r.peakTotal, r.conc[0]+r.conc[1])
	s.m.series(s.now).check = int16(r.conc[lambdaCheck])
	s.m.series(s.now).ingest = int16(r.conc[lambdaIngest])
	over := s.cfg.InvokeOverhead.sample(s.rng, s.cfg.FixedLatency)
	cold := false
	if warm != nil {
		cold = !*warm
		*warm = true
	} else if r.idle[k] > 0 {
		r.idle[k]--
	} else {
		cold = true
	}
	if cold {
		over += int64(s.cfg.ColdStart)
	}
	r.lastCold = cold
	return over
}

// lambdaRoom tells whether the account's concurrency (AccountConc) has
// room for one more invocation: past it Lambda throttles
// (https://docs.aws.amazon.com/lambda/latest/dg/lambda-concurrency.html).
// Each caller retries as its event source does.
func (s *Sim) lambdaRoom() bool {
	return s.runs.conc[0]+s.runs.conc[1] < s.cfg.AccountConc
}

// lambdaEnd ends an invocation that ran from start to end.
func (s *Sim) lambdaEnd(k lambdaKind, start, end int64) {
	r := &s.runs
	r.conc[k]--
	mem := s.cfg.IngestMemoryMB
	if k == lambdaCheck {
		mem = s.cfg.CheckMemoryMB
		r.idle[k]++
	}
	r.gbs[k] += float64(end-start) / float64(sec) * float64(mem) / 1024
	s.m.span(start, end, float64(mem)/1024)
}
