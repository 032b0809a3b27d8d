package localmode

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

var _ hostqueue.Publisher = (*lineWriter)(nil)

// lineWriter is the output queue of local mode: it writes each result as a
// JSON line and, when the output is a regular file, syncs it before
// Publish returns. The engine publishes before it commits a URL as done,
// so a result on disk is never one the store has forgotten and the disk
// lost: at least once, as on SQS.
//
// Concurrent Publish calls share writes and syncs (group commit): while
// one caller writes, the others' lines gather, and the next write takes
// them all, so a thousand hosts finishing rounds cost a few syncs a second,
// not one each.
type lineWriter struct {
	w    io.Writer
	sync func() error // nil when w is not a file that can be synced
	// file is w when it is a regular file: a failed write or sync is cut
	// back to synced, the offset after the last whole line synced (what
	// the state records: stateFiles.measure).
	file   *os.File
	synced atomic.Int64
	// fault, when set, is told of a failed write or sync (faults.note).
	fault func(error) error
	// written are the ids of results an earlier run wrote past the
	// offset its state recorded (published, maybe never committed: a
	// crash, or a state that could not be written): such a result
	// published again is not written twice. Keyed by writtenKey: a
	// refreshing URL's later results carry its id too.
	written map[string]bool
	// writtenFrom is the offset the lines of written start after.
	writtenFrom int64
	// unsettled, when set (before the first Publish), is told of the
	// results of written: published again, maybe never committed.
	unsettled *unsettled
	// before, when set (before the first Publish), runs before each
	// write: the WARC writer's sync, so a result on disk never points at
	// a record the disk could still lose.
	before func() error
	// seen is told of results once they are written and synced.
	seen func([]result.Result)
	// keep, when set (before the first Publish), is told of them first:
	// serve mode keeps each line by id (results.go), so a result seen is
	// one GET /urls/{id} answers.
	keep func([]result.Result)
	// retryOf, when set (before the first Publish), names the id a
	// result's URL retries (retry.go), or "".
	retryOf func(id string) string

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte
	spare   []byte
	pending []result.Result
	queued  uint64 // calls whose lines are in buf or written
	durable uint64 // calls whose lines are written and synced
	writing bool
	err     error // sticky: after a failed write the output may hold a partial line
	failed  chan struct{}
}

func newLineWriter(w io.Writer, seen func([]result.Result)) *lineWriter {
	lw := &lineWriter{w: w, seen: seen, failed: make(chan struct{})}
	lw.cond = sync.NewCond(&lw.mu)
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			lw.sync, lw.file = f.Sync, f
			lw.synced.Store(fi.Size())
		}
	}
	return lw
}

// Publish writes results as JSON lines, synced, before it returns. The
// context is not consulted: a stopping run's last rounds must still get out
// (the engine commits them with the context's cancellation removed too).
func (lw *lineWriter) Publish(_ context.Context, results []result.Result) error {
	if len(results) == 0 {
		return nil
	}
	// Encoded outside the lock, copied once into the shared buffer under
	// it (a buffer of this call's own lines first was a copy more, and
	// the second largest allocation of a run at 10,000 hosts).
	lines := make([][]byte, len(results))
	for i := range results {
		if lw.retryOf != nil && results[i].RetryOf == "" {
			results[i].RetryOf = lw.retryOf(results[i].ID)
		}
		b, err := encodeLine(results[i])
		if err != nil {
			return err
		}
		lines[i] = b
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	for i, b := range lines {
		if k := writtenKey(results[i]); lw.written[k] {
			delete(lw.written, k) // its line is in the file already
			if lw.unsettled != nil {
				lw.unsettled.wrote(results[i:i+1], lw.writtenFrom)
			}
			continue
		}
		lw.buf = append(append(lw.buf, b...), '\n')
	}
	lw.pending = append(lw.pending, results...)
	lw.queued++
	mine := lw.queued
	for lw.durable < mine && lw.err == nil {
		if lw.writing {
			lw.cond.Wait()
			continue
		}
		lw.writing = true
		buf, pending, upto := lw.buf, lw.pending, lw.queued
		lw.buf, lw.spare, lw.pending = lw.spare[:0], nil, nil
		lw.mu.Unlock()
		err := lw.write(buf)
		if err == nil && lw.keep != nil {
			lw.keep(pending)
		}
		if err == nil && lw.seen != nil {
			lw.seen(pending)
		}
		lw.mu.Lock()
		lw.writing, lw.spare = false, buf
		if err != nil {
			lw.err = err
			close(lw.failed)
		} else {
			lw.durable = upto
		}
		lw.cond.Broadcast()
	}
	if lw.durable >= mine {
		return nil
	}
	return lw.err
}

// writtenKey names a result among those an earlier run wrote: its id and,
// for a refreshing URL, its seq.
func writtenKey(r result.Result) string {
	if r.Seq == 0 {
		return r.ID
	}
	return r.ID + "#" + strconv.Itoa(r.Seq)
}

// encodeLine is a result's line in the output, without its newline. No
// message limit here: the body is kept whole up to MaxBodyBytes.
func encodeLine(r result.Result) ([]byte, error) { return result.Encode(r, math.MaxInt32) }

func (lw *lineWriter) write(b []byte) error {
	if lw.before != nil {
		if err := lw.before(); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
	}
	if _, err := lw.w.Write(b); err != nil {
		return lw.failedWrite(fmt.Errorf("write results: %w", err))
	}
	if lw.sync != nil {
		if err := lw.sync(); err != nil {
			return lw.failedWrite(fmt.Errorf("sync results: %w", err))
		}
	}
	lw.synced.Add(int64(len(b)))
	return nil
}

// failedWrite cuts the file back to the end of the last whole line synced:
// the lines of a write that failed (a full disk cuts one mid-line) or was
// not synced are not committed, so their URLs are fetched again and the
// file must not keep them. If the cut fails too, the next run cuts a
// partial line past the recorded offset, and does not write twice the
// results past it (written).
func (lw *lineWriter) failedWrite(err error) error {
	if lw.file != nil {
		if terr := lw.file.Truncate(lw.synced.Load()); terr == nil {
			_ = lw.file.Sync()
		}
	}
	if lw.fault != nil {
		return lw.fault(err)
	}
	return err
}

// Synced is the offset after the last whole line written and synced.
func (lw *lineWriter) Synced() int64 { return lw.synced.Load() }

// Failed is closed when a write failed: no result can be written any more.
func (lw *lineWriter) Failed() <-chan struct{} { return lw.failed }

// Err is the write error, if any.
func (lw *lineWriter) Err() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.err
}
