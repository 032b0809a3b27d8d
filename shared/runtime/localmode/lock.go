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

// OutBusyError is returned by Open (and CreateOut) when another process
// holds the results file's lock: it is writing that file now.
type OutBusyError struct {
	Out string
	// Holder names the process that holds it ("pid 1234"), empty when
	// the system does not say.
	Holder string
}

func (e *OutBusyError) Error() string {
	who := "another process"
	if e.Holder != "" {
		who += " (" + e.Holder + ")"
	}
	return fmt.Sprintf("results file %s is in use by %s: one job writes a results file at a time", e.Out, who)
}

// outLock is an OS lock (flock) on the results file itself, held for the
// whole run: a second job on the same file (under any of its names) is
// refused before it could empty it (--overwrite) or append to it. The
// kernel drops it when the process ends, however it ends.
type outLock struct {
	f *os.File
	// created is the file's path when taking the lock created it (empty
	// otherwise): a run that fails to open removes it again.
	created string
}

// lockOut takes the lock of the results file at path, creating the file
// (empty) when it does not exist. Nothing is locked for a file that is not
// a regular one (a device, a pipe) or whose folder is missing (the caller
// reports that).
func lockOut(path string) (*outLock, error) {
	if path == "" {
		return nil, nil
	}
	var created string
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		created = path
	} else if errors.Is(err, os.ErrExist) {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, nil // a missing folder, a permission: openOut says so
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &OutBusyError{Out: path, Holder: flockHolder(f)}
		}
		return nil, fmt.Errorf("lock results file %s: %w", path, err)
	}
	return &outLock{f: f, created: created}, nil
}

// discard releases the lock after a failed open, removing the file if
// taking the lock created it and it is still empty.
func (l *outLock) discard() {
	if l == nil || l.f == nil {
		return
	}
	if l.created != "" {
		if fi, err := l.f.Stat(); err == nil && fi.Size() == 0 {
			_ = os.Remove(l.created)
		}
	}
	_ = l.release()
}

// release drops the lock.
func (l *outLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// flockHolder names the process holding an flock on f, from /proc/locks
// (Linux: "1: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF");
// empty when it cannot be told.
func flockHolder(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	id := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(locks), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 6 && fields[1] == "FLOCK" && fields[5] == id {
			return "pid " + fields[4]
		}
	}
	return ""
}
