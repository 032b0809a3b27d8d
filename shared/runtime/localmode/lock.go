package localmode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"
)

// LockSuffix names the lock file beside a state: <state>.lock.
const LockSuffix = ".lock"

// BusyError is returned by Open when another process holds the state's
// lock: it is working that state now.
type BusyError struct {
	State string
	// Holder is what the holder wrote in the lock file ("pid 1234 since
	// ..."), empty when it could not be read.
	Holder string
}

func (e *BusyError) Error() string {
	who := "another process"
	if e.Holder != "" {
		who += " (" + e.Holder + ")"
	}
	return fmt.Sprintf("state %s is in use by %s: one runner works a state at a time", e.State, who)
}

// stateLock is an OS lock (flock) on a file beside the state, held while a
// runtime works the state. The kernel drops it when its process ends,
// however it ends, so a lock that can be taken means no process works the
// state: leases found in it are a dead holder's (see Open). The lock file
// is left in place; removing it would let a third process lock a new file
// while the second still holds the old one.
type stateLock struct {
	f *os.File
}

// lockState takes the lock of state, or fails at once with a *BusyError.
func lockState(state string) (*stateLock, error) {
	path := state + LockSuffix
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock state: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder, _ := io.ReadAll(io.LimitReader(f, 200))
			return nil, &BusyError{State: state, Holder: strings.TrimSpace(string(holder))}
		}
		return nil, fmt.Errorf("lock state %s: %w", path, err)
	}
	// Who holds it, for the message of a runner refused meanwhile.
	note := fmt.Sprintf("pid %d since %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(note), 0)
	}
	return &stateLock{f: f}, nil
}

// release drops the lock.
func (l *stateLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the only descriptor releases the flock
	l.f = nil
	return err
}
