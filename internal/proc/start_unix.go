//go:build unix && !linux

package proc

import (
	"os/exec"
	"syscall"
)

// Start starts cmd in its own process group and closes done when it exits.
// The caller must not close done itself. Outside Linux there is no
// parent-death signal, so deathSignal is ignored: a child the caller never
// stops runs on until it is killed.
func Start(cmd *exec.Cmd, done chan<- struct{}, deathSignal syscall.Signal) error {
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
