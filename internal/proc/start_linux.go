//go:build linux

package proc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd in its own process group and closes done when it exits.
// The child gets deathSignal when the calling process dies, so a caller
// that never stops it (a test binary's shared server) leaves nothing
// behind. The caller must not close done itself.
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process, and the Go runtime may retire threads. So the fork and the wait
// run on one locked thread that lives exactly as long as the child.
func Start(cmd *exec.Cmd, done chan<- struct{}, deathSignal syscall.Signal) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSignal}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread ends with this goroutine, after
		// the child is gone.
		if err := cmd.Start(); err != nil {
			started <- err
			close(done)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(done)
	}()
	return <-started
}
