package engine

import (
	"context"
	"log/slog"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// handOff hands a worker's results to the publisher as they are fetched,
// instead of holding a round's bodies (up to ten pages) until the round
// ends. It keeps results only while they number fewer than a round and
// fill less than half an SQS batch (handOffBytes), and hands them over
// before one that would not fit in the same batch: small results still go
// out ten to a batch from a lone host (one SQS request per ten URLs, as a
// whole round did), and large ones, which could hardly share a batch, go
// at once. The publisher coalesces what concurrent workers hand it into
// batches of ten across hosts.
//
// A worker has at most one hand-over in flight: the next waits for it. A
// worker so holds at most about one batch beyond what the publisher is
// sending for it, plus the body it is reading (see WorkerBytes). The wait
// costs nothing in the common case (the host's delay outlasts a send) and
// slows only a worker whose output queue is slower than its host.
type handOff struct {
	w       *worker
	pending []result.Result
	bytes   int
	// last is the latest hand-over, nil before the first.
	last *sent
}

// sent is one hand-over: results given to the publisher in one call.
type sent struct {
	ids  []string
	done chan struct{}
	err  error
}

// handed collects a round's hand-overs: the round is committed (its URLs
// leave the queue) only once they are out.
type handed struct {
	batches []*sent
}

// resultBytes approximates a result's encoded size: its body and texts
// plus the JSON around them.
func resultBytes(r result.Result) int {
	return len(r.Data) + len(r.URL) + len(r.Location) + len(r.ValidatorsURL) + len(r.Error) + 512
}

// add keeps res for the round rd and hands results over when a batch is
// full. False means an injected crash stopped the run.
func (h *handOff) add(ctx context.Context, rd *handed, res result.Result) bool {
	n := resultBytes(res)
	if len(h.pending) > 0 && h.bytes+n > handOffBytes {
		if !h.flush(ctx, rd) {
			return false
		}
	}
	h.pending = append(h.pending, res)
	h.bytes += n
	if len(h.pending) >= HeadBatch || h.bytes >= handOffBytes/2 {
		return h.flush(ctx, rd)
	}
	return true
}

// flush hands the kept results over to the publisher, once the previous
// hand-over is out. False means an injected crash stopped the run: nothing
// more is published.
func (h *handOff) flush(ctx context.Context, rd *handed) bool {
	if len(h.pending) == 0 {
		return true
	}
	w := h.w
	if w.crash(CrashBeforePublish, w.key) {
		return false
	}
	h.wait()
	results := h.pending
	h.pending, h.bytes = nil, 0
	s := &sent{done: make(chan struct{})}
	for _, r := range results {
		s.ids = append(s.ids, r.ID)
	}
	go func() {
		defer close(s.done)
		if err := w.engine.Publisher.Publish(ctx, results); err != nil {
			w.engine.Log.ErrorContext(ctx, "publish results", "host", w.key, "count", len(results), "error", err)
			w.errs.Add(1)
			s.err = err
			return
		}
		w.count(results)
		// At debug level one line per URL, so a URL can be traced by
		// its id from ingest to its result.
		if w.engine.Log.Enabled(ctx, slog.LevelDebug) {
			for _, r := range results {
				w.engine.Log.DebugContext(ctx, "result published", "id", r.ID, "host", r.Host, "url", r.URL, "status", r.Status, "httpStatus", r.HTTPStatus)
			}
		}
	}()
	h.last = s
	rd.batches = append(rd.batches, s)
	return true
}

// wait returns once the latest hand-over (and so every earlier one) is
// out.
func (h *handOff) wait() {
	if h.last != nil {
		<-h.last.done
	}
}

// wait returns once the round's hand-overs are out: done lists the IDs
// whose results were sent, refused whether any were not (those stay
// queued, to be fetched again).
func (rd *handed) wait() (done []string, refused bool) {
	for _, s := range rd.batches {
		<-s.done
		if s.err != nil {
			refused = true
			continue
		}
		done = append(done, s.ids...)
	}
	return done, refused
}
