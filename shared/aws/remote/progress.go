package remote

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// progress is how far a list has been sent, kept in a small JSON file
// beside it so that a run stopped (Ctrl-C, a crash, a lost network) goes
// on where it stopped: the list's first Offset bytes (Lines lines, whose
// SHA-256 is Sum) are sent or refused, and of the window after them the
// messages in Window.Sent are on the queue.
type progress struct {
	// Queue is the input queue the list goes to: the same file never
	// resumes a send to another queue.
	Queue  string `json:"queue"`
	Offset int64  `json:"offset"`
	Lines  int64  `json:"lines"`
	Sum    string `json:"sha256"`
	// URLs, Messages and Rejected count what the lines before Offset
	// were: URLs sent in Messages, lines refused.
	URLs     int64 `json:"urls"`
	Messages int64 `json:"messages"`
	Rejected int64 `json:"rejected"`
	// Window is the window being sent, nil between windows.
	Window *windowProgress `json:"window,omitempty"`
	// Done: the list was sent to its end.
	Done bool `json:"done,omitempty"`
}

// windowProgress is a window partly sent: its lines end at byte End (line
// Lines, SHA-256 of the list up to there Sum), packed at MessageBytes into
// Messages messages of which those numbered in Sent are acknowledged.
// Packing is deterministic, so a resumed run rebuilds the same messages
// and sends only the others: no URL is sent twice, none is skipped.
type windowProgress struct {
	End          int64  `json:"end"`
	Lines        int64  `json:"lines"`
	Sum          string `json:"sha256"`
	MessageBytes int    `json:"messageBytes"`
	Messages     int    `json:"messages"`
	Sent         []int  `json:"sent"`
}

// loadProgress reads the progress file at path; a missing file is a list
// not started.
func loadProgress(path string) (progress, error) {
	var p progress
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read progress: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("progress file %s is not one this command wrote: %w", path, err)
	}
	if p.Offset < 0 || p.Lines < 0 || (p.Window != nil && p.Window.End < p.Offset) {
		return p, fmt.Errorf("progress file %s is damaged (offset %d, lines %d)", path, p.Offset, p.Lines)
	}
	return p, nil
}

// saveProgress replaces the progress file whole (written beside it,
// synced, renamed), so a crash leaves the old progress or the new, never
// a mix.
func saveProgress(path string, p progress) error {
	if p.Window != nil {
		slices.Sort(p.Window.Sent)
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write progress: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write progress %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the rename itself durable; not every file system can
		d.Close()
	}
	return nil
}
