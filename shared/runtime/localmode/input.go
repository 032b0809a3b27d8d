package localmode

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// Input is a list of URLs, one per line: a JSON object {"host", "url",
// "etag", "lastModified", "validatorsUrl"}, a JSON array or string as the input queue takes
// them, or a bare URL. Blank lines and lines starting with # are skipped.
type Input struct {
	// Name identifies the input in the state across runs (an absolute
	// path, "stdin"): its progress is kept under it, and the id of each of
	// its URLs derives from it, the line number, the position in the line
	// and the URL, as an SQS record's do from the message id. A run that
	// reads it again goes on after the last line an earlier run accepted.
	Name string
	R    io.Reader
	// ByName keeps the input's progress under Name only. Otherwise an
	// input whose start is that of one read before under another name
	// (the list moved or renamed, or extended at its end) goes on as
	// that one, under its name: its lines keep their ids and are not read
	// again.
	ByName bool
}

// Rejected is an input line refused as invalid; it is never queued.
type Rejected struct {
	Line  int64  `json:"line"`
	URL   string `json:"url,omitempty"`
	Error string `json:"error"`
}

// InputReport says what a run did with its input.
type InputReport struct {
	// Skipped are the lines earlier runs had read (SkippedURLs of them
	// accepted, SkippedRejected refused).
	Skipped, SkippedURLs, SkippedRejected int64
	// Lines, URLs and Rejected count what this run read, accepted and
	// refused.
	Lines, URLs, Rejected int64
	// Held counts the URLs of this run's lines that waited in the
	// overflow because their host's queue was full (they are queued as it
	// drains: none is dropped).
	Held int64
	// Batches counts ingest calls.
	Batches int
	// EOF is set when the input was read to its end.
	EOF bool
	// SameAs is the name the input was read under before, when it was
	// recognised by its start under another name (Input.ByName).
	SameAs string
}

// ErrInputChanged is returned when an input's first bytes are not those an
// earlier run read into the same state.
var ErrInputChanged = errors.New("input differs from what this state read before")

// maxWindows bounds an ingest batch that keeps growing: at most this many
// IngestWindows after its first line (5 s by default, the longest batching
// window of the SQS event source mapping).
const maxWindows = 25

// maxLine bounds one input line kept in memory; longer lines are refused
// (the input queue refuses messages above urlmsg.MaxPayloadBytes too).
const maxLine = urlmsg.MaxPayloadBytes

// inputBudget bounds the bytes of input lines read and not yet recorded
// (being parsed, queued or held back); one batch takes at most half of
// it, so that the reader fills the next batch while one is ingested. A batch
// the budget cuts short ends as soon as the reader waits for room (see
// collect), not after IngestWindow, so a list larger than the budget
// comes in a few batches without waiting out the window.
const inputBudget = 32 << 20

// lineCost is what lines take of the budget: their text, their parsed
// form (about as much again) and a fixed part.
func lineCost(ls []line) int64 {
	var n int64
	for _, l := range ls {
		n += int64(2*len(l.text)) + 256
	}
	return n
}

// byteBudget is a counting semaphore over bytes.
type byteBudget struct {
	mu      sync.Mutex
	cond    *sync.Cond
	used    int64
	size    int64
	closed  bool
	waiting bool
	// full gets a value when take starts to wait (if none is there).
	full chan struct{}
}

func newByteBudget(size int64) *byteBudget {
	b := &byteBudget{size: size, full: make(chan struct{}, 1)}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// take waits until n bytes fit (always, when nothing is taken: a line
// larger than the budget goes alone) and takes them; false once closed.
func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && b.used > 0 && b.used+n > b.size {
		if !b.waiting {
			b.waiting = true
			select {
			case b.full <- struct{}{}:
			default:
			}
		}
		b.cond.Wait()
	}
	b.waiting = false
	if b.closed {
		return false
	}
	b.used += n
	return true
}

func (b *byteBudget) put(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// stalled reports a take waiting for room now.
func (b *byteBudget) stalled() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// close wakes and fails every take.
func (b *byteBudget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// errStopped ends reading when the run stops.
var errStopped = errors.New("stopped")

// line is one line of input as read.
type line struct {
	no      int64
	text    []byte // without the line end; cut at maxLine
	tooLong bool
	end     int64             // offset just after the line
	sum     [sha256.Size]byte // SHA-256 of the input up to end
	parsed  parsedLine
}

// parsedLine is a line read as the ingest handler reads a record: its
// messages, or why it is refused and how many URLs that refuses.
type parsedLine struct {
	msgs    []urlmsg.Message
	reject  string
	refused int
}

// parseLine parses l, whose record's message id is name:line number. A
// blank line gives nothing and no reason.
func parseLine(name string, l line, lim urlmsg.Limits) parsedLine {
	body, _, rej := record(l)
	if rej != "" {
		// Never parsed (too long, not JSON): one refused, as the
		// handler would count it.
		return parsedLine{reject: rej, refused: 1}
	}
	if body == "" {
		return parsedLine{}
	}
	id := name + ":" + strconv.FormatInt(l.no, 10)
	ms, bad, err := urlmsg.ParseLimited(id, []byte(body), lim)
	switch {
	case err != nil:
		rej = err.Error()
	case len(bad) > 0 && body[0] == '[':
		rej = fmt.Sprintf("item %d: %s", bad[0].Index, bad[0].Error)
	case len(bad) > 0:
		rej = bad[0].Error
	}
	if rej != "" {
		// As the handler counts a record it refuses: every item.
		return parsedLine{reject: rej, refused: max(1, len(bad)+len(ms))}
	}
	return parsedLine{msgs: ms}
}

// feeder reads an input into ingest batches, as the SQS event source
// mapping hands the input queue to the ingest function, and records in the
// ledger how far the input is accepted after each batch: a run that stops
// and starts again neither skips nor repeats a line.
type feeder struct {
	rt   *Runtime
	in   Input
	rep  InputReport
	pool *parsePool
	// budget is the bytes of lines read ahead of ingest (inputBudget);
	// a batch holds at most half of it, so the next is read meanwhile.
	budget int64
}

// feed reads the input until its end, or until stop. A batch being
// ingested when stop comes is finished and recorded; lines read into a
// batch not yet handed over are left for the next run.
func (rt *Runtime) feed(ctx context.Context, in Input, stop <-chan struct{}) (InputReport, error) {
	f := &feeder{rt: rt, in: in}
	err := f.run(ctx, stop)
	return f.rep, err
}

func (f *feeder) run(ctx context.Context, stop <-chan struct{}) error {
	given := f.in.Name
	prog, err := f.rt.ledger.get(ctx, f.in.Name)
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(f.in.R, headLen)
	// The input's start, as far as it is at hand: a file's first 64
	// KiB, a trickle's first lines (Peek waits for one byte only).
	var start []byte
	if _, err := br.Peek(1); err == nil {
		start, _ = br.Peek(min(br.Buffered(), headLen))
	}
	if prog.Offset == 0 && !f.in.ByName {
		same, err := f.rt.ledger.sameHead(ctx, start)
		if err != nil {
			return err
		}
		if same != "" && same != f.in.Name {
			f.rep.SameAs, f.in.Name = same, same
			if prog, err = f.rt.ledger.get(ctx, same); err != nil {
				return err
			}
		}
	}
	if !f.in.ByName {
		if err := f.rt.ledger.noteHead(ctx, f.in.Name, start); err != nil {
			return err
		}
	}
	f.rep.Skipped, f.rep.SkippedURLs, f.rep.SkippedRejected = prog.Lines, prog.URLs, prog.Rejected
	h := sha256.New()
	if err := skip(br, h, prog); err != nil {
		if f.rep.SameAs != "" {
			return fmt.Errorf("%s starts as %s, read before into this state, but %w", given, f.in.Name, err)
		}
		return fmt.Errorf("%s: %w", f.in.Name, err)
	}
	if prog.Offset == 0 {
		// A list compressed or in UTF-16 is refused once, as a whole.
		// Peek waits for a few bytes only, not a whole sniffLen: stdin
		// may be a trickle.
		head, _ := br.Peek(4)
		if len(head) > 0 {
			head, _ = br.Peek(min(max(br.Buffered(), len(head)), sniffLen))
		}
		if kind := sniff(head); kind != "" {
			return &NotTextError{Name: f.in.Name, Kind: kind}
		}
	}
	// The reader runs ahead of ingest by at most inputBudget bytes of
	// lines: what is in flight is bounded by bytes, whatever the lines'
	// length.
	f.budget = cmp.Or(f.rt.inputBudget, inputBudget)
	budget := newByteBudget(f.budget)
	lines := make(chan line, 64)
	readErr := make(chan error, 1)
	go func() {
		readErr <- readLines(br, h, prog, lines, budget, stop)
		close(lines)
	}()
	defer budget.close()

	// One batch is ingested while the next is collected: reading and
	// parsing the list overlaps with queueing it, so hosts start before
	// the whole list is read. Batches are ingested one at a time, in
	// order, so each records the progress the one before it left.
	var inflight chan ingested
	wait := func() error {
		if inflight == nil {
			return nil
		}
		r := <-inflight
		inflight = nil
		if r.err != nil {
			return r.err
		}
		prog = r.prog
		return nil
	}
	f.pool = newParsePool(runtime.GOMAXPROCS(0), urlmsg.LimitsOf(f.rt.params))
	defer f.pool.close()
	for {
		batch, eof := f.collect(lines, budget, stop)
		if len(batch) == 0 && !eof {
			return wait() // stopping: the batch handed over is finished
		}
		if eof {
			switch err := <-readErr; {
			case errors.Is(err, errStopped):
				return wait()
			case err != nil:
				if werr := wait(); werr != nil {
					return werr
				}
				return fmt.Errorf("read %s: %w", f.in.Name, err)
			}
		}
		if err := wait(); err != nil {
			return err
		}
		if len(batch) > 0 {
			inflight = make(chan ingested, 1)
			go func(prog progress, done chan<- ingested) {
				next, err := f.ingest(ctx, prog, batch)
				// Its room goes back at once: the next batch, being
				// collected, may wait for it.
				budget.put(lineCost(batch))
				done <- ingested{prog: next, err: err}
			}(prog, inflight)
		}
		if eof {
			if err := wait(); err != nil {
				return err
			}
			f.rep.EOF = true
			return nil
		}
	}
}

// ingested is the outcome of one batch's ingest.
type ingested struct {
	prog progress
	err  error
}

// skip reads past the part of the input the ledger says is done, checking
// that it is the same input.
func skip(br *bufio.Reader, h hash.Hash, prog progress) error {
	var off int64
	for off < prog.Offset {
		n, _, _, err := readLine(br, h, 0)
		off += n
		if err == io.EOF && off < prog.Offset || off > prog.Offset {
			return fmt.Errorf("%w: it was read up to byte %d (line %d) and is now shorter, or its lines moved", ErrInputChanged, prog.Offset, prog.Lines)
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	if !bytes.Equal(h.Sum(nil), prog.Sum) && prog.Offset > 0 {
		return fmt.Errorf("%w: its first %d bytes (%d lines) are not those read before", ErrInputChanged, prog.Offset, prog.Lines)
	}
	return nil
}

// readLines sends the input's lines after prog until its end or stop,
// each once budget has room for it.
func readLines(br *bufio.Reader, h hash.Hash, prog progress, out chan<- line, budget *byteBudget, stop <-chan struct{}) error {
	off, no := prog.Offset, prog.Lines
	for {
		n, text, tooLong, err := readLine(br, h, maxLine)
		if n > 0 {
			off += n
			no++
			l := line{no: no, text: text, tooLong: tooLong, end: off}
			h.Sum(l.sum[:0])
			if !budget.take(lineCost([]line{l})) {
				return errStopped
			}
			select {
			case out <- l:
			case <-stop:
				return errStopped
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line (through '\n' or the end), feeding every byte to
// h. It returns the bytes consumed and the line without its end, kept when
// it is at most keep bytes long (tooLong otherwise; keep 0 keeps nothing).
// err is io.EOF at the end.
func readLine(br *bufio.Reader, h hash.Hash, keep int) (n int64, text []byte, tooLong bool, err error) {
	dropped := false
	for {
		chunk, err := br.ReadSlice('\n')
		h.Write(chunk)
		n += int64(len(chunk))
		if keep > 0 {
			// Room for the line end too, trimmed below.
			if room := keep + 2 - len(text); len(chunk) > room {
				chunk, dropped = chunk[:max(room, 0)], true
			}
			text = append(text, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		text = bytes.TrimSuffix(bytes.TrimSuffix(text, []byte("\n")), []byte("\r"))
		return n, text, dropped || len(text) > keep, err
	}
}

// collect gathers the next batch: up to IngestBatch records or
// batchBytes, or what came until the input paused for IngestWindow, or
// at most maxWindows windows after the batch's first line. A file is read
// faster than any window, so it comes in full batches (a window counted
// from the first line cut a shuffled 60,000-line list into two batches of
// 49,395 and 10,605 lines: the second waited for the first's ingest, 10 s
// at 10,000 hosts, and most hosts ran a second session for their last
// URLs); a trickle on stdin still goes in within a window of a pause.
// It reports the end of the input; an empty batch without it means stop.
func (f *feeder) collect(lines <-chan line, budget *byteBudget, stop <-chan struct{}) ([]line, bool) {
	b := parsedBatch{pool: f.pool, name: f.in.Name}
	var window, deadline <-chan time.Time
	var idle *time.Timer
	records, size, most := 0, int64(0), cmp.Or(f.budget, inputBudget)/2
	for records < f.rt.opts.IngestBatch && size < most {
		select {
		case <-stop:
			return nil, false
		case <-window:
			return b.lines(), false
		case <-deadline:
			return b.lines(), false
		case <-budget.full:
			// The reader waits for room that only an ingest makes (this
			// batch's, or the one still in flight): no line may come
			// until then. (A signal from before this batch, the reader
			// going on since, does not count.)
			if b.n > 0 && len(lines) == 0 && budget.stalled() {
				return b.lines(), false
			}
		case l, ok := <-lines:
			if !ok {
				return b.lines(), true
			}
			if idle == nil {
				idle = time.NewTimer(f.rt.opts.IngestWindow)
				defer idle.Stop()
				window = idle.C
				longest := time.NewTimer(maxWindows * f.rt.opts.IngestWindow)
				defer longest.Stop()
				deadline = longest.C
			} else {
				idle.Reset(f.rt.opts.IngestWindow)
			}
			b.add(l)
			size += int64(len(l.text))
			if len(bytes.TrimSpace(l.text)) > 0 {
				records++
			}
			if len(lines) == 0 && budget.stalled() {
				return b.lines(), false // see budget.full above
			}
		}
	}
	return b.lines(), false
}

// parseChunkLines is how many lines a parser takes at a time: enough that
// handing them over costs little against parsing them.
const parseChunkLines = 256

// parsePool parses a batch's lines on every core as collect gathers them,
// while the reader goes on reading: parsing was most of the time before
// the first append (0.65 s of reading and parsing for 105,000 lines on
// one goroutine, urlmsg.Parse nine tenths of it).
type parsePool struct {
	work chan *parseChunk
	// lim are the running parameters' limits (MinRefresh, MaxRefresh).
	lim urlmsg.Limits
}

// parseChunk is a run of consecutive lines, parsed once done is closed.
type parseChunk struct {
	name  string
	lines []line
	done  chan struct{}
}

func newParsePool(workers int, lim urlmsg.Limits) *parsePool {
	p := &parsePool{work: make(chan *parseChunk, 4*workers), lim: lim}
	for range workers {
		go func() {
			for c := range p.work {
				for i := range c.lines {
					c.lines[i].parsed = parseLine(c.name, c.lines[i], p.lim)
				}
				close(c.done)
			}
		}()
	}
	return p
}

// close ends the workers once the chunks handed over are parsed.
func (p *parsePool) close() { close(p.work) }

// parsedBatch gathers lines in order and has them parsed in chunks.
type parsedBatch struct {
	pool   *parsePool
	name   string
	cur    []line
	chunks []*parseChunk
	n      int
}

func (b *parsedBatch) add(l line) {
	if b.cur == nil {
		b.cur = make([]line, 0, parseChunkLines)
	}
	b.cur = append(b.cur, l)
	b.n++
	if len(b.cur) == parseChunkLines {
		b.flush()
	}
}

func (b *parsedBatch) flush() {
	if len(b.cur) == 0 {
		return
	}
	c := &parseChunk{name: b.name, lines: b.cur, done: make(chan struct{})}
	b.pool.work <- c
	b.chunks = append(b.chunks, c)
	b.cur = nil
}

// lines waits for every chunk and returns the batch's lines, parsed, in
// input order.
func (b *parsedBatch) lines() []line {
	b.flush()
	if len(b.chunks) == 1 {
		<-b.chunks[0].done
		return b.chunks[0].lines
	}
	out := make([]line, 0, b.n)
	for _, c := range b.chunks {
		<-c.done
		out = append(out, c.lines...)
	}
	return out
}

// ingest parses a batch's lines as the ingest handler parses an SQS
// batch's records (the line's id is its record's message id), queues their
// URLs, retrying those the store could not take, keeps in the overflow
// those whose host's queue is full (see holdback.go), then records the
// batch as read, with the URLs it held back. Invalid lines are reported
// and skipped for good; a line is all or nothing, as a record is.
func (f *feeder) ingest(ctx context.Context, prog progress, batch []line) (progress, error) {
	rt := f.rt
	next := prog
	// Most lines are one URL each: room for them up front instead of a
	// dozen doublings of a 60,000-line batch.
	msgs := make([]urlmsg.Message, 0, len(batch))
	var rejected []Rejected
	// lineOf finds a message's line when ingest refuses it as invalid (a
	// refreshing URL beyond MaxRefreshPerHost).
	lineOf := map[string]line{}
	for _, l := range batch {
		next.Offset, next.Lines = l.end, l.no
		if p := l.parsed; p.reject != "" {
			rt.opts.Metrics.Add(metrics.URLsRejected, float64(p.refused))
			rejected = append(rejected, rejection(l, p.reject))
			continue
		}
		msgs = append(msgs, l.parsed.msgs...)
		for _, m := range l.parsed.msgs {
			if m.Refresh > 0 || m.RefreshStop {
				lineOf[m.ID] = l
			}
		}
	}
	next.Sum = batch[len(batch)-1].sum[:]
	f.rep.Lines += next.Lines - prog.Lines
	// A batch once handed over is finished even when the run is stopping:
	// its lines are either all queued or held, and recorded, or none
	// recorded.
	ictx := context.WithoutCancel(ctx)
	over := rt.over
	over.mu.Lock()
	defer over.mu.Unlock()
	// A host with URLs held back gets the new ones behind them.
	byDomain := rt.params.QueueMode == params.QueueByDomain
	var held []heldURL
	send := make([]urlmsg.Message, 0, len(msgs))
	behind := map[string]string{}
	for _, m := range msgs {
		if key := hostqueue.QueueKey(m.Host, byDomain); over.held(key) {
			held = append(held, heldURL{key: key, msg: m})
			behind[m.ID] = m.URL
			continue
		}
		send = append(send, m)
	}
	rt.tally.expect(behind)
	for attempt := 0; len(send) > 0; attempt++ {
		res := rt.ingest.Ingest(holding(ictx), send)
		f.rep.Batches++
		var again []urlmsg.Message
		var lastErr error
		for i, m := range send {
			err, failed := res.Failed[i]
			switch {
			case !failed:
			case errors.Is(err, hostqueue.ErrQueueFull):
				held = append(held, heldURL{key: hostqueue.QueueKey(m.Host, byDomain), msg: m})
			case errors.Is(err, urlmsg.ErrInvalid):
				// Refused for good, as a line the parser refused.
				rt.opts.Metrics.Add(metrics.URLsRejected, 1)
				rejected = append(rejected, rejection(lineOf[m.ID], strings.TrimPrefix(err.Error(), urlmsg.ErrInvalid.Error()+": ")))
			default:
				again, lastErr = append(again, m), err
			}
		}
		if len(again) > 0 && attempt == 9 {
			return prog, fmt.Errorf("ingest lines %d-%d of %s: %d urls not queued after %d attempts, last: %w",
				prog.Lines+1, next.Lines, f.in.Name, len(again), attempt+1, lastErr)
		}
		if len(again) > 0 {
			time.Sleep(time.Duration(100<<min(attempt, 5)) * time.Millisecond)
		}
		send = again
	}
	next.URLs += int64(len(msgs))
	slices.SortFunc(rejected, func(a, b Rejected) int { return cmp.Compare(a.Line, b.Line) })
	next.Rejected += int64(len(rejected))
	if err := rt.ledger.advance(ictx, f.in.Name, prog, next, held); err != nil {
		return prog, fmt.Errorf("record lines %d-%d of %s as read: %w", prog.Lines+1, next.Lines, f.in.Name, err)
	}
	heldIDs := make([]string, len(held))
	for i, h := range held {
		over.add(h.key)
		heldIDs[i] = h.msg.ID
	}
	rt.tally.hold(heldIDs, true)
	f.rep.URLs += int64(len(msgs))
	f.rep.Held += int64(len(held))
	f.rep.Rejected += int64(len(rejected))
	if rt.opts.OnReject != nil {
		for _, r := range rejected {
			rt.opts.OnReject(r)
		}
	}
	return next, nil
}

// rejection describes an invalid line.
func rejection(l line, why string) Rejected {
	return Rejected{Line: l.no, URL: clip(firstURL(l.text), 200), Error: why}
}

// record turns a line into an input queue message body and the number of
// URLs it carries (an array may carry several; the count of a line the
// handler refuses is taken back); an empty body and reason: a line to
// skip; a reason: a line refused before it is sent. urlmsg.LineBody reads
// the line by the rules every entrance shares (BOM, bare URLs, JSON).
func record(l line) (body string, n int, reject string) {
	if l.tooLong {
		return "", 0, fmt.Sprintf("line is longer than %d bytes", maxLine)
	}
	b, n, err := urlmsg.LineBody(l.text)
	if err != nil {
		return "", 0, err.Error()
	}
	return string(b), n, ""
}

// firstURL is what a rejected line shows: its URL when it has one.
func firstURL(text []byte) string {
	var in urlmsg.Input
	if json.Unmarshal(text, &in) == nil && in.URL != "" {
		return in.URL
	}
	return string(bytes.TrimSpace(text))
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
