package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/urldownloader/urldownloader/shared/domain/backoff"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// SendAPI is the part of the SQS client Send uses.
type SendAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Defaults of SendOptions.
const (
	// DefaultWindowBytes is how much of the list is grouped by host at a
	// time: what Send holds in memory, whatever the list's length.
	DefaultWindowBytes = 8 << 20
	// DefaultMessageBytes is one SQS billing unit (a request is billed
	// per 64 KiB of payload), so fuller messages would cost the same per
	// URL while making a redelivery or a refusal larger.
	DefaultMessageBytes = 64 << 10
	// minMessageBytes leaves room for the largest item (a URL of
	// urlmsg.MaxURLLength with its validators).
	minMessageBytes = 4 << 10
	// callTimeout bounds one SQS call that hangs; generous, it only
	// keeps a dead connection from holding the run.
	callTimeout = 60 * time.Second
	// queueDefaultMax is the message limit assumed when the queue's
	// attributes cannot be read (SQS's limit before 2025, the smallest a
	// queue has unless set lower).
	queueDefaultMax = 256 << 10
)

// SendOptions configure Send.
type SendOptions struct {
	SQS      SendAPI
	QueueURL string
	// List is the URL list: one JSON object {"host", "url", "etag",
	// "lastModified", "validatorsUrl"}, JSON array or string, or bare URL per line; blank
	// lines and lines starting with # are skipped (local mode's format).
	List io.Reader
	// Progress is the file that records how far List was sent; a run
	// with the same file goes on after the last acknowledged line. Empty
	// sends from the start every time.
	Progress string
	// WindowBytes bounds the part of the list grouped by host at once
	// (DefaultWindowBytes when 0).
	WindowBytes int
	// MessageBytes bounds one message (DefaultMessageBytes when 0); the
	// queue's MaximumMessageSize caps it and every batch.
	MessageBytes int
	// Retry spaces out the retries of a batch's failed entries and of a
	// call that failed; the zero Policy means 8 attempts from 200 ms to
	// 10 s.
	Retry backoff.Policy
	// OnReject, if set, is told of every line refused as invalid.
	OnReject func(Rejected)
	// OnWindow, if set, is told how far the send is after each window.
	OnWindow func(SendReport)
}

// SendReport says what a Send did.
type SendReport struct {
	// Skipped lines were sent (or refused) by earlier runs.
	Skipped int64
	// Lines, URLs, Messages and Batches count what this run read and
	// sent; Rejected the lines it refused.
	Lines, URLs, Messages, Batches, Rejected int64
	// Done is set when the list was sent to its end.
	Done bool
}

// ErrInputChanged is returned when the list's first bytes are not those
// the progress file says were sent.
var ErrInputChanged = errors.New("list differs from the one this progress file recorded")

// Send reads o.List and puts its URLs on the input queue as docs/messages.md
// recommends for cost: within each window of the list, a host's URLs
// together, several per message, ten messages per SendMessageBatch.
// Entries a batch fails are retried with backoff; one the queue refuses as
// the sender's fault (a bad message) ends the run with an error naming its
// lines. After each batch the progress file says which messages are on
// the queue, so a run stopped at any point and started again sends every
// line once. Cancelling ctx stops after the batch in flight (its outcome
// recorded) and returns ctx's error.
func Send(ctx context.Context, o SendOptions) (SendReport, error) {
	var rep SendReport
	if o.SQS == nil || o.QueueURL == "" || o.List == nil {
		return rep, errors.New("send: an SQS client, a queue URL and a list are required")
	}
	o.WindowBytes = cmp0(o.WindowBytes, DefaultWindowBytes)
	o.MessageBytes = cmp0(o.MessageBytes, DefaultMessageBytes)
	if o.Retry.Base == 0 && o.Retry.Attempts == 0 {
		o.Retry = backoff.Policy{Base: 200 * time.Millisecond, Max: 10 * time.Second, Attempts: 8, Sleep: o.Retry.Sleep}
	}
	limit, err := queueLimit(ctx, o.SQS, o.QueueURL)
	if err != nil {
		return rep, err
	}
	msgBytes := max(min(o.MessageBytes, limit, urlmsg.MaxPayloadBytes), minMessageBytes)

	var p progress
	if o.Progress != "" {
		if p, err = loadProgress(o.Progress); err != nil {
			return rep, err
		}
	}
	if p.Queue != "" && p.Queue != o.QueueURL {
		return rep, fmt.Errorf("progress file %s records a send to %s, not %s: give another --progress for another queue", o.Progress, p.Queue, o.QueueURL)
	}
	p.Queue = o.QueueURL
	s := &sender{o: o, p: p, rep: &rep, batchBytes: limit}
	// A progress file that cannot be written must fail before the first
	// batch, not after it (a rerun would send that batch again).
	if err := s.save(); err != nil {
		return rep, err
	}
	r := &lineReader{br: bufio.NewReaderSize(o.List, 64<<10), h: sha256.New()}
	if err := r.skip(p); err != nil {
		return rep, err
	}
	rep.Skipped = p.Lines
	for {
		w, err := r.window(int64(o.WindowBytes), s.p.Window)
		if err != nil {
			return rep, err
		}
		if w.lines == s.p.Lines && w.end == s.p.Offset {
			s.p.Done = true
			rep.Done = true
			return rep, s.save()
		}
		if err := s.sendWindow(ctx, w, msgBytes); err != nil {
			return rep, err
		}
		if o.OnWindow != nil {
			o.OnWindow(rep)
		}
		if w.eof {
			s.p.Done = true
			rep.Done = true
			return rep, s.save()
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
	}
}

func cmp0(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// queueLimit reads the queue's MaximumMessageSize: the largest message,
// and the largest batch, it takes.
func queueLimit(ctx context.Context, api SendAPI, queue string) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := api.GetQueueAttributes(cctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       &queue,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameMaximumMessageSize},
	})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && strings.Contains(apiErr.ErrorCode(), "AccessDenied") {
		// A producer may hold sqs:SendMessage only.
		return queueDefaultMax, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the attributes of input queue %s: %w", queue, err)
	}
	n, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameMaximumMessageSize)])
	if err != nil || n <= 0 {
		return queueDefaultMax, nil
	}
	return n, nil
}

// sender sends one list's windows, keeping its progress.
type sender struct {
	o          SendOptions
	p          progress
	rep        *SendReport
	batchBytes int
}

func (s *sender) save() error {
	if s.o.Progress == "" {
		return nil
	}
	return saveProgress(s.o.Progress, s.p)
}

// sendWindow packs a window and sends the messages of it not yet on the
// queue, recording each batch, then records the window as sent.
func (s *sender) sendWindow(ctx context.Context, w window, msgBytes int) error {
	s.p.Done = false // lines appended since a run that ended
	sent := map[int]bool{}
	if pw := s.p.Window; pw != nil {
		if pw.Sum != w.sum {
			return fmt.Errorf("%w: lines %d-%d, partly sent, are not those sent before", ErrInputChanged, s.p.Lines+1, pw.Lines)
		}
		msgBytes = pw.MessageBytes
		for _, i := range pw.Sent {
			sent[i] = true
		}
	}
	msgs := pack(w.items, msgBytes)
	if pw := s.p.Window; pw != nil && pw.Messages != len(msgs) {
		return fmt.Errorf("%w: lines %d-%d pack into %d messages, not %d as before", ErrInputChanged, s.p.Lines+1, pw.Lines, len(msgs), pw.Messages)
	}
	s.p.Window = &windowProgress{End: w.end, Lines: w.lines, Sum: w.sum, MessageBytes: msgBytes, Messages: len(msgs), Sent: s.p.Window.sent()}
	if s.o.OnReject != nil {
		for _, r := range w.rejected {
			s.o.OnReject(r)
		}
	}
	for _, b := range batches(msgs, sent, s.batchBytes) {
		if err := ctx.Err(); err != nil {
			return err
		}
		acked, err := s.sendBatch(ctx, msgs, b)
		for _, i := range acked {
			s.rep.URLs += int64(msgs[i].urls)
		}
		s.rep.Messages += int64(len(acked))
		s.p.Window.Sent = append(s.p.Window.Sent, acked...)
		if serr := s.save(); serr != nil {
			return errors.Join(err, serr)
		}
		if err != nil {
			return err
		}
	}
	s.rep.Lines += w.lines - s.p.Lines
	s.rep.Rejected += int64(len(w.rejected))
	for _, m := range msgs {
		s.p.URLs += int64(m.urls)
	}
	s.p.Offset, s.p.Lines, s.p.Sum = w.end, w.lines, w.sum
	s.p.Messages += int64(len(msgs))
	s.p.Rejected += int64(len(w.rejected))
	s.p.Window = nil
	return s.save()
}

func (w *windowProgress) sent() []int {
	if w == nil {
		return nil
	}
	return w.Sent
}

// sendBatch sends the messages numbered idx in one SendMessageBatch,
// retrying the entries that fail, and returns those acknowledged. A call
// in flight is never cancelled (its outcome would be unknown and a retry
// could put its messages on the queue twice): cancelling ctx stops the
// retries only.
func (s *sender) sendBatch(ctx context.Context, msgs []message, idx []int) ([]int, error) {
	var acked []int
	pending := idx
	var last error
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 {
			if s.o.Retry.Attempts > 0 && attempt >= s.o.Retry.Attempts {
				return acked, fmt.Errorf("send %s: not accepted after %d attempts: %w", describe(msgs, pending), attempt, last)
			}
			if err := s.o.Retry.Wait(ctx, attempt); err != nil {
				return acked, err
			}
		}
		in := &sqs.SendMessageBatchInput{QueueUrl: &s.o.QueueURL}
		for _, i := range pending {
			in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{
				Id:          aws.String(strconv.Itoa(i)),
				MessageBody: aws.String(string(msgs[i].body)),
			})
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		out, err := s.o.SQS.SendMessageBatch(cctx, in)
		cancel()
		s.rep.Batches++
		if err != nil {
			if permanent(err) {
				return acked, fmt.Errorf("send %s: %w", describe(msgs, pending), err)
			}
			last = err
			continue
		}
		for _, ok := range out.Successful {
			if i, err := strconv.Atoi(aws.ToString(ok.Id)); err == nil {
				acked = append(acked, i)
			}
		}
		pending = pending[:0:0]
		for _, f := range out.Failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < 0 || i >= len(msgs) {
				continue
			}
			last = fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
			if f.SenderFault {
				return acked, fmt.Errorf("the queue refused the message of %s: %w", msgs[i].lines(), last)
			}
			pending = append(pending, i)
		}
	}
	return acked, nil
}

// permanent tells an error no retry will cure (the caller's: a missing
// queue, no permission, a malformed request) from a passing one. The SDK
// has retried throttling and 5xx already.
func permanent(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	if c := apiErr.ErrorCode(); strings.Contains(c, "Throttl") || c == "RequestThrottled" || c == "KmsThrottled" {
		return false
	}
	return apiErr.ErrorFault() == smithy.FaultClient
}

func describe(msgs []message, idx []int) string {
	if len(idx) == 1 {
		return "the message of " + msgs[idx[0]].lines()
	}
	first, last := msgs[idx[0]].first, msgs[idx[0]].last
	for _, i := range idx[1:] {
		first, last = min(first, msgs[i].first), max(last, msgs[i].last)
	}
	return fmt.Sprintf("%d messages of lines %d-%d", len(idx), first, last)
}

// window is a part of the list read at once: the lines after the
// previous window through line lines, ending at byte end (SHA-256 of the
// list up to there: sum), their items and the lines refused.
type window struct {
	end, lines int64
	sum        string
	items      []item
	rejected   []Rejected
	eof        bool
}

// lineReader reads a list line by line, hashing it, counting bytes and
// lines.
type lineReader struct {
	br  *bufio.Reader
	h   hash.Hash
	off int64
	no  int64
}

// maxLine bounds one line held in memory: the input queue takes no
// message larger, so a longer line is refused.
const maxLine = urlmsg.MaxPayloadBytes

// next reads one line (through '\n' or the end) and returns it without
// its end; tooLong when longer than maxLine (then only its start is
// kept). At the end it returns n == 0 and io.EOF.
func (r *lineReader) next() (text []byte, tooLong bool, n int64, err error) {
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.h.Write(chunk)
		n += int64(len(chunk))
		if room := maxLine + 2 - len(text); len(chunk) > room {
			chunk, tooLong = chunk[:max(room, 0)], true
		}
		text = append(text, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		r.off += n
		if n > 0 {
			r.no++
		}
		text = bytes.TrimSuffix(bytes.TrimSuffix(text, []byte("\n")), []byte("\r"))
		if err == io.EOF && n > 0 {
			err = nil
		}
		return text, tooLong || len(text) > maxLine, n, err
	}
}

func (r *lineReader) sum() string { return hex.EncodeToString(r.h.Sum(nil)) }

// skip reads past what the progress says was sent, checking that it is the
// same list.
func (r *lineReader) skip(p progress) error {
	for r.off < p.Offset {
		_, _, _, err := r.next()
		if err == io.EOF || r.off > p.Offset {
			return fmt.Errorf("%w: it was sent up to byte %d (line %d) and is now shorter, or its lines moved", ErrInputChanged, p.Offset, p.Lines)
		}
		if err != nil {
			return fmt.Errorf("read the list: %w", err)
		}
	}
	if p.Offset > 0 && r.sum() != p.Sum {
		return fmt.Errorf("%w: its first %d bytes (%d lines) are not those sent before", ErrInputChanged, p.Offset, p.Lines)
	}
	return nil
}

// window reads the next window: lines until maxBytes were read, or, for
// a window partly sent before, exactly its lines.
func (r *lineReader) window(maxBytes int64, resume *windowProgress) (window, error) {
	start := r.off
	var w window
	for {
		if resume != nil && r.off >= resume.End {
			break
		}
		if resume == nil && r.off-start >= maxBytes {
			break
		}
		text, tooLong, _, err := r.next()
		if err == io.EOF {
			w.eof = true
			break
		}
		if err != nil {
			return w, fmt.Errorf("read the list at line %d: %w", r.no+1, err)
		}
		if tooLong {
			w.rejected = append(w.rejected, Rejected{Line: r.no, Error: fmt.Sprintf("line is longer than %d bytes", maxLine)})
			continue
		}
		items, err := parseLine(r.no, text)
		if err != nil {
			w.rejected = append(w.rejected, Rejected{Line: r.no, Error: err.Error()})
			continue
		}
		w.items = append(w.items, items...)
	}
	if resume != nil && (r.off != resume.End || r.no != resume.Lines) {
		return w, fmt.Errorf("%w: the window partly sent ended at line %d (byte %d), the list now has line %d at that point (byte %d)", ErrInputChanged, resume.Lines, resume.End, r.no, r.off)
	}
	w.end, w.lines, w.sum = r.off, r.no, r.sum()
	if !w.eof {
		// Look ahead: a window that ends with the list is the last.
		if _, err := r.br.Peek(1); err == io.EOF {
			w.eof = true
		}
	}
	return w, nil
}
