//go:build unix && !linux

package moto

import (
	"os/exec"
	"syscall"
)

// startProcess starts cmd in its own process group and closes done when it
// exits. Outside Linux there is no parent-death signal: a test binary that
// never calls Close leaves moto_server running until it is killed.
func startProcess(cmd *exec.Cmd, done chan struct{}) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		close(done)
		return err
	}
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	return nil
}

// killGroup kills the process group that startProcess made.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
