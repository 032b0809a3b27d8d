package main

import (
	"math"
	"slices"
)

// The producer, the input queue with its event source mapping, the ingest
// function and the wake queue it writes to.
//
// The mapping (AWS Lambda, "Configuring scaling behavior for SQS event
// source mappings"): five pollers at first, each gathering a batch of up to
// IngestBatchSize messages (and 6 MB) for up to IngestBatchingWindowSeconds,
// then invoking ingest and waiting for it; arrivals spread over the pollers
// that are not invoking. While messages wait with every poller busy, up to
// 300 more pollers a minute (five a second here), to 1,000 or the mapping's
// MaximumConcurrency.

type msg struct {
	first, n int32 // URL ids first..first+n-1
	recv     uint8
}

type poller struct {
	i       int
	busy    bool // invoking
	batch   []int32
	bytes   int
	opened  int64
	gen     int // guards the window timer
	pub     *publisher
	warm    bool
	wakeAt  map[int]int64 // wake.Queue.last: by shard, when its latest wake-up is due
	started int64         // the instance's start (its deployment generation)
	pos     positions     // the instance's due-bucket positions (dueindex.go)
	// paramsAt is when the instance last loaded its parameters, reloadIn
	// how long after it reloads them.
	paramsAt, reloadIn int64
}

// positions is the instance's bucket positions, forgotten when too many
// (a forgotten one costs a refused add, as in the store).
func (p *poller) positions() positions {
	if p.pos == nil || len(p.pos) > 4096 {
		p.pos = positions{}
	}
	return p.pos
}

type inputQueue struct {
	msgs        []msg
	backlog     []int32 // visible messages no poller has taken, FIFO from bh
	bh          int
	pollers     []*poller
	doneSending bool
	cap         int
	rr          int
	waited      bool // messages waited for a poller since the last scale-up
	calm        int  // seconds since messages last waited
}

const msgBytesPerURL = 110

// startProducer schedules the arrivals: a steady rate in 100 ms slices, or
// a dump at time zero.
func (s *Sim) startProducer() {
	c := s.cfg
	s.in.cap = 1000
	if c.IngestMaxConc > 0 {
		s.in.cap = c.IngestMaxConc
	}
	for i := 0; i < min(c.IngestPollers, s.in.cap); i++ {
		s.in.pollers = append(s.in.pollers, s.newPoller())
	}
	s.at(sec, s.scalePollers)
	if len(c.Sizes) > 0 {
		s.sendList()
		return
	}
	if c.Burst > 0 {
		s.sendURLs(c.Burst, 0, 0)
		s.in.doneSending = true
		s.at(0, func() { s.arrive(0, int32(len(s.in.msgs))) })
		return
	}
	slice := 100 * ms
	perSlice := c.PerDay / 86400 * 0.1
	end := int64(c.Window)
	var next func(t int64)
	next = func(t int64) {
		n := poisson(s, perSlice)
		first := int32(len(s.in.msgs))
		s.sendURLs(n, t, slice)
		last := int32(len(s.in.msgs))
		lat := c.SQSLatency.sample(s.rng, c.FixedLatency)
		s.at(t+slice+lat, func() { s.arrive(first, last) })
		if t+slice < end {
			s.at(t+slice, func() { next(t + slice) })
		} else {
			s.in.doneSending = true
		}
	}
	s.at(0, func() { next(0) })
}

// sendURLs creates n URLs sent at uniform times in [t, t+span), packed into
// messages of URLsPerMessage.
func (s *Sim) sendURLs(n int, t, span int64) {
	per := max(1, s.cfg.URLsPerMessage)
	for n > 0 {
		k := min(per, n)
		first := int32(len(s.urlSent))
		at := t
		if span > 0 {
			at = t + int64(s.rng.Float64()*float64(span))
		}
		s.m.series(at).sent += int32(k)
		for j := 0; j < k; j++ {
			s.urlSent = append(s.urlSent, at)
			s.urlHost = append(s.urlHost, int32(pick(s.cdf, s.rng)))
			s.urlState = append(s.urlState, urlSent)
			s.urlEnds = append(s.urlEnds, 0)
		}
		s.in.msgs = append(s.in.msgs, msg{first: first, n: int32(k)})
		n -= k
	}
}

func poisson(s *Sim, mean float64) int {
	if mean > 50 {
		return max(0, int(math.Round(mean+math.Sqrt(mean)*s.rng.NormFloat64())))
	}
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= s.rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

func (s *Sim) newPoller() *poller {
	p := &poller{i: len(s.in.pollers), wakeAt: map[int]int64{}, started: s.now}
	p.pub = &publisher{s: s}
	return p
}

// arrive makes messages [first, last) visible and hands them to pollers.
func (s *Sim) arrive(first, last int32) {
	for id := first; id < last; id++ {
		s.in.backlog = append(s.in.backlog, id)
	}
	s.feed()
}

// feed hands waiting messages to pollers that are not invoking, spread
// evenly; a full batch is invoked at once, others when their window ends.
func (s *Sim) feed() {
	in := &s.in
	var free []*poller
	for _, p := range in.pollers {
		if !p.busy {
			free = append(free, p)
		}
	}
	if len(free) == 0 {
		if in.bh < len(in.backlog) {
			in.waited = true
		}
		return
	}
	for in.bh < len(in.backlog) {
		progress := false
		for k := 0; k < len(free) && in.bh < len(in.backlog); k++ {
			p := free[(in.rr+k)%len(free)]
			if p.busy {
				continue
			}
			// A poller takes what is waiting in receives of ten.
			share := max(10, (len(in.backlog)-in.bh)/len(free))
			for j := 0; j < share && in.bh < len(in.backlog); j++ {
				id := in.backlog[in.bh]
				b := int(s.in.msgs[id].n) * msgBytesPerURL
				if len(p.batch) >= s.cfg.IngestBatchSize || p.bytes+b > 6<<20 {
					break
				}
				if len(p.batch) == 0 {
					s.openBatch(p)
				}
				p.batch = append(p.batch, id)
				p.bytes += b
				in.bh++
				progress = true
			}
			if len(p.batch) >= s.cfg.IngestBatchSize || p.bytes+msgBytesPerURL > 6<<20 {
				s.invokeIngest(p)
			}
		}
		in.rr++
		if !progress {
			break
		}
		free = free[:0]
		for _, p := range in.pollers {
			if !p.busy {
				free = append(free, p)
			}
		}
		if len(free) == 0 {
			in.waited = true
			break
		}
	}
	if in.bh > 4096 && in.bh*2 > len(in.backlog) {
		in.backlog = append([]int32(nil), in.backlog[in.bh:]...)
		in.bh = 0
	}
}

func (s *Sim) openBatch(p *poller) {
	p.opened = s.now
	p.gen++
	gen := p.gen
	s.after(int64(s.cfg.IngestWindow), func() {
		if p.gen == gen && !p.busy && len(p.batch) > 0 {
			s.invokeIngest(p)
		}
	})
}

// scalePollers adds pollers while messages wait on the queue with every
// poller busy, five a second (up to 300 a minute, as AWS says), to 1,000 or
// the mapping's MaximumConcurrency, and goes back towards the first five
// when none waited for a minute.
func (s *Sim) scalePollers() {
	in := &s.in
	backlog := in.bh < len(in.backlog)
	if backlog || in.waited {
		in.calm = 0
	} else {
		in.calm++
	}
	switch {
	case backlog && len(in.pollers) < in.cap:
		add := min(5, in.cap-len(in.pollers))
		for i := 0; i < add; i++ {
			in.pollers = append(in.pollers, s.newPoller())
		}
		s.feed()
	case in.calm >= 60 && len(in.pollers) > s.cfg.IngestPollers:
		keep := in.pollers[:0]
		for i, p := range in.pollers {
			if i < s.cfg.IngestPollers || p.busy || len(p.batch) > 0 {
				keep = append(keep, p)
			}
		}
		in.pollers = keep
	}
	in.waited = false
	if !s.settled() {
		s.after(sec, s.scalePollers)
	}
}

// invokeIngest runs the ingest function on p's batch.
func (s *Sim) invokeIngest(p *poller) {
	if !s.lambdaRoom() {
		// Throttled: the mapping backs off and invokes again.
		s.ddb.throttled[lambdaThrottle]++
		p.busy = true
		s.after(sec, func() {
			p.busy = false
			if len(p.batch) > 0 {
				s.invokeIngest(p)
			}
		})
		return
	}
	batch := p.batch
	p.batch, p.bytes, p.busy = nil, 0, true
	p.gen++
	s.m.sqsReq(s.now, "input ReceiveMessage", math.Ceil(float64(len(batch))/10))
	start := s.now
	over := s.lambdaStart(lambdaIngest, &p.warm)
	// Parameters at the instance's start and when paramTTL old (ssm.go);
	// a failed load hands the whole batch back.
	paramsOK := true
	switch {
	case p.paramsAt == 0:
		var w int64
		w, paramsOK = s.firstLoad(s.cfg.IngestTimeout / 2)
		over += w
		p.paramsAt, p.reloadIn = s.now, s.reloadEvery()
	case s.now-p.paramsAt >= p.reloadIn:
		// A failed reload keeps the values in force.
		w, _ := s.loadParams(0)
		over += w
		p.paramsAt, p.reloadIn = s.now, s.reloadEvery()
	}
	g := s.gen(p.started)
	// Group by host, in order of first appearance (Ingester.Ingest).
	type group struct {
		h   *host
		ids []int32
	}
	var order []*group
	byRank := map[int32]*group{}
	urls := 0
	for _, m := range batch {
		mm := s.in.msgs[m]
		for id := mm.first; id < mm.first+mm.n; id++ {
			r := s.urlHost[id]
			gr := byRank[r]
			if gr == nil {
				gr = &group{h: s.host(int(r))}
				byRank[r] = gr
				order = append(order, gr)
			}
			gr.ids = append(gr.ids, id)
			urls++
		}
	}
	// 3.5 µs of CPU per URL (docs/benchmarks.md, section 3).
	cpu := int64(urls) * 3500
	failedURL := map[int32]bool{}
	activated := map[int]bool{}
	lanes := max(1, s.cfg.IngestLanes)
	next, running := 0, 0
	var lane func()
	finish := func() {
		// Wake the shards of the activated hosts, then return.
		wakeWait := s.sendWakes(p, g, activated)
		s.after(wakeWait, func() { s.endIngest(p, batch, start, failedURL) })
	}
	lane = func() {
		if next >= len(order) {
			running--
			if running == 0 {
				finish()
			}
			return
		}
		gr := order[next]
		next++
		wait, ok, act, evicted := s.appendHost(gr.h, gr.ids, start, g.vshards, p.positions())
		if !ok {
			for _, id := range gr.ids {
				failedURL[id] = true
			}
		} else {
			for _, id := range gr.ids {
				if s.urlState[id] == urlSent {
					s.urlState[id] = urlQueued
				}
			}
			if act {
				activated[int(gr.h.vs)] = true
			}
		}
		joins := 1
		done := func() {
			joins--
			if joins == 0 {
				lane()
			}
		}
		if len(evicted) > 0 {
			joins++
			s.m.dropped += len(evicted)
			items := make([]resultItem, len(evicted))
			for i, id := range evicted {
				items[i] = resultItem{id: id, status: stDropped, bytes: 600}
			}
			p.pub.publish(items, done)
		}
		s.after(wait, done)
	}
	startLanes := func() {
		if len(order) == 0 {
			running = 1
			lane()
			return
		}
		for i := 0; i < lanes && i < len(order); i++ {
			running++
		}
		for i, n := 0, running; i < n; i++ {
			lane()
		}
	}
	if !paramsOK {
		// The handler fails before any append: every record back.
		for _, gr := range order {
			for _, id := range gr.ids {
				failedURL[id] = true
			}
		}
		order = nil
	}
	s.after(over+cpu, func() {
		if (s.cfg.Layout == LayoutBatchList || s.cfg.Layout == LayoutListsBuckets) && len(order) > 0 {
			// The batch's due lists go first: a host is named before it
			// has work, never the other way round.
			hosts := make([]*host, len(order))
			for i, gr := range order {
				hosts[i] = gr.h
			}
			s.after(s.writeLists(hosts, g.vshards), startLanes)
			return
		}
		startLanes()
	})
}

// endIngest finishes an invocation: the mapping deletes the records that
// succeeded and hands the failed ones back (visible again after the
// visibility timeout; after maxReceiveCount they go to the dead-letter
// queue). An invocation that outlived its timeout failed as a whole.
func (s *Sim) endIngest(p *poller, batch []int32, start int64, failedURL map[int32]bool) {
	dur := s.now - start
	timedOut := dur > int64(s.cfg.IngestTimeout)
	if timedOut {
		s.m.ingestTimeouts++
		dur = int64(s.cfg.IngestTimeout)
	}
	s.lambdaEnd(lambdaIngest, start, start+dur)
	ok := 0
	var back []int32
	for _, m := range batch {
		mm := &s.in.msgs[m]
		failed := timedOut
		for id := mm.first; id < mm.first+mm.n && !failed; id++ {
			failed = failedURL[id]
		}
		if !failed {
			ok++
			continue
		}
		mm.recv++
		if int(mm.recv) >= s.cfg.MaxReceiveCount {
			s.m.dlq += int(mm.n)
			continue
		}
		s.m.redeliver++
		back = append(back, m)
	}
	if len(back) > 0 {
		s.after(int64(s.cfg.VisibilityTimout), func() {
			s.in.backlog = append(s.in.backlog, back...)
			s.feed()
		})
	}
	s.m.sqsReq(s.now, "input DeleteMessageBatch", math.Ceil(float64(ok)/10))
	s.after(max(0, start+dur-s.now), func() {
		p.busy = false
		s.feed()
	})
}

// sendWakes is wake.Queue.Wake for one ingest instance: a shard is woken
// at most once every wake.DefaultEvery from one instance (a later wake-up
// is delayed to then, and one still to come covers the rest). It returns
// how long the send takes.
func (s *Sim) sendWakes(p *poller, g generation, vshards map[int]bool) int64 {
	if len(vshards) == 0 {
		return 0
	}
	var shards []int
	for v := range vshards {
		if sh := v % g.shards; !slices.Contains(shards, sh) {
			shards = append(shards, sh)
		}
	}
	slices.Sort(shards)
	var sends []int64
	var send []int
	for _, sh := range shards {
		l, ok := p.wakeAt[sh]
		at := s.now
		switch {
		case !ok || s.now >= l+int64(wakeEvery):
		case l >= s.now:
			continue
		default:
			at = l + int64(wakeEvery)
		}
		p.wakeAt[sh] = at
		send = append(send, sh)
		sends = append(sends, at)
	}
	if len(send) == 0 {
		return 0
	}
	lat := s.cfg.SQSLatency.sample(s.rng, s.cfg.FixedLatency)
	s.m.sqsReq(s.now, "wake SendMessageBatch", math.Ceil(float64(len(send))/10))
	for i, sh := range send {
		// SQS delays in whole seconds, rounded up.
		delay := (sends[i] - s.now + sec - 1) / sec * sec
		s.wakeArrive(s.now+lat+delay, sh, g)
	}
	return lat
}
