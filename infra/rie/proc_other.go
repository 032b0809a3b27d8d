//go:build unix && !linux

package rie

import (
	"os/exec"
	"syscall"
)

// startProcess starts cmd in its own process group and closes done when it
// exits. Outside Linux there is no parent-death signal (and the emulator
// itself supports only Linux).
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

// childPIDs needs /proc; elsewhere Close relies on the emulator's SIGTERM
// handling to stop the function.
func childPIDs(*exec.Cmd) []int { return nil }

// runtimePeakMB needs /proc.
func runtimePeakMB(*exec.Cmd) int { return 0 }
