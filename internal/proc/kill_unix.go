//go:build unix

package proc

import (
	"os/exec"
	"syscall"
)

// KillGroup sends SIGKILL to the process group that Start made for cmd, so
// any process the child spawned in it dies too. It does nothing when cmd
// never started.
func KillGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
