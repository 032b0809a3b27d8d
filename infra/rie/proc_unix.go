//go:build unix

package rie

import (
	"os/exec"
	"syscall"
)

const terminate = syscall.SIGTERM

// signalProcess sends sig to the emulator process alone.
func signalProcess(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// killPID kills one process and its group (the function's runtime runs in
// a group of its own, led by it).
func killPID(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
