package warc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// memLimit is how much of a payload or a compressed record a spool keeps
// in memory before it moves to a temporary file: most pages fit, and a
// large body does not sit in memory once for its capture and again for
// its record. It is what WARC output adds to a worker's memory, twice at
// most (the payload and its compressed record), beside the body the
// worker holds anyway.
const memLimit = 256 << 10

// spool holds bytes written once and read back from the start: in memory
// up to memLimit, then in a temporary file (removed by Close).
type spool struct {
	mem  bytes.Buffer
	file *os.File
	n    int64
	err  error // sticky: a failed write leaves the spool unusable
}

func (s *spool) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.file == nil && int64(s.mem.Len()+len(p)) > memLimit {
		f, err := os.CreateTemp("", "urldownloader-warc-*")
		if err == nil {
			_, err = f.Write(s.mem.Bytes())
		}
		if err != nil {
			if f != nil {
				f.Close()
				os.Remove(f.Name())
			}
			s.err = fmt.Errorf("spool to a temporary file: %w", err)
			return 0, s.err
		}
		s.file = f
		s.mem = bytes.Buffer{}
	}
	var n int
	var err error
	if s.file != nil {
		n, err = s.file.Write(p)
		if err != nil {
			s.err = fmt.Errorf("spool to a temporary file: %w", err)
			err = s.err
		}
	} else {
		n, err = s.mem.Write(p)
	}
	s.n += int64(n)
	return n, err
}

// Len is how many bytes were written.
func (s *spool) Len() int64 { return s.n }

// reader reads the bytes from the start.
func (s *spool) reader() (io.Reader, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.file == nil {
		return bytes.NewReader(s.mem.Bytes()), nil
	}
	return io.NewSectionReader(s.file, 0, s.n), nil
}

// Close frees the spool and removes its temporary file.
func (s *spool) Close() error {
	s.mem = bytes.Buffer{}
	if s.file == nil {
		return nil
	}
	f := s.file
	s.file = nil
	return errors.Join(f.Close(), os.Remove(f.Name()))
}

// Payload collects an HTTP message's payload as it is transferred (after
// the transfer coding, before any content coding is undone), for the
// record that will hold it. Write it, hand it to an Exchange, then Close
// it. It is not safe for concurrent use.
type Payload struct{ s spool }

// NewPayload returns an empty Payload.
func NewPayload() *Payload { return &Payload{} }

// Write appends payload bytes. A failure (the temporary file) is sticky
// and comes back from the Exchange too.
func (p *Payload) Write(b []byte) (int, error) { return p.s.Write(b) }

// Len is the payload's length so far.
func (p *Payload) Len() int64 { return p.s.Len() }

// Close frees the payload.
func (p *Payload) Close() error { return p.s.Close() }
