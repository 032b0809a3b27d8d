package standalone

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
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/urldownloader/urldownloader/shared/metrics"
	"github.com/urldownloader/urldownloader/shared/urlmsg"
)

// Input is a list of URLs, one per line: a JSON object {"host", "url",
// "etag", "lastModified"}, a JSON array or string as the input queue takes
// them, or a bare URL. Blank lines and lines starting with # are skipped.
type Input struct {
	// Name identifies the input in the state across runs (an absolute
	// path, "stdin"): its progress is kept under it, and the id of each of
	// its URLs derives from it, the line number, the position in the line
	// and the URL, as an SQS record's do from the message id. A run that
	// reads it again goes on after the last line an earlier run accepted.
	Name string
	R    io.Reader
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
	// Batches counts ingest invocations.
	Batches int
	// EOF is set when the input was read to its end.
	EOF bool
}

// ErrInputChanged is returned when an input's first bytes are not those an
// earlier run read into the same state.
var ErrInputChanged = errors.New("input differs from what this state read before")

// maxLine bounds one input line kept in memory; longer lines are refused
// (the input queue refuses messages above urlmsg.MaxPayloadBytes too).
const maxLine = urlmsg.MaxPayloadBytes

// errStopped ends reading when the run stops.
var errStopped = errors.New("stopped")

// line is one line of input as read.
type line struct {
	no      int64
	text    []byte // without the line end; cut at maxLine
	tooLong bool
	end     int64             // offset just after the line
	sum     [sha256.Size]byte // SHA-256 of the input up to end
}

// feeder reads an input into ingest batches, as the SQS event source
// mapping hands the input queue to the ingest function, and records in the
// ledger how far the input is accepted after each batch: a run that stops
// and starts again neither skips nor repeats a line.
type feeder struct {
	rt  *Runtime
	in  Input
	rep InputReport
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
	prog, err := f.rt.ledger.get(ctx, f.in.Name)
	if err != nil {
		return err
	}
	f.rep.Skipped, f.rep.SkippedURLs, f.rep.SkippedRejected = prog.Lines, prog.URLs, prog.Rejected
	br := bufio.NewReaderSize(f.in.R, 64<<10)
	h := sha256.New()
	if err := skip(br, h, prog); err != nil {
		return fmt.Errorf("%s: %w", f.in.Name, err)
	}
	lines := make(chan line, 4096)
	readErr := make(chan error, 1)
	go func() {
		readErr <- readLines(br, h, prog, lines, stop)
		close(lines)
	}()

	for {
		batch, eof := f.collect(lines, stop)
		if len(batch) == 0 && !eof {
			return nil // stopping
		}
		if eof {
			switch err := <-readErr; {
			case errors.Is(err, errStopped):
				return nil
			case err != nil:
				return fmt.Errorf("read %s: %w", f.in.Name, err)
			}
		}
		if len(batch) > 0 {
			next, err := f.ingest(ctx, prog, batch)
			if err != nil {
				return err
			}
			prog = next
		}
		if eof {
			f.rep.EOF = true
			return nil
		}
	}
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

// readLines sends the input's lines after prog until its end or stop.
func readLines(br *bufio.Reader, h hash.Hash, prog progress, out chan<- line, stop <-chan struct{}) error {
	off, no := prog.Offset, prog.Lines
	for {
		n, text, tooLong, err := readLine(br, h, maxLine)
		if n > 0 {
			off += n
			no++
			l := line{no: no, text: text, tooLong: tooLong, end: off}
			h.Sum(l.sum[:0])
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

// collect gathers the next batch: up to IngestBatch records, or what came
// within IngestWindow of the batch's first line. It reports the end of the
// input; an empty batch without it means stop.
func (f *feeder) collect(lines <-chan line, stop <-chan struct{}) ([]line, bool) {
	var batch []line
	var window <-chan time.Time
	records := 0
	for records < f.rt.opts.IngestBatch {
		select {
		case <-stop:
			return nil, false
		case <-window:
			return batch, false
		case l, ok := <-lines:
			if !ok {
				return batch, true
			}
			if window == nil {
				t := time.NewTimer(f.rt.opts.IngestWindow)
				defer t.Stop()
				window = t.C
			}
			batch = append(batch, l)
			if len(bytes.TrimSpace(l.text)) > 0 {
				records++
			}
		}
	}
	return batch, false
}

// ingest hands a batch's lines to the ingest handler as one SQS batch,
// retrying records the store could not take, then records the batch as
// read. Invalid lines are reported and skipped for good: the handler fails
// such a record as it fails an invalid SQS record, and urlmsg.Parse, run
// again on the failed records only, says why.
func (f *feeder) ingest(ctx context.Context, prog progress, batch []line) (progress, error) {
	next := prog
	var ev events.SQSEvent
	type sent struct {
		line line
		urls int
	}
	sentAs := map[string]sent{}
	var rejected []Rejected
	var urls int64
	for _, l := range batch {
		next.Offset, next.Lines = l.end, l.no
		id := f.in.Name + ":" + strconv.FormatInt(l.no, 10)
		body, n, rej := record(l)
		switch {
		case rej != "":
			// Never handed to ingest (which counts the records it
			// refuses itself): counted here, as it would have.
			f.rt.opts.Metrics.Add(metrics.URLsRejected, 1)
			rejected = append(rejected, rejection(l, rej))
		case body != "":
			urls += int64(n)
			sentAs[id] = sent{line: l, urls: n}
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs"})
		}
	}
	next.Sum = batch[len(batch)-1].sum[:]
	f.rep.Lines += next.Lines - prog.Lines
	// A batch once handed over is finished even when the run is stopping:
	// its lines are either all queued and recorded, or none recorded.
	ictx := context.WithoutCancel(ctx)
	for attempt := 0; len(ev.Records) > 0; attempt++ {
		resp, err := f.rt.ingest.HandleSQS(ictx, ev)
		f.rep.Batches++
		if err != nil {
			return prog, fmt.Errorf("ingest lines %d-%d of %s: %w", prog.Lines+1, next.Lines, f.in.Name, err)
		}
		failed := map[string]bool{}
		for _, fl := range resp.BatchItemFailures {
			failed[fl.ItemIdentifier] = true
		}
		var again []events.SQSMessage
		for _, r := range ev.Records {
			if !failed[r.MessageId] {
				continue
			}
			_, bad, err := urlmsg.Parse(r.MessageId, []byte(r.Body))
			s := sentAs[r.MessageId]
			switch {
			case err != nil:
				rejected = append(rejected, rejection(s.line, err.Error()))
			case len(bad) > 0 && r.Body[0] == '[':
				rejected = append(rejected, rejection(s.line, fmt.Sprintf("item %d: %s", bad[0].Index, bad[0].Error)))
			case len(bad) > 0:
				rejected = append(rejected, rejection(s.line, bad[0].Error))
			default:
				again = append(again, r)
				continue
			}
			urls -= int64(s.urls)
		}
		if len(again) > 0 && attempt == 9 {
			return prog, fmt.Errorf("ingest lines %d-%d of %s: %d records not queued after %d attempts (run with -v for the store's errors)",
				prog.Lines+1, next.Lines, f.in.Name, len(again), attempt+1)
		}
		if len(again) > 0 {
			time.Sleep(time.Duration(100<<min(attempt, 5)) * time.Millisecond)
		}
		ev.Records = again
	}
	next.URLs += urls
	f.rep.URLs += urls
	slices.SortFunc(rejected, func(a, b Rejected) int { return cmp.Compare(a.Line, b.Line) })
	next.Rejected += int64(len(rejected))
	f.rep.Rejected += int64(len(rejected))
	if f.rt.opts.OnReject != nil {
		for _, r := range rejected {
			f.rt.opts.OnReject(r)
		}
	}
	if err := f.rt.ledger.advance(ictx, f.in.Name, prog, next); err != nil {
		return prog, fmt.Errorf("record lines %d-%d of %s as read: %w", prog.Lines+1, next.Lines, f.in.Name, err)
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
