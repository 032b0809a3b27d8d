package cli

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"
)

// Profiled runs f with the profiles the environment asks for, so `make
// bench` and a developer chasing CPU or memory per URL profile the process
// users run, not a copy:
//   - URLDOWNLOADER_CPUPROFILE=FILE: a CPU profile of the whole run;
//   - URLDOWNLOADER_MEMPROFILE=FILE: a heap profile taken when the
//     process's resident memory was at its peak (sampled every second),
//     and beside it FILE.txt with the runtime's memory figures then (heap,
//     goroutine stacks, the rest), which tell the Go heap from what is not,
//     and FILE.goroutines, where the goroutines were;
//   - URLDOWNLOADER_TRACE=FILE: an execution trace of the whole run (go
//     tool trace), which shows what a second of startup waits on.
func Profiled(f func() int) int {
	stopTrace, ok := recording("URLDOWNLOADER_TRACE", trace.Start, trace.Stop)
	if !ok {
		return 2
	}
	defer stopTrace()
	if path := os.Getenv("URLDOWNLOADER_MEMPROFILE"); path != "" {
		stop := peakHeapProfiles(path)
		defer stop()
	}
	stopCPU, ok := recording("URLDOWNLOADER_CPUPROFILE", pprof.StartCPUProfile, pprof.StopCPUProfile)
	if !ok {
		return 2
	}
	defer stopCPU()
	return f()
}

// recording starts a whole-run recording (a CPU profile, a trace) into
// the file the environment variable env names, if it names one; stop ends
// it and closes the file. False: it could not start (said on stderr).
func recording(env string, start func(io.Writer) error, end func()) (stop func(), ok bool) {
	path := os.Getenv(env)
	if path == "" {
		return func() {}, true
	}
	out, err := os.Create(path)
	if err == nil {
		err = start(out)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "urldownloader: %s: %v\n", env, err)
		return nil, false
	}
	return func() { end(); out.Close() }, true
}

// peakHeapProfiles writes path (and path.txt) whenever the resident
// memory reaches a new peak, until stop is called.
func peakHeapProfiles(path string) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var peak int64
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rss := residentBytes()
			if rss <= peak+peak/20 {
				continue // a new peak by 5% at least: a profile costs a stop of the world
			}
			peak = rss
			if err := writeHeapProfile(path, rss); err != nil {
				fmt.Fprintf(os.Stderr, "urldownloader: URLDOWNLOADER_MEMPROFILE: %v\n", err)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

func writeHeapProfile(path string, rss int64) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(out); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	g, err := os.Create(path + ".goroutines")
	if err != nil {
		return err
	}
	if err := pprof.Lookup("goroutine").WriteTo(g, 1); err != nil {
		g.Close()
		return err
	}
	if err := g.Close(); err != nil {
		return err
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	const mib = 1 << 20
	txt := fmt.Sprintf("rss %d MiB\nheap in use %d MiB (objects %d)\nheap idle not released %d MiB\nstacks %d MiB (goroutines %d)\nother runtime %d MiB (mspan %d, mcache %d, gc %d, buckhash %d, other %d)\nsys %d MiB\nnext gc %d MiB\n",
		rss/mib, m.HeapInuse/mib, m.HeapObjects, (m.HeapIdle-m.HeapReleased)/mib, m.StackSys/mib, runtime.NumGoroutine(),
		(m.MSpanSys+m.MCacheSys+m.GCSys+m.BuckHashSys+m.OtherSys)/mib, m.MSpanSys/mib, m.MCacheSys/mib, m.GCSys/mib, m.BuckHashSys/mib, m.OtherSys/mib,
		m.Sys/mib, m.NextGC/mib)
	return os.WriteFile(path+".txt", []byte(txt), 0o644)
}

// residentBytes is the process's resident memory (VmRSS), 0 where /proc
// does not say.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
