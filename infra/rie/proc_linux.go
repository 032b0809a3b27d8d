//go:build linux

package rie

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

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
