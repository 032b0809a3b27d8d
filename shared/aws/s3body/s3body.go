// Package s3body keeps bodies in an S3 bucket, content-addressed: the
// object sha256/<hash> (shared/domain/body). A body is read from its source as it
// arrives, in parts of PartBytes held in one buffer from a small pool
// shared by every Put of the process, so memory does not grow with the
// body (1 GiB passes through 5 MiB):
//
//   - a body that ends within its first part is hashed before it is sent:
//     HEAD sha256/<hash>, and PUT it only if absent;
//   - a longer one is a multipart upload to a temporary key tmp/<random>
//     (its hash is known only at its end), then HEAD sha256/<hash>, COPY
//     the temporary object there if absent, and DELETE the temporary.
//
// A crash mid-way leaves an incomplete multipart upload or a temporary
// object, both expired after a day by the bucket's lifecycle rules
// (template.yaml), so garbage is bounded. Two workers storing one body at
// once both write the same bytes to the same key: harmless.
package s3body

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/urldownloader/urldownloader/shared/domain/body"
)

// API is the part of the S3 client the store uses.
type API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, opts ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	CopyObject(ctx context.Context, in *s3.CopyObjectInput, opts ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, opts ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, opts ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, in *s3.UploadPartInput, opts ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, opts ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, opts ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

// Defaults of Options.
const (
	// DefaultPartBytes is S3's smallest multipart part: 1 GiB (the
	// largest MaxBodyBytes) is 205 parts, far below S3's 10,000.
	DefaultPartBytes = 5 << 20
	// DefaultBuffers bounds the bodies uploaded at once by one process:
	// four 5 MiB buffers, 20 MiB, whatever the number of workers.
	DefaultBuffers = 4
	// cleanupTimeout bounds the abort or delete after a failure, which runs
	// even when the request's context has ended.
	cleanupTimeout = 10 * time.Second
)

// Options shape a Store.
type Options struct {
	// PartBytes is the size of an upload part and of each buffer
	// (at least 5 MiB, S3's minimum part).
	PartBytes int
	// Buffers is how many bodies the process uploads at once; a Put waits
	// (bounded by its context) for a free buffer.
	Buffers int
	// Refresh, when positive, writes a body again when the stored copy is
	// older than this, so a result that points at it does not outlive it
	// by much: the bucket expires objects by age (BodyRetentionDays), and
	// a body stored once and found again later is not rewritten
	// otherwise. The template's half of the retention.
	Refresh time.Duration
	// Now is the clock Refresh is measured by; nil means time.Now.
	Now func() time.Time
}

// Store is a bucket of bodies.
type Store struct {
	api    API
	bucket string
	opts   Options
	// slots bounds the uploads at once (Options.Buffers); pool keeps
	// their buffers between uploads while they are in use, and lets the
	// collector free them when uploads stop.
	slots chan struct{}
	pool  sync.Pool
}

// New returns a store of bucket through api. It makes no call.
func New(api API, bucket string, opts Options) *Store {
	if opts.PartBytes < DefaultPartBytes {
		opts.PartBytes = DefaultPartBytes
	}
	if opts.Buffers <= 0 {
		opts.Buffers = DefaultBuffers
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{api: api, bucket: bucket, opts: opts, slots: make(chan struct{}, opts.Buffers)}
	s.pool.New = func() any { b := make([]byte, opts.PartBytes); return &b }
	return s
}

// Bucket is the store's bucket name.
func (s *Store) Bucket() string { return s.bucket }

// Put stores the body read from r (see the package comment).
func (s *Store) Put(ctx context.Context, r io.Reader, contentType string) (body.Ref, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return body.Ref{}, fmt.Errorf("wait for an upload buffer: %w", ctx.Err())
	}
	bp := s.pool.Get().(*[]byte)
	defer func() {
		s.pool.Put(bp)
		<-s.slots
	}()
	buf := *bp

	h := sha256.New()
	src := io.TeeReader(r, h)
	n, err := io.ReadFull(src, buf)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return s.putSmall(ctx, buf[:n], h, contentType)
	case err != nil:
		return body.Ref{}, err
	}
	return s.putLarge(ctx, src, buf, h, contentType)
}

// putSmall stores a body that fits one part: its hash is known already.
func (s *Store) putSmall(ctx context.Context, data []byte, h hash.Hash, contentType string) (body.Ref, error) {
	ref := s.ref(h, int64(len(data)), contentType)
	fresh, err := s.fresh(ctx, ref.Key)
	if err != nil || fresh {
		return ref, err
	}
	_, err = s.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &ref.Key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentType: optional(contentType),
	})
	if err != nil {
		return body.Ref{}, fmt.Errorf("put body s3://%s/%s: %w", s.bucket, ref.Key, err)
	}
	return ref, nil
}

// putLarge uploads a body longer than one part to a temporary key, part by
// part through buf (holding the first part already), then gives it its
// content address.
func (s *Store) putLarge(ctx context.Context, src io.Reader, buf []byte, h hash.Hash, contentType string) (body.Ref, error) {
	tmp := body.TempPrefix + randomName()
	up, err := s.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &s.bucket, Key: &tmp, ContentType: optional(contentType),
	})
	if err != nil {
		return body.Ref{}, fmt.Errorf("start upload s3://%s/%s: %w", s.bucket, tmp, err)
	}
	completed := false
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if !completed {
			// Left behind if this fails too: the lifecycle rule aborts
			// incomplete uploads after a day.
			_, _ = s.api.AbortMultipartUpload(cctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &tmp, UploadId: up.UploadId})
			return
		}
		// Whether stored or not, the temporary goes; if the delete fails it
		// expires by lifecycle, and the body (if stored) is unaffected.
		_, _ = s.api.DeleteObject(cctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &tmp})
	}()
	var parts []types.CompletedPart
	var total int64
	n := len(buf)
	for part := int32(1); ; part++ {
		out, err := s.api.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &s.bucket, Key: &tmp, UploadId: up.UploadId, PartNumber: aws.Int32(part),
			Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n)),
		})
		if err != nil {
			return body.Ref{}, fmt.Errorf("upload part %d of s3://%s/%s: %w", part, s.bucket, tmp, err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(part)})
		total += int64(n)
		n, err = io.ReadFull(src, buf)
		if n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			break
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			return body.Ref{}, err
		}
	}
	if _, err := s.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &tmp, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		return body.Ref{}, fmt.Errorf("complete upload s3://%s/%s: %w", s.bucket, tmp, err)
	}
	completed = true
	ref := s.ref(h, total, contentType)
	fresh, err := s.fresh(ctx, ref.Key)
	if err != nil || fresh {
		return ref, err
	}
	// Within one bucket S3 copies without the bytes passing through here
	// (one request up to 5 GiB; MaxBodyBytes is at most 1 GiB).
	if _, err := s.api.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: &s.bucket, Key: &ref.Key, CopySource: aws.String(url.PathEscape(s.bucket) + "/" + tmp),
	}); err != nil {
		return body.Ref{}, fmt.Errorf("copy s3://%s/%s to %s: %w", s.bucket, tmp, ref.Key, err)
	}
	return ref, nil
}

// fresh reports whether key is stored and young enough to keep (see
// Options.Refresh).
func (s *Store) fresh(ctx context.Context, key string) (bool, error) {
	out, err := s.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		if notFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("look for s3://%s/%s: %w", s.bucket, key, err)
	}
	if s.opts.Refresh > 0 && out.LastModified != nil && s.opts.Now().Sub(*out.LastModified) > s.opts.Refresh {
		return false, nil
	}
	return true, nil
}

func (s *Store) ref(h hash.Hash, n int64, contentType string) body.Ref {
	sum := hex.EncodeToString(h.Sum(nil))
	return body.Ref{Bucket: s.bucket, Key: body.Key(sum), Bytes: n, SHA256: sum, ContentType: contentType}
}

// notFound tells HEAD's "no such key" (404; with s3:ListBucket granted,
// as the template does, S3 answers 404 rather than 403) from a failure.
func notFound(err error) bool {
	var nf *types.NotFound
	var nsk *types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nsk) {
		return true
	}
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "NotFound" || api.ErrorCode() == "NoSuchKey")
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func randomName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
