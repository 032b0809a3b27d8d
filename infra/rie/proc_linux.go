//go:build linux

package rie

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// startProcess starts cmd in its own process group and closes done when it
// exits. The emulator gets SIGTERM when its parent dies, so it stops the
// function and exits even if Close is never called; SIGTERM rather than
// SIGKILL because the function runs in a process group of its own that only
// the emulator knows to kill.
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process, and the Go runtime may retire threads. So the fork and the wait
// run on one locked thread that lives exactly as long as the child.
func startProcess(cmd *exec.Cmd, done chan struct{}) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
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

// childPIDs lists the emulator's child processes (the function's runtime).
func childPIDs(cmd *exec.Cmd) []int {
	if cmd.Process == nil {
		return nil
	}
	var pids []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/*/children")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// runtimePeakMB sums the peak resident memory (VmHWM) of the emulator's
// children, rounded up to MB; 0 when none is running.
func runtimePeakMB(cmd *exec.Cmd) int {
	var kb int64
	for _, pid := range childPIDs(cmd) {
		f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err == nil {
					kb += n
				}
				break
			}
		}
		f.Close()
	}
	return int((kb + 1023) / 1024)
}
