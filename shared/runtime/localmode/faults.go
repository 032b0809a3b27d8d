package localmode

// Disk faults: a full disk, a quota, a file system gone read-only or an I/O
// error under the results file, the bodies folder, the WARC files or the
// state stop the run at once, with what to do, instead of stalling (each
// retry fetching the body again) or writing results the state then cannot
// record (fetched again, written twice). Nothing is lost: a URL without a
// result written and committed stays queued for the same command.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// DiskFaultError is a run stopped by a disk fault: Where names what was
// being written ("results file X", "bodies folder X", "WARC files X",
// "state X") and Path the file or folder.
type DiskFaultError struct {
	Where, Path string
	Err         error
}

func (e *DiskFaultError) Error() string {
	return fmt.Sprintf("%s: %v", e.Where, e.Err)
}

func (e *DiskFaultError) Unwrap() error { return e.Err }

// Cause says the fault in a few words: "no space left on device".
func (e *DiskFaultError) Cause() string {
	if errno, ok := diskErrno(e.Err); ok {
		return errno.Error()
	}
	switch {
	case isSQLite(e.Err, sqliteFull):
		return "database or disk is full"
	case isSQLite(e.Err, sqliteReadOnly):
		return "read-only file system or database"
	}
	return "disk I/O error"
}

// Full tells whether more space (or quota) would let the run go on; false
// for a read-only file system or an I/O error.
func (e *DiskFaultError) Full() bool {
	errno, ok := diskErrno(e.Err)
	if !ok {
		return isSQLite(e.Err, sqliteFull)
	}
	return errno == syscall.ENOSPC || errno == syscall.EDQUOT
}

// diskErrnos are the errors of the medium, not of the request or the path.
var diskErrnos = []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EIO}

// SQLite's primary result codes for the same faults
// (https://www.sqlite.org/rescode.html): the low byte of an extended code.
const (
	sqliteReadOnly = 8
	sqliteIOErr    = 10
	sqliteFull     = 13
)

func diskErrno(err error) (syscall.Errno, bool) {
	for _, errno := range diskErrnos {
		if errors.Is(err, errno) {
			return errno, true
		}
	}
	return 0, false
}

// isSQLite tells whether err is SQLite's error with the primary code.
func isSQLite(err error, code int) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == code
}

// IsDiskFault tells whether err is a fault of the disk under what was
// written.
func IsDiskFault(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := diskErrno(err); ok {
		return true
	}
	return isSQLite(err, sqliteFull) || isSQLite(err, sqliteIOErr) || isSQLite(err, sqliteReadOnly)
}

// faults holds the run's first disk fault; its channel closes with it.
type faults struct {
	once  sync.Once
	first *DiskFaultError
	ch    chan struct{}
}

func newFaults() *faults { return &faults{ch: make(chan struct{})} }

// note records err when it is a disk fault (the first one wins) and
// returns err unchanged.
func (f *faults) note(where, path string, err error) error {
	if !IsDiskFault(err) {
		return err
	}
	f.once.Do(func() {
		f.first = &DiskFaultError{Where: where, Path: path, Err: err}
		close(f.ch)
	})
	return err
}

// stopped is closed by the first disk fault.
func (f *faults) stopped() <-chan struct{} { return f.ch }

// err is the first disk fault, or nil.
func (f *faults) err() error {
	select {
	case <-f.ch:
		return f.first
	default:
		return nil
	}
}

// faultBodies notes the bodies folder's disk faults.
type faultBodies struct {
	body.Store
	f    *faults
	path string
}

func (b faultBodies) Put(ctx context.Context, r io.Reader, contentType string) (body.Ref, error) {
	ref, err := b.Store.Put(ctx, r, contentType)
	return ref, b.f.note("bodies folder "+b.path, b.path, err)
}

// archive is what the fetcher writes WARC records to.
type archive interface {
	Exchange(ctx context.Context, ex *warc.Exchange) (warc.Ref, error)
}

// faultArchive notes the WARC files' disk faults.
type faultArchive struct {
	archive
	f    *faults
	path string
}

func (a faultArchive) Exchange(ctx context.Context, ex *warc.Exchange) (warc.Ref, error) {
	ref, err := a.archive.Exchange(ctx, ex)
	return ref, a.f.note("WARC files "+a.path, a.path, err)
}

// faultStore notes the state's disk faults on what the check runs write
// and read (ingest's and the ledger's come back as the run's error).
type faultStore struct {
	Store
	f    *faults
	path string
}

func (s faultStore) note(err error) error { return s.f.note("state "+s.path, s.path, err) }

func (s faultStore) Commit(ctx context.Context, key string, c hostqueue.Commit) (*hostqueue.Host, error) {
	h, err := s.Store.Commit(ctx, key, c)
	return h, s.note(err)
}

func (s faultStore) Load(ctx context.Context, key string, want int) (*hostqueue.Host, error) {
	h, err := s.Store.Load(ctx, key, want)
	return h, s.note(err)
}

func (s faultStore) AcquireShard(ctx context.Context, vshard int, owner string, until, now time.Time) (bool, error) {
	ok, err := s.Store.AcquireShard(ctx, vshard, owner, until, now)
	return ok, s.note(err)
}

func (s faultStore) PutRobots(ctx context.Context, key, origin string, r hostqueue.Robots) error {
	return s.note(s.Store.PutRobots(ctx, key, origin, r))
}
