// Package wholebody reads a result's body whole, wherever it is: inline in
// the message (data: text, base64 or gzip+base64), in S3 (body.bucket and body.key) or
// in local mode's folder (body.path), or in the WARC record its warc
// reference names (WARC output keeps large bodies there alone), and verifies it against the
// result's bytes and sha256. It is the package a consumer of the output
// queue imports:
//
//	r := wholebody.Reader{S3: s3.NewFromConfig(cfg)}
//	data, err := r.ReadAll(ctx, res) // res: a result.Result from the queue
//
// or, for a body too large to hold, r.Open and read the stream: its last
// Read fails if the bytes are not the ones fetched.
package wholebody

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// GetAPI is the part of the S3 client Reader uses.
type GetAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Reader reads bodies. S3 may be nil when no result points at a bucket
// (local mode).
type Reader struct {
	S3 GetAPI
}

// ErrMismatch is returned when a body's length or SHA-256 is not the one
// its result gives: a damaged or replaced object.
var ErrMismatch = errors.New("body does not match its result")

// ErrCut is returned for an inline body that was cut to fit the queue's
// message: the message holds only part of it and no stored copy exists.
var ErrCut = errors.New("body was cut to fit the message")

// ErrNoBody is returned for a result that carries no body (not fetched).
var ErrNoBody = errors.New("result has no body")

// ReadAll returns the result's body, verified.
func (rd Reader) ReadAll(ctx context.Context, res result.Result) ([]byte, error) {
	rc, err := rd.Open(ctx, res)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Open returns the result's body as a stream whose final Read reports
// ErrMismatch instead of io.EOF when the bytes read are not the body the
// result describes.
func (rd Reader) Open(ctx context.Context, res result.Result) (io.ReadCloser, error) {
	if res.Status != result.StatusFetched {
		return nil, fmt.Errorf("%s (%s): %w", res.ID, res.Status, ErrNoBody)
	}
	if ref := res.Body; ref != nil {
		if err := body.CheckSum(ref.SHA256); err != nil {
			return nil, fmt.Errorf("result %s: body sha256 %q: %w", res.ID, ref.SHA256, err)
		}
		var rc io.ReadCloser
		var err error
		if ref.Bucket == "" && ref.Key == "" && ref.Path == "" && res.Warc != nil {
			// WARC output keeps a large body in its response record
			// alone (shared/aws/s3warc's Bodies).
			rc, err = rd.openWarc(ctx, *res.Warc, ref.Bytes)
		} else {
			rc, err = rd.openStored(ctx, *ref)
		}
		if err != nil {
			return nil, fmt.Errorf("result %s: %w", res.ID, err)
		}
		return verify(rc, ref.Bytes, ref.SHA256), nil
	}
	data, err := res.InlineBody()
	if err != nil {
		return nil, err
	}
	if int64(len(data)) < res.Bytes {
		return nil, fmt.Errorf("result %s: %d of %d bytes inline: %w", res.ID, len(data), res.Bytes, ErrCut)
	}
	return verify(io.NopCloser(bytes.NewReader(data)), res.Bytes, res.SHA256), nil
}

func (rd Reader) openStored(ctx context.Context, ref body.Ref) (io.ReadCloser, error) {
	switch {
	case ref.Bucket != "" && ref.Key != "":
		if rd.S3 == nil {
			return nil, fmt.Errorf("body in s3://%s/%s and no S3 client", ref.Bucket, ref.Key)
		}
		out, err := rd.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &ref.Bucket, Key: &ref.Key})
		if err != nil {
			return nil, fmt.Errorf("get s3://%s/%s: %w", ref.Bucket, ref.Key, err)
		}
		return out.Body, nil
	case ref.Path != "":
		f, err := os.Open(ref.Path)
		if err != nil {
			return nil, fmt.Errorf("open body: %w", err)
		}
		return f, nil
	}
	return nil, errors.New("body reference names neither an object nor a file")
}

// openWarc reads the body of the response record ref points at: one
// ranged GET of its gzip member (or a read of the local file's range),
// its content coding undone, cut at n bytes as the result's body was.
func (rd Reader) openWarc(ctx context.Context, ref warc.Ref, n int64) (io.ReadCloser, error) {
	var member io.ReadCloser
	switch {
	case ref.Bucket != "" && ref.Key != "":
		if rd.S3 == nil {
			return nil, fmt.Errorf("warc record in s3://%s/%s and no S3 client", ref.Bucket, ref.Key)
		}
		rng := fmt.Sprintf("bytes=%d-%d", ref.Offset, ref.Offset+ref.Length-1)
		out, err := rd.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &ref.Bucket, Key: &ref.Key, Range: &rng})
		if err != nil {
			return nil, fmt.Errorf("get s3://%s/%s %s: %w", ref.Bucket, ref.Key, rng, err)
		}
		member = out.Body
	case ref.File != "":
		f, err := os.Open(ref.File)
		if err != nil {
			return nil, fmt.Errorf("open warc file: %w", err)
		}
		member = struct {
			io.Reader
			io.Closer
		}{io.NewSectionReader(f, ref.Offset, ref.Length), f}
	default:
		return nil, errors.New("warc reference names neither an object nor a file")
	}
	rec, err := warc.ReadRecord(member)
	if err != nil {
		member.Close()
		return nil, err
	}
	content, err := rec.Content()
	if err != nil {
		rec.Close()
		member.Close()
		return nil, fmt.Errorf("warc record payload: %w", err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(content, n), closers{content, rec, member}}, nil
}

type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// verify passes rc through, hashing it; at its end it compares the count
// and hash with the result's.
func verify(rc io.ReadCloser, n int64, sum string) io.ReadCloser {
	return &verifier{rc: rc, want: n, sum: sum, h: sha256.New()}
}

type verifier struct {
	rc   io.ReadCloser
	want int64
	sum  string
	h    hash.Hash
	got  int64
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.h.Write(p[:n])
	v.got += int64(n)
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); v.got != v.want || got != v.sum {
			return n, fmt.Errorf("%w: %d bytes with sha256 %s, want %d bytes with %s", ErrMismatch, v.got, got, v.want, v.sum)
		}
	}
	return n, err
}

func (v *verifier) Close() error { return v.rc.Close() }
