package proc

import (
	"bytes"
	"strings"
	"sync"
)

// Tail keeps the last Max bytes written to it: a child process's output,
// of which only the end matters when it fails. Safe for concurrent use.
type Tail struct {
	Max int

	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p, dropping the oldest bytes beyond Max.
func (b *Tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if extra := b.buf.Len() - b.Max; extra > 0 {
		b.buf.Next(extra)
	}
	return len(p), nil
}

// String returns a copy of what is kept.
func (b *Tail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Clone(b.buf.String())
}
