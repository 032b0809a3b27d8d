package warc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultMaxFileBytes is where a file rolls over to the next of its
// sequence: 1 GB, Heritrix's and Common Crawl's size, large enough that a
// crawl makes few files and small enough to move one around.
const DefaultMaxFileBytes int64 = 1_000_000_000

// Suffix ends every file name: one gzip member per record.
const Suffix = ".warc.gz"

// Options configure a Writer.
type Options struct {
	// Path names the sequence: "crawl/out.warc.gz" writes
	// crawl/out-00000.warc.gz, crawl/out-00001.warc.gz, ... (wget's
	// names for --warc-file with --warc-max-size). It must end in
	// ".warc.gz".
	Path string
	// MaxFileBytes is the size past which the next exchange starts a new
	// file (default DefaultMaxFileBytes). An exchange is never split: a
	// file holds at least one, however large.
	MaxFileBytes int64
	// Info are the warcinfo fields that open every file, in order
	// (software, the parameters that shape the crawl); "format" and
	// "conformsTo" are added.
	Info [][2]string
	// Now stamps warcinfo records (default time.Now); exchanges carry
	// their own date.
	Now func() time.Time
	// NewID makes WARC-Record-IDs (default: random UUID URNs); tests set
	// it.
	NewID func() string
}

// Writer appends records to a sequence of WARC files. Exchanges are
// compressed by their callers' goroutines at once; only the append to
// the file is serialised. It is safe for concurrent use.
type Writer struct {
	opts       Options
	dir, stem  string
	mu         sync.Mutex
	seq        int      // the current file's number
	file       *os.File // nil until the first exchange, and after a roll
	name       string
	size       int64
	infoSize   int64 // the current file's warcinfo record
	unsynced   bool
	err        error // sticky: the file may end in a partial member
	closed     bool
	filesWrote []string
}

// Create prepares a writer for opts.Path. Its first file is numbered one
// past the highest of the sequence already in the folder, so a job that
// resumes after a crash appends to a new file and never after a partial
// record the crash may have left. No file is created before the first
// exchange.
func Create(opts Options) (*Writer, error) {
	if !strings.HasSuffix(opts.Path, Suffix) || len(filepath.Base(opts.Path)) == len(Suffix) {
		return nil, fmt.Errorf("warc file %q: the name must end in %s", opts.Path, Suffix)
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = newRecordID
	}
	w := &Writer{opts: opts, dir: filepath.Dir(opts.Path), stem: strings.TrimSuffix(filepath.Base(opts.Path), Suffix)}
	next, err := nextSeq(w.dir, w.stem)
	if err != nil {
		return nil, err
	}
	w.seq = next
	return w, nil
}

// nextSeq is one past the highest number of stem's files in dir (0 if none).
func nextSeq(dir, stem string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("warc folder %s: %w", dir, err)
	}
	pat := regexp.MustCompile("^" + regexp.QuoteMeta(stem) + `-(\d{5,})` + regexp.QuoteMeta(Suffix) + "$")
	next := 0
	for _, e := range entries {
		if m := pat.FindStringSubmatch(e.Name()); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n+1 > next {
				next = n + 1
			}
		}
	}
	return next, nil
}

// fileName is the path of file seq as a reference names it: in the
// folder Options.Path named.
func (w *Writer) fileName(seq int) string {
	return filepath.Join(w.dir, fmt.Sprintf("%s-%05d%s", w.stem, seq, Suffix))
}

// Exchange writes ex's request record and its response (or revisit)
// record, together in one file, and returns where the response record is.
// When it returns, both records are whole in the file (written, not yet
// synced: see Sync). The context is not consulted: the records are
// compressed already when the file is written, and a write is not
// interrupted.
func (w *Writer) Exchange(_ context.Context, ex *Exchange) (Ref, error) {
	enc, err := Encode(ex, w.opts.NewID)
	if err != nil {
		return Ref{}, err
	}
	defer enc.Close()
	offs, err := w.append(&enc.members[0], &enc.members[1])
	if err != nil {
		return Ref{}, fmt.Errorf("warc records of %s: %w", ex.URL, err)
	}
	return Ref{File: w.name, Offset: offs[1], Length: enc.members[1].Len()}, nil
}

// append writes members one after another into the current file (rolling
// over first when they would take it past MaxFileBytes) and returns their
// offsets. On a failed write the file is cut back to where it was, so it
// never holds a partial member; if even that fails, the writer refuses
// every later append.
func (w *Writer) append(members ...*spool) ([]int64, error) {
	var total int64
	for _, m := range members {
		total += m.Len()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, errors.New("writer closed")
	}
	if w.err != nil {
		return nil, w.err
	}
	if w.file != nil && w.size > w.infoSize && w.size+total > w.opts.MaxFileBytes {
		if err := w.closeFile(); err != nil {
			w.err = err
			return nil, err
		}
	}
	if w.file == nil {
		if err := w.openFile(); err != nil {
			return nil, err
		}
	}
	start := w.size
	offs := make([]int64, 0, len(members))
	at := start
	if joined, ok := inMemory(members); ok {
		// Small records (most pages): the exchange in one write.
		for _, m := range members {
			offs = append(offs, at)
			at += m.Len()
		}
		if _, err := w.file.Write(joined); err != nil {
			if terr := w.cutBack(start); terr != nil {
				w.err = fmt.Errorf("%s may end in a partial record: %w (after %w)", w.name, terr, err)
			}
			return nil, fmt.Errorf("write %s: %w", w.name, err)
		}
		members = nil
	}
	for _, m := range members {
		offs = append(offs, at)
		if err := w.copyMember(m); err != nil {
			if terr := w.cutBack(start); terr != nil {
				w.err = fmt.Errorf("%s may end in a partial record: %w (after %w)", w.name, terr, err)
			}
			return nil, fmt.Errorf("write %s: %w", w.name, err)
		}
		at += m.Len()
	}
	w.size = at
	w.unsynced = true
	return offs, nil
}

func (w *Writer) copyMember(m *spool) error {
	r, err := m.reader()
	if err != nil {
		return err
	}
	// A member in memory is one write (bytes.Reader's WriteTo); one in a
	// temporary file is copied by the kernel where it can.
	_, err = io.Copy(w.file, r)
	return err
}

// inMemory joins members that are all in memory into one slice.
func inMemory(members []*spool) ([]byte, bool) {
	var n int
	for _, m := range members {
		if m.file != nil {
			return nil, false
		}
		n += m.mem.Len()
	}
	joined := make([]byte, 0, n)
	for _, m := range members {
		joined = append(joined, m.mem.Bytes()...)
	}
	return joined, true
}

// cutBack truncates the current file to size after a failed write.
func (w *Writer) cutBack(size int64) error {
	if err := w.file.Truncate(size); err != nil {
		return err
	}
	_, err := w.file.Seek(size, io.SeekStart)
	return err
}

// openFile creates the next file of the sequence (never one that exists)
// and writes its warcinfo record.
func (w *Writer) openFile() error {
	name := w.fileName(w.seq)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("create warc file: %w", err)
	}
	var info spool
	defer info.Close()
	rec := warcinfoRecord(filepath.Base(name), w.opts.Now(), w.opts.Info, w.opts.NewID)
	if err := rec.member(&info); err != nil {
		f.Close()
		return err
	}
	w.file, w.name, w.size = f, name, 0
	if err := w.copyMember(&info); err != nil {
		f.Close()
		os.Remove(name)
		w.file = nil
		return fmt.Errorf("write %s: %w", name, err)
	}
	w.size, w.infoSize = info.Len(), info.Len()
	w.unsynced = true
	w.filesWrote = append(w.filesWrote, name)
	return nil
}

// closeFile syncs and closes the current file; the next append opens
// the next one.
func (w *Writer) closeFile() error {
	f := w.file
	w.file = nil
	w.seq++
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	w.unsynced = false
	if err != nil {
		return fmt.Errorf("close %s: %w", w.name, err)
	}
	return nil
}

// Sync makes every record written so far durable (fsync of the current
// file; a file rolled over was synced when it was closed). Call it before
// publishing results that point at records, as the results file is
// synced before the store forgets their URLs.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.file == nil || !w.unsynced {
		return nil
	}
	if err := w.file.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", w.name, err)
	}
	w.unsynced = false
	return nil
}

// Files lists the files this writer created, in order.
func (w *Writer) Files() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.filesWrote...)
}

// Close syncs and closes the current file. Later exchanges fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.file == nil {
		return nil
	}
	return w.closeFile()
}
