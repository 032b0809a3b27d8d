package main

import (
	"math"

	"github.com/urldownloader/urldownloader/shared/sqsout"
)

// resultStatus is a result message's status.
type resultStatus int

const (
	stFetched resultStatus = iota
	stFetchError
	stDenied
	stDropped
	nStatus
)

// resultItem is one result waiting in a publisher.
type resultItem struct {
	id     int32
	status resultStatus
	bytes  int32
}

// publisher is one function instance's sqsout.Publisher: results from its
// callers are coalesced into SendMessageBatch calls of up to ten entries and
// 256 KiB less 1 KiB, sent when full or 100 ms after the first result
// (Options.Linger). A Publish returns when every batch holding one of its
// results is sent; a URL's result counts from then.
type publisher struct {
	s       *Sim
	items   []resultItem
	bytes   int
	waiters []*pubWait
	timer   bool
	gen     int
}

type pubWait struct {
	left int
	cb   func()
}

const linger = 100 * ms

// publish sends results; cb runs when all are on the queue.
func (p *publisher) publish(items []resultItem, cb func()) {
	if len(items) == 0 {
		if cb != nil {
			p.s.after(0, cb)
		}
		return
	}
	w := &pubWait{cb: cb}
	limit := sqsout.DefaultMaxMessageBytes - 1024
	for _, it := range items {
		if len(p.items) > 0 && p.bytes+int(it.bytes) > limit {
			p.flush()
		}
		p.items = append(p.items, it)
		p.bytes += int(it.bytes)
		if len(p.waiters) == 0 || p.waiters[len(p.waiters)-1] != w {
			p.waiters = append(p.waiters, w)
			w.left++
		}
		if len(p.items) >= sqsout.MaxBatchEntries {
			p.flush()
		} else if !p.timer {
			p.timer = true
			gen := p.gen
			p.s.after(linger, func() {
				if p.gen == gen && p.timer {
					p.flush()
				}
			})
		}
	}
}

func (p *publisher) flush() {
	p.timer = false
	p.gen++
	if len(p.items) == 0 {
		return
	}
	items, waiters, bytes := p.items, p.waiters, p.bytes
	p.items, p.waiters, p.bytes = nil, nil, 0
	s := p.s
	// SQS bills every 64 KB of a request's payload as one request.
	s.m.sqsReq(s.now, "output SendMessageBatch", math.Ceil(float64(bytes)/(64<<10)))
	s.after(s.cfg.SQSLatency.sample(s.rng, s.cfg.FixedLatency), func() {
		for _, it := range items {
			s.end(it.id, it.status)
		}
		for _, w := range waiters {
			w.left--
			if w.left == 0 && w.cb != nil {
				w.cb()
			}
		}
	})
}

// resultBytes is the encoded size of a result: JSON fields, and for a
// fetched page its body as text, or base64 for binary bodies, cut to fit
// the message (result.Encode).
func (s *Sim) resultBytes(body int, binary bool) int32 {
	n := 450
	if binary {
		n += body * 4 / 3
	} else {
		n += body
	}
	return int32(min(n, sqsout.DefaultMaxMessageBytes-1024))
}
