//go:build linux

package moto

import (
	"os/exec"
	"runtime"
	"syscall"
)

// startProcess starts cmd in its own process group and closes done when it
// exits. The child gets SIGKILL when its parent dies, so a test binary that
// never calls Close (see Shared) leaves no moto_server behind.
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process, and the Go runtime may retire threads. So the fork and the wait
// run on one locked thread that lives exactly as long as the child.
func startProcess(cmd *exec.Cmd, done chan struct{}) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
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

// killGroup kills the process group that startProcess made, so any helper
// process moto spawned dies too.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
