package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/urldownloader/urldownloader/shared/domain/backoff"
	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/wholebody"
)

// ReceiveAPI is the part of the SQS client Receive uses.
type ReceiveAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// DefaultRecent is how many result ids Receive remembers to drop
// duplicates: SQS delivers at least once, and a redelivered result comes
// back within a visibility timeout or so, long before this many others.
const DefaultRecent = 100_000

// tailBytes is how much of an existing out file is read at the start for
// the ids it holds, so a result written just before a crash (and so not
// deleted) is not written again when it comes back.
const tailBytes = 8 << 20

// ReceiveOptions configure Receive.
type ReceiveOptions struct {
	SQS      ReceiveAPI
	QueueURL string
	// Out is the results file: one result per line, appended to, never
	// truncated (but for an incomplete last line a crash left, whose
	// message was not deleted).
	Out string
	// S3 reads stored bodies; needed with Bodies or Inline.
	S3 wholebody.GetAPI
	// Bodies, if set, is a folder where the bodies of results that point
	// at the bucket are written (as <Bodies>/sha256/<sha256>, verified);
	// the result's "body" then names the file in "path" instead of the
	// bucket and key, as local mode's results do.
	Bodies string
	// Inline puts stored bodies into the result's "data" instead (each
	// held whole in memory while written).
	Inline bool
	// Bucket, if set, is the only bucket bodies are read from (the
	// stack's BodyBucketName): a result pointing elsewhere is written as
	// it came, its body not fetched.
	Bucket string
	// UntilIdle stops after this long without a message; 0 receives until
	// ctx ends.
	UntilIdle time.Duration
	// Max stops after this many results were written; 0 has no limit.
	Max int64
	// Recent is how many ids are remembered to drop duplicates
	// (DefaultRecent when 0).
	Recent int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Retry spaces out receive retries after a failed call; the zero
	// Policy means 8 attempts from 500 ms to 20 s.
	Retry backoff.Policy
	// OnNote, if set, is told of what the user should know: messages left
	// on the queue and why, deletes that failed, a repaired out file.
	OnNote func(string)
}

// ReceiveReport says what a Receive did.
type ReceiveReport struct {
	// Received counts messages received; Written the results written;
	// Duplicates those dropped as already written; Deleted the messages
	// deleted; Bodies the stored bodies fetched.
	Received, Written, Duplicates, Deleted, Bodies int64
	// Left counts messages left on the queue (not results, or a body
	// that could not be fetched): SQS hands them out again.
	Left int64
	// Idle is set when the run stopped after UntilIdle without a message.
	Idle bool
}

func (o ReceiveOptions) reached(rep ReceiveReport) bool { return o.Max > 0 && rep.Written >= o.Max }

// Receive long-polls the output queue (ten messages, 20 s at a time),
// appends each result to o.Out as a JSON line, syncs the file, and only
// then deletes the messages written (and the duplicates of results
// written before, by id): a crash at any point loses no result, and
// writes a result twice only if it outlives the id memory. Cancelling ctx
// stops after the batch being written (a receive in flight is abandoned:
// its messages come back after the queue's visibility timeout) and
// returns ctx's error.
func Receive(ctx context.Context, o ReceiveOptions) (ReceiveReport, error) {
	var rep ReceiveReport
	if o.SQS == nil || o.QueueURL == "" || o.Out == "" {
		return rep, errors.New("receive: an SQS client, a queue URL and an out file are required")
	}
	if (o.Bodies != "" || o.Inline) && o.S3 == nil {
		return rep, errors.New("receive: fetching bodies needs an S3 client")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Retry.Base == 0 && o.Retry.Attempts == 0 {
		o.Retry = backoff.Policy{Base: 500 * time.Millisecond, Max: 20 * time.Second, Attempts: 8, Sleep: o.Retry.Sleep}
	}
	r := &receiver{o: o, rep: &rep, recent: newRecent(cmp0(o.Recent, DefaultRecent)), noted: newRecent(1024), rd: wholebody.Reader{S3: o.S3}}
	f, err := r.openOut()
	if err != nil {
		return rep, err
	}
	defer f.Close()
	r.out = f
	last := o.Now()
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		wait := int32(20)
		if o.UntilIdle > 0 {
			left := o.UntilIdle - o.Now().Sub(last)
			if left <= 0 {
				rep.Idle = true
				return rep, nil
			}
			wait = int32(min(20, max(1, math.Ceil(left.Seconds()))))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Duration(wait)*time.Second+callTimeout)
		out, err := o.SQS.ReceiveMessage(cctx, &sqs.ReceiveMessageInput{
			QueueUrl:            &o.QueueURL,
			MaxNumberOfMessages: 10,
			WaitTimeSeconds:     wait,
		})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			failures++
			if o.Retry.Attempts > 0 && failures >= o.Retry.Attempts {
				return rep, fmt.Errorf("receive from %s: %d calls failed in a row: %w", o.QueueURL, failures, err)
			}
			if err := o.Retry.Wait(ctx, failures); err != nil {
				return rep, err
			}
			continue
		}
		failures = 0
		if len(out.Messages) == 0 {
			continue
		}
		rep.Received += int64(len(out.Messages))
		results, err := r.batch(ctx, out.Messages)
		if err != nil {
			return rep, err
		}
		if results > 0 {
			last = o.Now()
		}
		if o.reached(rep) {
			return rep, nil
		}
	}
}

type receiver struct {
	o      ReceiveOptions
	rep    *ReceiveReport
	out    *os.File
	recent *recent
	// noted are messages already reported as left on the queue, so one
	// that keeps coming back is reported once.
	noted *recent
	rd    wholebody.Reader
}

func (r *receiver) note(msgID, format string, args ...any) {
	r.rep.Left++
	if r.o.OnNote == nil || r.noted.has(msgID) {
		return
	}
	r.noted.add(msgID)
	r.o.OnNote(fmt.Sprintf(format, args...))
}

// batch writes a received batch's new results, syncs them, and deletes
// what was written or already had been. It returns how many messages were
// results.
func (r *receiver) batch(ctx context.Context, msgs []sqstypes.Message) (int, error) {
	var buf bytes.Buffer
	var done []sqstypes.Message
	var ids []string
	inBatch := map[string]bool{}
	results := 0
	for _, m := range msgs {
		if r.o.reached(ReceiveReport{Written: r.rep.Written + int64(len(ids))}) {
			break // left for the next run, not deleted
		}
		msgID := aws.ToString(m.MessageId)
		res, line, err := parse(aws.ToString(m.Body))
		if err != nil {
			r.note(msgID, "message %s is not a result, left on the queue: %v", msgID, err)
			continue
		}
		results++
		if r.recent.has(res.ID) || inBatch[res.ID] {
			r.rep.Duplicates++
			done = append(done, m)
			continue
		}
		if line, err = r.withBody(ctx, res, line); err != nil {
			r.note(msgID, "result %s left on the queue (it comes back after the visibility timeout): %v", res.ID, err)
			continue
		}
		inBatch[res.ID] = true
		buf.Write(line)
		buf.WriteByte('\n')
		ids = append(ids, res.ID)
		done = append(done, m)
	}
	if buf.Len() > 0 {
		if _, err := r.out.Write(buf.Bytes()); err != nil {
			return results, fmt.Errorf("write results to %s: %w", r.o.Out, err)
		}
		if err := r.out.Sync(); err != nil {
			return results, fmt.Errorf("sync %s: %w", r.o.Out, err)
		}
		r.rep.Written += int64(len(ids))
	}
	for _, id := range ids {
		r.recent.add(id)
	}
	r.delete(ctx, done)
	return results, nil
}

// parse reads a message body as a result and returns it with the line to
// write: the body compacted onto one line, as it came.
func parse(b string) (result.Result, []byte, error) {
	var res result.Result
	var line bytes.Buffer
	if err := json.Compact(&line, []byte(b)); err != nil {
		return res, nil, fmt.Errorf("not JSON: %w", err)
	}
	if err := json.Unmarshal(line.Bytes(), &res); err != nil {
		return res, nil, fmt.Errorf("not a result: %w", err)
	}
	if res.ID == "" {
		return res, nil, errors.New("a result without an id")
	}
	return res, line.Bytes(), nil
}

// withBody fetches a stored body when asked (into the folder, or inline)
// and returns the line to write: the message as it came when nothing
// changed, else the result with its body.
func (r *receiver) withBody(ctx context.Context, res result.Result, line []byte) ([]byte, error) {
	ref := res.Body
	if (r.o.Bodies == "" && !r.o.Inline) || ref == nil || res.Status != result.StatusFetched {
		return line, nil
	}
	// A message names any bucket and any path: only an object in the
	// stack's bucket is read, never a local file.
	if ref.Bucket == "" || ref.Key == "" || (r.o.Bucket != "" && ref.Bucket != r.o.Bucket) {
		if r.o.OnNote != nil {
			r.o.OnNote(fmt.Sprintf("result %s: body in %q, not the stack's bucket %q: written without fetching it", res.ID, ref.Bucket, r.o.Bucket))
		}
		return line, nil
	}
	if r.o.Inline {
		data, err := r.rd.ReadAll(ctx, res)
		if err != nil {
			return nil, err
		}
		res.Body = nil
		res.SetBody(data)
	} else {
		path, err := r.storeBody(ctx, res)
		if err != nil {
			return nil, err
		}
		// As local mode's results: the file in "path", so wholebody
		// reads it without S3.
		ref.Bucket, ref.Key, ref.Path = "", "", path
	}
	r.rep.Bodies++
	return marshal(res)
}

// storeBody writes a stored body to <Bodies>/sha256/<sha256> (verified
// against the result, written beside it, synced, renamed), unless a file
// of its length is there already: the same body is written once.
func (r *receiver) storeBody(ctx context.Context, res result.Result) (string, error) {
	if err := body.CheckSum(res.Body.SHA256); err != nil {
		return "", fmt.Errorf("body sha256 %q: %w", res.Body.SHA256, err)
	}
	path, err := filepath.Abs(filepath.Join(r.o.Bodies, filepath.FromSlash(body.Key(res.Body.SHA256))))
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(path); err == nil && st.Size() == res.Body.Bytes {
		return path, nil
	}
	rc, err := r.rd.Open(ctx, res)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	tmpDir := filepath.Join(r.o.Bodies, "tmp")
	for _, d := range []string{tmpDir, filepath.Dir(path)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", fmt.Errorf("bodies folder: %w", err)
		}
	}
	f, err := os.CreateTemp(tmpDir, "body*")
	if err != nil {
		return "", fmt.Errorf("bodies folder: %w", err)
	}
	_, err = io.Copy(f, rc)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write body of %s: %w", res.ID, err)
	}
	return path, nil
}

// marshal writes a result as one line, '<' and '&' as they are (as the
// check function writes results).
func marshal(res result.Result) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return nil, fmt.Errorf("encode result %s: %w", res.ID, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// delete removes written messages from the queue. A delete that fails is
// reported, not fatal: the message comes back and is dropped then as a
// duplicate.
func (r *receiver) delete(ctx context.Context, msgs []sqstypes.Message) {
	if len(msgs) == 0 {
		return
	}
	in := &sqs.DeleteMessageBatchInput{QueueUrl: &r.o.QueueURL}
	for i, m := range msgs {
		in.Entries = append(in.Entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
	}
	// The results are written: deleting them is part of the batch even
	// when the run is stopping.
	dctx := context.WithoutCancel(ctx)
	var out *sqs.DeleteMessageBatchOutput
	err := r.o.Retry.Retry(dctx, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		var err error
		out, err = r.o.SQS.DeleteMessageBatch(cctx, in)
		if err != nil && permanent(err) {
			return backoff.Permanent(err)
		}
		return err
	})
	if err != nil {
		r.notef("could not delete %d written messages (they come back and are dropped as duplicates): %v", len(msgs), err)
		return
	}
	r.rep.Deleted += int64(len(out.Successful))
	if len(out.Failed) > 0 {
		f := out.Failed[0]
		r.notef("could not delete %d written messages (they come back and are dropped as duplicates): %s: %s", len(out.Failed), aws.ToString(f.Code), aws.ToString(f.Message))
	}
}

func (r *receiver) notef(format string, args ...any) {
	if r.o.OnNote != nil {
		r.o.OnNote(fmt.Sprintf(format, args...))
	}
}

// openOut opens the out file for appending, after removing an incomplete
// last line (a crash in the middle of a write: its message was not
// deleted) and reading the ids of the results at its end.
func (r *receiver) openOut() (*os.File, error) {
	f, err := os.OpenFile(r.o.Out, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open out file: %w", err)
	}
	if err := r.repairAndSeed(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("out file %s: %w", r.o.Out, err)
	}
	f.Close()
	f, err = os.OpenFile(r.o.Out, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("open out file: %w", err)
	}
	return f, nil
}

func (r *receiver) repairAndSeed(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return errors.New("not a regular file (results are synced before their messages are deleted)")
	}
	size := st.Size()
	cut, err := lastLineEnd(f, size)
	if err != nil {
		return err
	}
	if cut < size {
		if err := f.Truncate(cut); err != nil {
			return fmt.Errorf("remove its incomplete last line: %w", err)
		}
		r.notef("removed an incomplete last line (%d bytes) from %s: a crash cut it, its message was not deleted and comes again", size-cut, r.o.Out)
		size = cut
	}
	start := max(0, size-tailBytes)
	tail := make([]byte, size-start)
	if _, err := f.ReadAt(tail, start); err != nil {
		return err
	}
	if start > 0 {
		// The tail's first line may be the end of a longer one.
		tail = tail[bytes.IndexByte(tail, '\n')+1:]
	}
	for line := range bytes.Lines(tail) {
		var v struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(line, &v) == nil && v.ID != "" {
			r.recent.add(v.ID)
		}
	}
	return nil
}

// lastLineEnd returns the offset just after the file's last '\n' (0 if it
// has none), reading backwards a MiB at a time.
func lastLineEnd(f *os.File, size int64) (int64, error) {
	buf := make([]byte, min(size, 1<<20))
	for end := size; end > 0; {
		n := min(end, int64(len(buf)))
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return end - n + int64(i) + 1, nil
		}
		end -= n
	}
	return 0, nil
}

// recent remembers the last n ids added.
type recent struct {
	ring []string
	next int
	set  map[string]struct{}
}

func newRecent(n int) *recent {
	return &recent{ring: make([]string, n), set: make(map[string]struct{}, min(n, 1<<16))}
}

func (r *recent) has(id string) bool { _, ok := r.set[id]; return ok }

func (r *recent) add(id string) {
	if r.has(id) {
		return
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	r.set[id] = struct{}{}
}
