package localmode

// The results file of a state (Options.OutPath): results are never
// destroyed. Open checks the state and the file before it creates or
// writes either, the state records which file it writes (path, device and
// inode, the bytes known written and the results counted), and a run of the
// same job appends to that file, while a file the state does not know is
// refused unless Options.Overwrite says to start it anew.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

// OutConflictError is returned by Open when the results file is not the
// one the state writes: Open wrote nothing to it (nor created the state).
type OutConflictError struct {
	// Out is the file given (empty: standard output), State the state
	// file (empty: in memory).
	Out, State string
	// Recorded is the results file the state writes, when it records one.
	Recorded string
	// Reason says what does not match.
	Reason string
}

func (e *OutConflictError) Error() string {
	out := e.Out
	if out == "" {
		out = "standard output"
	}
	return fmt.Sprintf("results file %s: %s", out, e.Reason)
}

// StateDamagedError is returned by Open (and by Run, when a damaged page
// is first read there) when the state file is not a urldownloader state:
// not SQLite, cut short, corrupted, or another program's database. Running
// again cannot mend it; Err keeps SQLite's own words for -v.
type StateDamagedError struct {
	State string
	Err   error
}

func (e *StateDamagedError) Error() string {
	return fmt.Sprintf("%s is not a urldownloader state (or is damaged)", e.State)
}

func (e *StateDamagedError) Unwrap() error { return e.Err }

// damaged turns an error that says the state file is damaged into a
// StateDamagedError, and returns any other error as it is.
func damaged(state string, err error) error {
	var d *StateDamagedError
	if state == "" || err == nil || errors.As(err, &d) || !sqlite.Damaged(err) {
		return err
	}
	return &StateDamagedError{State: state, Err: err}
}

// OutInfo tells what Open did with the results file.
type OutInfo struct {
	// Path is the results file, absolute; empty for Options.Out.
	Path string
	// Appended is set when the results go after those already in the
	// file, Earlier of which the state counted as written by earlier
	// runs; Overwritten when the file was emptied (Options.Overwrite).
	Appended, Overwritten bool
	Earlier               int64
	// Cut counts the bytes of a partial last line removed: a write cut by
	// a crash, beyond what the state knew written, so never committed (its
	// URL is still queued and gets its result again). Terminated counts
	// the partial last lines ended with a newline instead, where the state
	// cannot vouch for the bytes (it recorded no file): none is removed.
	Cut        int64
	Terminated int
	// Unrecorded is set when the state predates the record (or wrote to
	// standard output): the file is appended to, as it was before.
	Unrecorded bool
	// OverwriteIgnored is set when Overwrite was asked for a file this
	// state wrote: a resumed job appends to its own results, always.
	OverwriteIgnored bool
}

// Takeover tells what Open found of a process that worked the state before
// and ended without releasing it (kill -9, a crash): the shard leases it
// held, released at once since the OS lock shows that no process holds
// them.
type Takeover = sqlite.Takeover

// stateFiles are the files a runtime holds beside the store: the state's
// lock and the results file with its record.
type stateFiles struct {
	lock     *stateLock
	outLock  *outLock
	takeover Takeover
	outInfo  OutInfo

	// synced, once results are written, is the offset after the last
	// whole line synced (lineWriter.Synced): what the record keeps.
	synced func() int64
	// tail are the keys of the lines past the recorded offset at open,
	// tailFrom (see lineWriter.written).
	tail     map[string]bool
	tailFrom int64
	// unsettled are the results written whose URLs are not committed.
	unsettled *unsettled

	mu       sync.Mutex
	out      *os.File // nil unless Options.OutPath
	db       *sql.DB  // the state's, for the record; nil in memory
	rec      outRecord
	recorded time.Time // when rec was last written
}

// Takeover tells what Open took over from a dead process (zero when the
// state was left cleanly).
func (rt *Runtime) Takeover() Takeover { return rt.files.takeover }

// OutFile tells what Open did with the results file.
func (rt *Runtime) OutFile() OutInfo { return rt.files.outInfo }

// recover takes over what a process that died on the state left: Open
// holds the state's OS lock, so no live process holds its shard leases.
func (rt *Runtime) recover(ctx context.Context, s *sqlite.Store) error {
	t, err := s.TakeOverLeases(ctx)
	if err != nil {
		return err
	}
	rt.files.takeover = t
	if t.Leases > 0 {
		rt.log.Info("took over the shard leases of a process that ended without releasing them",
			"leases", t.Leases, "until", t.Until, "hosts", t.Hosts)
	}
	return nil
}

// outRecord is the state's record of its results file.
type outRecord struct {
	Path     string
	Dev, Ino uint64
	// Size is a lower bound of the file's length: bytes written and
	// synced; results are published before they are committed, so the
	// file may hold more after a crash, never less.
	Size    int64
	Results int64
	// Head is the SHA-256 of the file's first HeadLen bytes (up to
	// headBytes): a file deleted and written anew may get the same inode.
	Head    []byte
	HeadLen int64
}

// headBytes is how much of the file's start the record's checksum covers.
const headBytes = 4096

const outSchema = `
CREATE TABLE IF NOT EXISTS out_file (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	path    TEXT    NOT NULL,
	dev     INTEGER NOT NULL,
	ino     INTEGER NOT NULL,
	size    INTEGER NOT NULL,
	results INTEGER NOT NULL,
	head    BLOB    NOT NULL,
	headlen INTEGER NOT NULL,
	updated INTEGER NOT NULL
)`

// recordEvery bounds how often the record is rewritten while results are
// written (its size is a lower bound, so a stale one is safe).
const recordEvery = time.Second

// prepareState checks the state path and, for a new state, the results
// file, before anything is created: a mistyped --state must not empty or
// touch a results file. Then it creates the state's folder and takes its
// lock. fresh tells that no state file existed. The results file's lock is
// taken first of all, before anything is checked against it or emptied:
// a second job on the same file is refused whatever its state.
func prepareState(opts Options) (fresh bool, lock *stateLock, out *outLock, err error) {
	if opts.OutPath != "" && opts.Out != nil {
		return false, nil, nil, errors.New("give Out or OutPath, not both")
	}
	if out, err = lockOut(opts.OutPath); err != nil {
		return false, nil, nil, err
	}
	fresh, lock, err = prepareLockedState(opts)
	if err != nil {
		out.discard()
		return false, nil, nil, err
	}
	return fresh, lock, out, nil
}

func prepareLockedState(opts Options) (fresh bool, lock *stateLock, err error) {
	if opts.State == "" {
		return true, nil, checkNewOut(opts)
	}
	fi, err := os.Stat(opts.State)
	switch {
	case errors.Is(err, os.ErrNotExist):
		fresh = true
	case err != nil:
		return false, nil, fmt.Errorf("open state: %w", err)
	case !fi.Mode().IsRegular():
		return false, nil, fmt.Errorf("open state: %s is not a file", opts.State)
	case fi.Size() == 0:
		// A zero-byte file (touch, or a state created and never
		// written) holds no job: it is a new state, whose results file
		// must be new too, not an old one that appends to another job's.
		fresh = true
	}
	if fresh {
		if err := checkNewOut(opts); err != nil {
			return false, nil, err
		}
		if err := os.MkdirAll(filepath.Dir(opts.State), 0o755); err != nil {
			return false, nil, fmt.Errorf("open state: %w", err)
		}
	}
	if opts.SharedState {
		return fresh, nil, nil
	}
	lock, err = lockState(opts.State)
	return fresh, lock, err
}

// checkNewOut checks the results file of a state that records none yet:
// missing or empty is fine, anything else only with Overwrite.
func checkNewOut(opts Options) error {
	if opts.OutPath == "" {
		return nil
	}
	fi, err := os.Stat(opts.OutPath)
	if errors.Is(err, os.ErrNotExist) {
		dir := filepath.Dir(opts.OutPath)
		if di, err := os.Stat(dir); err != nil || !di.IsDir() {
			return fmt.Errorf("results file %s: folder %s does not exist", opts.OutPath, dir)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	if fi.IsDir() {
		return fmt.Errorf("results file %s is a folder", opts.OutPath)
	}
	if !fi.Mode().IsRegular() || fi.Size() == 0 || opts.Overwrite {
		return nil
	}
	reason := fmt.Sprintf("it already holds %s and this run keeps no state that wrote it", size(fi.Size()))
	if opts.State != "" {
		reason = fmt.Sprintf("it already holds %s and state %s is new: it is not that state's output", size(fi.Size()), opts.State)
	}
	return &OutConflictError{Out: opts.OutPath, State: opts.State, Reason: reason}
}

// openOut opens the results file once the state is open and locked: it
// checks the file against the state's record, repairs a partial last line,
// and records the file in the state.
func (rt *Runtime) openOut(ctx context.Context, fresh bool) error {
	opts := rt.opts
	f := &rt.files
	if opts.State != "" {
		// Recorded in the state file, through the ledger's connection.
		f.db = rt.ledger.db
		if _, err := f.db.ExecContext(ctx, outSchema); err != nil {
			return fmt.Errorf("results file record in %s: %w", opts.State, err)
		}
	}
	rec, err := f.read(ctx)
	if err != nil {
		return err
	}
	if opts.OutPath == "" {
		if rec.Path != "" {
			return &OutConflictError{State: opts.State, Recorded: rec.Path,
				Reason: fmt.Sprintf("state %s writes its results to %s (%d so far)", opts.State, rec.Path, rec.Results)}
		}
		return nil
	}
	abs, err := filepath.Abs(opts.OutPath)
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	info := OutInfo{Path: abs}
	fi, err := os.Stat(abs)
	// A file the lock created (empty) was not there before.
	exists := err == nil && (f.outLock == nil || f.outLock.created == "")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("results file: %w", err)
	}
	regular := exists && fi.Mode().IsRegular()
	// The same file: its device and inode, and (since a file deleted and
	// written anew may get the inode back) its first bytes.
	same := regular && rec.Path != "" && sameFile(fi, rec)
	conflict := func(reason string) error {
		return &OutConflictError{Out: opts.OutPath, State: opts.State, Recorded: rec.Path, Reason: reason}
	}
	mode := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	switch {
	case same && fi.Size() >= rec.Size && sameHead(abs, rec):
		// The job's own file: it resumes. --overwrite, given again with
		// the same command line, must not empty what the job wrote.
		info.Appended, info.Earlier = true, rec.Results
		info.OverwriteIgnored = opts.Overwrite
	case opts.Overwrite:
		mode |= os.O_TRUNC
		info.Overwritten = regular && fi.Size() > 0
		rec.Results = 0
	case rec.Path == "":
		// A new state (checked by prepareState), or one that predates the
		// record or wrote to standard output: appending destroys nothing.
		info.Unrecorded = !fresh && regular && fi.Size() > 0
		info.Appended = info.Unrecorded
	case same && fi.Size() < rec.Size:
		return conflict(fmt.Sprintf("state %s wrote %d results (%s) to it, but it holds only %s now: it was truncated or rewritten since",
			opts.State, rec.Results, size(rec.Size), size(fi.Size())))
	case same:
		return conflict(fmt.Sprintf("state %s wrote %d results to it, but it starts with other bytes now: it was replaced or rewritten since", opts.State, rec.Results))
	case !exists && rec.Path == abs:
		return conflict(fmt.Sprintf("state %s wrote %d results to it, and it is gone", opts.State, rec.Results))
	case rec.Path == abs:
		return conflict(fmt.Sprintf("state %s wrote %d results to a file of this name, and this is another file: it was replaced or rewritten since", opts.State, rec.Results))
	default:
		return conflict(fmt.Sprintf("state %s writes its results to %s (%d so far), not to this file", opts.State, rec.Path, rec.Results))
	}
	if regular || !exists {
		mode = mode&^os.O_WRONLY | os.O_RDWR // endLines reads the last line
	} else {
		mode &^= os.O_TRUNC // a device or a pipe
	}
	out, err := os.OpenFile(abs, mode, 0o644)
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	if info.Appended {
		limit := int64(-1) // no record: keep every byte
		if !info.Unrecorded {
			limit = rec.Size
		}
		if info.Cut, info.Terminated, err = endLines(out, limit); err != nil {
			out.Close()
			return fmt.Errorf("results file %s: %w", abs, err)
		}
		if limit >= 0 {
			f.tailFrom = limit
			if f.tail, err = idsFrom(out, limit); err != nil {
				out.Close()
				return fmt.Errorf("results file %s: %w", abs, err)
			}
		}
	}
	f.out, f.outInfo = out, info
	fi, err = out.Stat()
	if err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil // a device or a pipe: nothing to record
	}
	f.rec = outRecord{Path: abs, Results: rec.Results}
	f.rec.Dev, f.rec.Ino = fileID(fi)
	f.measure()
	return f.write(ctx)
}

// endLines makes the file end with a whole line. A partial last line past
// known (the bytes the state knew written) is removed: it was never synced
// whole, so never committed. One within them, or with known < 0, is ended
// with a newline instead, keeping its bytes.
func endLines(f *os.File, known int64) (cut int64, terminated int, err error) {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return 0, 0, err
	}
	return endLinesOf(f, f, fi.Size(), known)
}

func endLinesOf(w *os.File, r io.ReaderAt, end, known int64) (cut int64, terminated int, err error) {
	b := make([]byte, 1)
	if _, err := r.ReadAt(b, end-1); err != nil {
		return 0, 0, err
	}
	if b[0] == '\n' {
		return 0, 0, nil
	}
	// Find the last newline, reading backwards in blocks.
	lineStart := int64(0)
	buf := make([]byte, 64<<10)
	for pos := end; pos > 0 && lineStart == 0; {
		n := min(int64(len(buf)), pos)
		pos -= n
		if _, err := r.ReadAt(buf[:n], pos); err != nil && err != io.EOF {
			return 0, 0, err
		}
		for i := n - 1; i >= 0; i-- {
			if buf[i] == '\n' {
				lineStart = pos + i + 1
				break
			}
		}
	}
	if known >= 0 && lineStart >= known {
		if err := w.Truncate(lineStart); err != nil {
			return 0, 0, err
		}
		return end - lineStart, 0, w.Sync()
	}
	if _, err := w.Write([]byte{'\n'}); err != nil {
		return 0, 0, err
	}
	return 0, 1, w.Sync()
}

// idsFrom returns the keys (writtenKey) of the whole result lines of f from offset on:
// results an earlier run wrote and synced after its record was last
// written, which it may not have committed (killed, or its state could not
// be written). Those it did not are published again: the runtime then does
// not write them twice.
func idsFrom(f *os.File, offset int64) (map[string]bool, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() <= offset {
		return nil, err
	}
	ids := map[string]bool{}
	sc := bufio.NewScanner(io.NewSectionReader(f, offset, fi.Size()-offset))
	sc.Buffer(make([]byte, 64<<10), 1<<30)
	for sc.Scan() {
		var line struct {
			ID  string `json:"id"`
			Seq int    `json:"seq"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.ID != "" {
			ids[writtenKey(result.Result{ID: line.ID, Seq: line.Seq})] = true
		}
	}
	return ids, sc.Err()
}

// read returns the state's record ({} when it has none).
func (f *stateFiles) read(ctx context.Context) (outRecord, error) {
	var rec outRecord
	if f.db == nil {
		return rec, nil
	}
	err := f.db.QueryRowContext(ctx, "SELECT path, dev, ino, size, results, head, headlen FROM out_file WHERE id = 1").
		Scan(&rec.Path, &rec.Dev, &rec.Ino, &rec.Size, &rec.Results, &rec.Head, &rec.HeadLen)
	if errors.Is(err, sql.ErrNoRows) {
		return outRecord{}, nil
	}
	if err != nil {
		return outRecord{}, fmt.Errorf("read the results file record: %w", err)
	}
	return rec, nil
}

// write stores the record; the caller holds f.mu or is alone.
func (f *stateFiles) write(ctx context.Context) error {
	if f.db == nil || f.rec.Path == "" {
		return nil
	}
	if f.rec.Head == nil {
		f.rec.Head = []byte{}
	}
	_, err := f.db.ExecContext(ctx, `INSERT INTO out_file (id, path, dev, ino, size, results, head, headlen, updated) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET path = excluded.path, dev = excluded.dev, ino = excluded.ino,
		size = excluded.size, results = excluded.results, head = excluded.head, headlen = excluded.headlen, updated = excluded.updated`,
		f.rec.Path, int64(f.rec.Dev), int64(f.rec.Ino), f.rec.Size, f.rec.Results, f.rec.Head, f.rec.HeadLen, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("record the results file in the state: %w", err)
	}
	f.recorded = time.Now()
	return nil
}

// wrote notes n results written and synced to the results file; the
// record follows at most every recordEvery (and at close).
func (f *stateFiles) wrote(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rec.Path == "" {
		return
	}
	f.rec.Results += int64(n)
	if time.Since(f.recorded) < recordEvery {
		return
	}
	f.update()
}

// update rewrites the record with the file's size now; the caller holds f.mu.
func (f *stateFiles) update() {
	f.measure()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = f.write(ctx) // a stale record is a safe one
}

// close writes the record a last time and closes the results file (the
// runtime drops the lock once the state is closed too).
func (f *stateFiles) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	if f.out != nil {
		if f.rec.Path != "" {
			f.update()
		}
		errs = append(errs, f.out.Close())
		f.out = nil
	}
	f.db = nil
	return errors.Join(errs...)
}

// measure takes the file's size, and its head's checksum while the head
// is shorter than headBytes. On an error the record keeps its older values:
// a smaller size is still a lower bound.
func (f *stateFiles) measure() {
	fi, err := f.out.Stat()
	if err != nil {
		return
	}
	size := fi.Size()
	if f.synced != nil {
		size = min(size, f.synced())
	}
	if n := min(size, headBytes); n > f.rec.HeadLen || f.rec.Head == nil {
		if sum, err := headSum(f.out, n); err == nil {
			f.rec.Head, f.rec.HeadLen = sum, n
		}
	}
	f.rec.Size = fi.Size()
	if f.synced != nil {
		// Never the file's size: a write cut by a full disk leaves a
		// partial line the next run must remove, not keep as ours. Nor
		// past a result whose URL the state has not committed: the next
		// run must find it past the offset (settle.go).
		f.rec.Size = f.synced()
		if f.unsettled != nil {
			f.rec.Size = f.unsettled.limit(f.rec.Size)
		}
	}
}

// headSum is the SHA-256 of r's first n bytes.
func headSum(r io.ReaderAt, n int64) ([]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, n)); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// sameHead tells whether the file at path starts as the record says.
func sameHead(path string, rec outRecord) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sum, err := headSum(f, rec.HeadLen)
	return err == nil && bytes.Equal(sum, rec.Head)
}

func sameFile(fi os.FileInfo, rec outRecord) bool {
	dev, ino := fileID(fi)
	return ino != 0 && dev == rec.Dev && ino == rec.Ino
}

// fileID is the device and inode of a file (zero where the system has none).
func fileID(fi os.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}

// size renders a byte count for a message.
func size(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// CreateOut opens a results file for a run with no state to resume (the
// emulated stack's): as for a new state, a non-empty file is refused
// unless overwrite empties it.
// The file is locked as long as it is open (see outLock).
func CreateOut(path string, overwrite bool) (*os.File, error) {
	lock, err := lockOut(path)
	if err != nil {
		return nil, err
	}
	if err := checkNewOut(Options{OutPath: path, Overwrite: overwrite}); err != nil {
		lock.discard()
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err == nil && lock != nil {
		// The lock goes with the descriptor that writes: taken on it
		// before the other is closed, so it is never free meanwhile.
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		_ = lock.release()
	}
	if err == nil && overwrite {
		err = f.Truncate(0)
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		return nil, fmt.Errorf("results file: %w", err)
	}
	return f, nil
}
