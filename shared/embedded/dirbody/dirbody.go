// Package dirbody keeps bodies in a local folder, content-addressed like
// the S3 store (shared/aws/s3body): <dir>/sha256/<hash>. Local mode (make run)
// keeps them beside its state file; shared/domain/body's contract test holds the
// two stores to the same behaviour.
package dirbody

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/body"
)

// staleTemp is how old a file in the temporary folder must be for New to
// remove it: a body being written is never that old (its request is
// bounded by FetchTimeout, at most 5 minutes), so only a crashed
// process's leftovers are.
const staleTemp = time.Hour

// Store is a folder of bodies.
type Store struct {
	dir string
}

// New opens (creating if needed) the store in dir, made absolute so the
// paths in results name the file from anywhere, and removes what a crashed
// process left in its temporary folder.
func New(dir string, now func() time.Time) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("body folder %s: %w", dir, err)
	}
	for _, sub := range []string{body.KeyPrefix, body.TempPrefix} {
		if err := os.MkdirAll(filepath.Join(abs, sub), 0o755); err != nil {
			return nil, fmt.Errorf("body folder: %w", err)
		}
	}
	if now == nil {
		now = time.Now
	}
	tmp := filepath.Join(abs, body.TempPrefix)
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return nil, fmt.Errorf("body folder: %w", err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && now().Sub(info.ModTime()) > staleTemp {
			_ = os.Remove(filepath.Join(tmp, e.Name()))
		}
	}
	return &Store{dir: abs}, nil
}

// Dir is the store's folder (absolute).
func (s *Store) Dir() string { return s.dir }

// Put writes r to a temporary file while hashing it, makes it durable, and
// renames it to its content address unless that file exists already (the
// same body, kept once). The file is synced before Put returns, so a result
// naming it, written after, never points at nothing after a crash.
func (s *Store) Put(ctx context.Context, r io.Reader, contentType string) (body.Ref, error) {
	f, err := os.CreateTemp(filepath.Join(s.dir, body.TempPrefix), "body-*")
	if err != nil {
		return body.Ref{}, fmt.Errorf("body folder: %w", err)
	}
	tmp := f.Name()
	done := false
	// Readable by other local users, as a downloaded file is (CreateTemp
	// makes it private).
	_ = f.Chmod(0o644)
	defer func() {
		if !done {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
	if err != nil {
		return body.Ref{}, fmt.Errorf("write body to %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return body.Ref{}, fmt.Errorf("sync body %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return body.Ref{}, fmt.Errorf("close body %s: %w", tmp, err)
	}
	done = true
	sum := hex.EncodeToString(h.Sum(nil))
	final := s.path(sum)
	if _, err := os.Stat(final); err == nil {
		_ = os.Remove(tmp)
	} else if !errors.Is(err, fs.ErrNotExist) {
		_ = os.Remove(tmp)
		return body.Ref{}, fmt.Errorf("body folder: %w", err)
	} else if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return body.Ref{}, fmt.Errorf("keep body %s: %w", final, err)
	}
	if d, err := os.Open(filepath.Dir(final)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return body.Ref{Path: final, Bytes: n, SHA256: sum, ContentType: contentType}, nil
}

// Open returns the stored body of sum.
func (s *Store) Open(sum string) (*os.File, error) {
	if err := body.CheckSum(sum); err != nil {
		return nil, err
	}
	return os.Open(s.path(sum))
}

func (s *Store) path(sum string) string {
	return filepath.Join(s.dir, body.Key(sum))
}

// ctxReader ends a read when ctx does (between reads: a read in progress is
// bounded by its own source, e.g. the fetch's timeout).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
