// Package body describes a response body kept outside the result message
// (the claim-check pattern): where it is, how long it is and its SHA-256,
// and the interface of a store that keeps such bodies by their content.
//
// Stores are content-addressed: a body's key is its SHA-256, so the same
// body fetched from two URLs, or twice from one, is kept once. The
// implementations are shared/aws/s3body (S3, deployed and on moto) and
// shared/embedded/dirbody (a local folder, local mode); consumers read a result's
// body whole, verified, with shared/web/wholebody.
package body

import (
	"context"
	"errors"
	"io"
	"regexp"
)

// Ref points at a stored body. It is the result message's "body" field:
// Bucket and Key for S3, Path for a local folder.
type Ref struct {
	Bucket      string `json:"bucket,omitempty"`
	Key         string `json:"key,omitempty"`
	Path        string `json:"path,omitempty"`
	Bytes       int64  `json:"bytes"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"contentType,omitempty"`
}

// Store keeps bodies by their content.
type Store interface {
	// Put reads r to its end as it arrives (never holding it whole in
	// memory beyond one upload part), stores it under its SHA-256 unless
	// a body with that hash is already stored, and returns its reference.
	// An error from r is returned wrapped (errors.Is/As see it), so the
	// caller can tell a failed read from a failed store; nothing partial
	// is then left but what the store's own clean-up removes.
	Put(ctx context.Context, r io.Reader, contentType string) (Ref, error)
}

// KeyPrefix is where content-addressed bodies live in a store;
// TempPrefix where bodies being written wait until their hash is known.
// The template's lifecycle rules expire TempPrefix after a day, so a crash
// mid-upload leaves bounded garbage.
const (
	KeyPrefix  = "sha256/"
	TempPrefix = "tmp/"
)

// Key is the content address of a body whose SHA-256 is sum (lowercase
// hex): sha256/<sum>.
func Key(sum string) string { return KeyPrefix + sum }

var hexSum = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ErrBadSum is returned for a hash that is not 64 lowercase hex digits.
var ErrBadSum = errors.New("not a sha256 in lowercase hex")

// CheckSum validates a SHA-256 as Ref.SHA256 carries it.
func CheckSum(sum string) error {
	if !hexSum.MatchString(sum) {
		return ErrBadSum
	}
	return nil
}

// ReadError marks an error of the reader given to Store.Put (the body's
// source, e.g. the network), as opposed to the store's own.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "read body: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// TrackReads wraps r so that any error it returns (other than io.EOF) comes
// back as a *ReadError: a store that wraps its errors keeps the mark.
func TrackReads(r io.Reader) io.Reader { return &tracked{r: r} }

type tracked struct{ r io.Reader }

func (t *tracked) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &ReadError{Err: err}
	}
	return n, err
}
