package main

import (
	"math"

	"github.com/urldownloader/urldownloader/shared/aws/sqsout"
	"github.com/urldownloader/urldownloader/shared/domain/params"
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
// fetched page its body as check.keepBody packs it (result.Pack): text as
// it is, binary as base64, or with ResultBodyEncoding=gzip a text body at
// gzipTextRatio of that (binary bodies, images and archives, are taken not
// to shrink and keep base64). A body longer than InlineBodyBytes is
// streamed to the body bucket, as is one whose packing is over it: the
// result then carries a reference, and the bucket's requests are counted
// (stored).
func (s *Sim) resultBytes(body int, binary bool) int32 {
	const envelope = 450
	p := s.cfg.P
	packed := float64(body)
	switch {
	case binary:
		packed = float64(body) * 4 / 3
	case p.ResultBodyEncoding == params.BodyGzip:
		packed = float64(body) * gzipTextRatio
	}
	if int64(body) > p.InlineBodyBytes || int64(packed) > p.InlineBodyBytes {
		s.stored(body)
		return envelope + storedRef
	}
	return int32(min(envelope+int(packed), sqsout.DefaultMaxMessageBytes-1024))
}

// The body bucket's requests at us-east-1 list prices: PUT-class (PUT,
// multipart create, part, complete, COPY) and GET-class (HEAD, GET).
const (
	priceS3Put = 0.005 / 1000
	priceS3Get = 0.0004 / 1000
)

// storedRef is what a body reference adds to a result: bucket, key
// (sha256/ and 64 hex digits), bytes, sha256 again, content type.
const storedRef = 250

// stored counts the body bucket's requests for one body of n bytes, as
// shared/aws/s3body sends them for a body not stored before (the simulation's
// bodies are all distinct): up to a part (5 MiB), HEAD and PUT; above,
// CreateMultipartUpload, a PUT per part, CompleteMultipartUpload, HEAD,
// COPY (and a DELETE of the temporary, which is free).
func (s *Sim) stored(n int) {
	const part = 5 << 20
	if n <= part {
		s.m.s3Req(s.now, 1, 1)
		return
	}
	parts := (n + part - 1) / part
	s.m.s3Req(s.now, float64(parts+3), 1)
}
