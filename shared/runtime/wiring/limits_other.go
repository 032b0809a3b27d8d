//go:build !unix

package wiring

import (
	"math"
	"runtime/debug"
)

// ProcessLimits without RLIMIT_NOFILE or /proc/meminfo: Windows' C runtime
// default of 512 open files less margin, and the Go memory limit when one is
// set (0: unknown, MachineBudget assumes a default).
func ProcessLimits() (fds int, memory int64) {
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
		memory = limit
	}
	return 512, memory
}
