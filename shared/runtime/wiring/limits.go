//go:build unix

package wiring

import (
	"bufio"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
)

// ProcessLimits reports how many descriptors this process may open (the
// soft RLIMIT_NOFILE, which the Go runtime raises to the hard limit at
// start) and how much memory it should plan on: the machine's (MemTotal)
// or the Go memory limit (GOMEMLIMIT), whichever is lower; 0 when neither
// is known.
func ProcessLimits() (fds int, memory int64) {
	var rl syscall.Rlimit
	fds = 1024
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur > 0 {
		fds = int(min(rl.Cur, uint64(math.MaxInt32)))
	}
	memory = memTotal()
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 && (memory == 0 || limit < memory) {
		memory = limit
	}
	return fds, memory
}

// memTotal is the machine's memory from /proc/meminfo; 0 elsewhere.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}
