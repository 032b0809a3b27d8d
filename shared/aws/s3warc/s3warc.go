// Package s3warc writes what the check function fetched as WARC segments
// in the body bucket (Common Crawl's layout): records are appended to an
// open segment, uploaded in parts as they fill, and the segment is sealed
// (its upload completed) before any result that points into it is
// published, so every result's warc reference is one ranged GET of a
// complete record.
//
// A segment opens with its warcinfo record at the first exchange and is
// sealed by the first Publish of a result that names it; exchanges that
// come meanwhile go to the next segment. Concurrent publishes share a
// seal. A segment whose upload fails is aborted, and the results that
// point into it are not published (Publish fails): their URLs stay queued
// and are fetched again. An invocation's end seals what is left (see
// Close); what a crash leaves, an incomplete multipart upload, the
// bucket's lifecycle rule removes.
package s3warc

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// API is the part of the S3 client the writer uses.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, opts ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, in *s3.UploadPartInput, opts ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, opts ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, opts ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

// Prefix is where segments live in the bucket: warc/<yyyy>/<mm>/<dd>/.
// The template's lifecycle rule expires them after BodyRetentionDays.
const Prefix = "warc/"

// Defaults of Options.
const (
	// DefaultPartBytes is S3's smallest multipart part.
	DefaultPartBytes = 5 << 20
	// cleanupTimeout bounds the abort after a failure, which runs even
	// when the caller's context has ended.
	cleanupTimeout = 10 * time.Second
	// sealTimeout bounds a seal's upload when its caller's context has no
	// deadline of its own.
	sealTimeout = 30 * time.Second
)

// Options shape a Writer.
type Options struct {
	// PartBytes is the size of the upload parts (at least 5 MiB).
	PartBytes int
	// Info are the warcinfo fields that open every segment.
	Info [][2]string
	// Now dates segments' keys and warcinfo records (default time.Now).
	Now func() time.Time
	// NewID makes WARC-Record-IDs (default random UUID URNs).
	NewID func() string
}

// Writer appends exchanges to segments in one bucket. It is an
// fetch.Archive; results go out through its Publisher. It is safe for
// concurrent use.
type Writer struct {
	api    API
	bucket string
	opts   Options
	run    string // unique per Writer: keys of two instances never meet

	mu   sync.Mutex
	seq  int
	cur  *segment
	byID map[string]*segment // segments by key, until sealed and forgotten
}

// segment is one object being written. Its bytes are appended in offset
// order under mu; buf holds those not yet uploaded as a part.
type segment struct {
	key string

	mu       sync.Mutex
	size     int64
	buf      bytes.Buffer
	uploadID string
	parts    []types.CompletedPart
	err      error // sticky: the segment is aborted
	failed   atomic.Bool

	sealed  chan struct{} // closed once sealed (or failed)
	sealing bool
}

// New returns a writer of segments in bucket. It makes no call.
func New(api API, bucket string, opts Options) *Writer {
	if opts.PartBytes < DefaultPartBytes {
		opts.PartBytes = DefaultPartBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var b [6]byte
	rand.Read(b[:])
	return &Writer{api: api, bucket: bucket, opts: opts, run: hex.EncodeToString(b[:]), byID: map[string]*segment{}}
}

// Exchange appends ex's records to the open segment (opening one if
// needed) and returns where its response record is. Records are
// compressed by the caller's goroutine; a part that fills is uploaded
// before Exchange returns.
func (w *Writer) Exchange(ctx context.Context, ex *warc.Exchange) (warc.Ref, error) {
	enc, err := warc.Encode(ex, w.opts.NewID)
	if err != nil {
		return warc.Ref{}, err
	}
	defer enc.Close()
	w.mu.Lock()
	seg := w.cur
	if seg == nil || seg.failed.Load() {
		// A failed segment takes no more records: its successor does.
		if seg, err = w.open(); err != nil {
			w.mu.Unlock()
			return warc.Ref{}, err
		}
		w.cur = seg
	}
	// Taken before w.mu is released: a seal that starts now waits for
	// this append, so no record lands in a segment after its seal.
	seg.mu.Lock()
	w.mu.Unlock()
	defer seg.mu.Unlock()
	if seg.err != nil {
		return warc.Ref{}, seg.err
	}
	start := seg.size
	// Streamed into parts as they fill: a 50 MB record passes through one
	// part's buffer, not all of it at once.
	if _, err := enc.WriteTo(&parts{ctx: ctx, w: w, seg: seg}); err != nil {
		if seg.err == nil {
			w.abort(seg, fmt.Errorf("warc records of %s: %w", ex.URL, err))
		}
		return warc.Ref{}, seg.err
	}
	seg.size += enc.Len()
	off, length := enc.Response()
	return warc.Ref{Bucket: w.bucket, Key: seg.key, Offset: start + off, Length: length}, nil
}

// open starts the next segment with its warcinfo record (in memory: no
// call until a part fills or it is sealed). Called with w.mu held.
func (w *Writer) open() (*segment, error) {
	now := w.opts.Now().UTC()
	key := fmt.Sprintf("%s%s/%s-%s-%05d.warc.gz", Prefix, now.Format("2006/01/02"), now.Format("20060102150405"), w.run, w.seq)
	w.seq++
	info, err := warc.EncodeInfo(path.Base(key), now, w.opts.Info, w.opts.NewID)
	if err != nil {
		return nil, err
	}
	defer info.Close()
	seg := &segment{key: key, sealed: make(chan struct{})}
	if _, err := info.WriteTo(&seg.buf); err != nil {
		return nil, err
	}
	seg.size = info.Len()
	w.byID[key] = seg
	return seg, nil
}

// parts appends to a segment's buffer, uploading each part as it fills.
type parts struct {
	ctx context.Context
	w   *Writer
	seg *segment
}

func (p *parts) Write(b []byte) (int, error) {
	p.seg.buf.Write(b)
	if err := p.w.uploadFull(p.ctx, p.seg); err != nil {
		return 0, err
	}
	return len(b), nil
}

// uploadFull uploads whole parts from the buffer. Called with seg.mu held.
func (w *Writer) uploadFull(ctx context.Context, seg *segment) error {
	for seg.buf.Len() >= w.opts.PartBytes {
		if err := w.uploadPart(ctx, seg, seg.buf.Next(w.opts.PartBytes)); err != nil {
			w.abort(seg, err)
			return seg.err
		}
	}
	return nil
}

func (w *Writer) uploadPart(ctx context.Context, seg *segment, part []byte) error {
	if seg.uploadID == "" {
		out, err := w.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket: &w.bucket, Key: &seg.key, ContentType: aws.String("application/warc"),
		})
		if err != nil {
			return fmt.Errorf("start warc segment %s: %w", seg.key, err)
		}
		seg.uploadID = aws.ToString(out.UploadId)
	}
	n := int32(len(seg.parts) + 1)
	out, err := w.api.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: &w.bucket, Key: &seg.key, UploadId: &seg.uploadID, PartNumber: &n,
		Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part))),
	})
	if err != nil {
		return fmt.Errorf("upload part %d of warc segment %s: %w", n, seg.key, err)
	}
	seg.parts = append(seg.parts, types.CompletedPart{ETag: out.ETag, PartNumber: &n})
	return nil
}

// abort marks seg failed and aborts its multipart upload, if one began.
// Called with seg.mu held.
func (w *Writer) abort(seg *segment, err error) {
	seg.err = err
	seg.failed.Store(true)
	seg.buf = bytes.Buffer{}
	if seg.uploadID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	// A failed abort leaves an incomplete upload to the lifecycle rule.
	w.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.bucket, Key: &seg.key, UploadId: &seg.uploadID})
}

// Seal completes the segments named by keys, so the records in them can
// be read; it returns once they are (or one failed). A segment sealed
// already costs nothing; the open one is sealed now, and exchanges that
// come meanwhile go to the next.
func (w *Writer) Seal(ctx context.Context, keys ...string) error {
	var errs []error
	for _, key := range keys {
		w.mu.Lock()
		seg, ok := w.byID[key]
		if !ok {
			w.mu.Unlock()
			if strings.Contains(key, "-"+w.run+"-") {
				// Sealed, and forgotten by Close.
				continue
			}
			return fmt.Errorf("warc segment %s: not written by this writer", key)
		}
		mine := !seg.sealing
		if mine {
			seg.sealing = true
			if w.cur == seg {
				w.cur = nil
			}
		}
		w.mu.Unlock()
		if mine {
			w.seal(ctx, seg)
		} else {
			select {
			case <-seg.sealed:
			case <-ctx.Done():
				return fmt.Errorf("wait for warc segment %s: %w", key, ctx.Err())
			}
		}
		if seg.err != nil {
			errs = append(errs, seg.err)
		}
	}
	return errors.Join(errs...)
}

// seal uploads what is left of seg and completes it: one PUT when it
// never filled a part.
func (w *Writer) seal(ctx context.Context, seg *segment) {
	seg.mu.Lock()
	defer seg.mu.Unlock()
	defer close(seg.sealed)
	if seg.err != nil {
		return
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sealTimeout)
		defer cancel()
	}
	var err error
	if seg.uploadID == "" {
		data := seg.buf.Bytes()
		_, err = w.api.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &w.bucket, Key: &seg.key, Body: bytes.NewReader(data),
			ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("application/warc"),
		})
		if err != nil {
			err = fmt.Errorf("put warc segment %s: %w", seg.key, err)
		}
	} else {
		if seg.buf.Len() > 0 {
			err = w.uploadPart(ctx, seg, seg.buf.Bytes())
		}
		if err == nil {
			_, err = w.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
				Bucket: &w.bucket, Key: &seg.key, UploadId: &seg.uploadID,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: seg.parts},
			})
			if err != nil {
				err = fmt.Errorf("complete warc segment %s: %w", seg.key, err)
			}
		}
	}
	if err != nil {
		w.abort(seg, err)
		return
	}
	seg.buf = bytes.Buffer{}
}

// Close seals the open segment, if any, so the records of an invocation's
// last requests (whose results may go out in a later one, after a retry)
// are readable too. Call it at the end of an invocation; the writer
// stays usable.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	seg := w.cur
	// Segments sealed whole are forgotten (Seal knows them by their
	// run); failed ones are kept, so their results keep failing.
	for key, s := range w.byID {
		select {
		case <-s.sealed:
			if s.err == nil {
				delete(w.byID, key)
			}
		default:
		}
	}
	w.mu.Unlock()
	if seg == nil {
		return nil
	}
	return w.Seal(ctx, seg.key)
}

// Publisher publishes results once the segments their warc references
// name are sealed, so a consumer never finds a result whose record
// cannot be read yet. A seal that fails fails the publish: the URLs stay
// queued.
type Publisher struct {
	hostqueue.Publisher
	Writer *Writer
}

// Publish seals the results' segments, then publishes them.
func (p Publisher) Publish(ctx context.Context, results []result.Result) error {
	var keys []string
	seen := map[string]bool{}
	for _, r := range results {
		if r.Warc != nil && r.Warc.Key != "" && !seen[r.Warc.Key] {
			seen[r.Warc.Key] = true
			keys = append(keys, r.Warc.Key)
		}
	}
	if len(keys) > 0 {
		if err := p.Writer.Seal(ctx, keys...); err != nil {
			return fmt.Errorf("publish %d results: %w", len(results), err)
		}
	}
	return p.Publisher.Publish(ctx, results)
}

// Bodies is the body store of WARC output: a body larger than the inline
// limit is already in its response record, so it needs no object of its
// own. Put reads the body to its end (the fetcher's capture copies it into
// the record as it goes) and returns a reference that names only its
// length and SHA-256; the result's warc reference says where it is, and
// shared/web/wholebody reads it from there.
type Bodies struct{}

// Put consumes r and describes what it read.
func (Bodies) Put(_ context.Context, r io.Reader, contentType string) (body.Ref, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return body.Ref{}, err
	}
	return body.Ref{Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil)), ContentType: contentType}, nil
}
