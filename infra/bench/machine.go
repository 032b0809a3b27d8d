package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Machine describes where the numbers were taken.
type Machine struct {
	CPU        string
	Cores      int
	MemoryGiB  float64
	Kernel     string
	Go         string
	Python     string
	Moto       string
	Colly      string
	LoadBefore string
	LoadAfter  string
	// Commit is the code measured: HEAD, with "+changes" when the work
	// tree differs from it.
	Commit string
}

func describeMachine(ctx context.Context, root string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadBefore: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kb); err == nil {
			m.MemoryGiB = kb / (1 << 20)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	py := filepath.Join(root, ".venv", "bin", "python")
	if out, err := exec.CommandContext(ctx, py, "-c", "import sys, importlib.metadata as m; print(sys.version.split()[0], m.version('moto'))").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) == 2 {
			m.Python, m.Moto = f[0], f[1]
		}
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.Commit += " +changes"
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/gocolly/colly/v2" {
				m.Colly = d.Version
			}
		}
	}
	return m
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on Linux).
const clockTicks = 100

// procCPU returns the CPU time (user+system) a process has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; fields resume after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	// Fields 14 and 15 of stat (utime, stime) are 12 and 13 after the name.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// machineCPU returns the busy and total CPU time of the whole machine.
func machineCPU() (busy, total time.Duration) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0
	}
	fields := strings.Fields(sc.Text())[1:]
	var sum, idle int64
	for i, v := range fields {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest times are already in user and nice
			break
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	return time.Duration(sum-idle) * time.Second / clockTicks, time.Duration(sum) * time.Second / clockTicks
}

// cpuSampler samples moto's and the machine's CPU use during a phase.
type cpuSampler struct {
	pid  int
	stop chan struct{}
	done sync.WaitGroup

	mu      sync.Mutex
	samples []cpuSample
}

type cpuSample struct {
	At         time.Time
	Moto       time.Duration
	Self       time.Duration
	Busy, Tick time.Duration
}

func startSampler(pid int, every time.Duration) *cpuSampler {
	s := &cpuSampler{pid: pid, stop: make(chan struct{})}
	s.take()
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				s.take()
				return
			case <-t.C:
				s.take()
			}
		}
	}()
	return s
}

func (s *cpuSampler) take() {
	c := cpuSample{At: time.Now()}
	if s.pid > 0 {
		c.Moto, _ = procCPU(s.pid)
	}
	c.Self, _ = procCPU(os.Getpid())
	c.Busy, c.Tick = machineCPU()
	s.mu.Lock()
	s.samples = append(s.samples, c)
	s.mu.Unlock()
}

func (s *cpuSampler) Stop() {
	close(s.stop)
	s.done.Wait()
}

// CPUShare is CPU use over a window, as a share of one core (moto, the
// benchmark process) and of the whole machine.
type CPUShare struct {
	Moto, Self, Machine float64
	// MotoPeak is the highest moto share over any one sample interval.
	MotoPeak float64
}

// share returns the CPU shares between from and to (samples nearest inside).
func (s *cpuSampler) share(from, to time.Time) CPUShare {
	s.mu.Lock()
	defer s.mu.Unlock()
	var a, b *cpuSample
	var peak float64
	for i := range s.samples {
		c := &s.samples[i]
		if c.At.Before(from) {
			a = c
			continue
		}
		if a == nil {
			a = c
		}
		if i > 0 && !c.At.After(to.Add(time.Second)) {
			p := s.samples[i-1]
			if dt := c.At.Sub(p.At).Seconds(); dt > 0 && !p.At.Before(from) {
				peak = max(peak, (c.Moto-p.Moto).Seconds()/dt)
			}
		}
		b = c
		if c.At.After(to) {
			break
		}
	}
	if a == nil || b == nil || !b.At.After(a.At) {
		return CPUShare{}
	}
	wall := b.At.Sub(a.At).Seconds()
	sh := CPUShare{
		Moto:     (b.Moto - a.Moto).Seconds() / wall,
		Self:     (b.Self - a.Self).Seconds() / wall,
		MotoPeak: peak,
	}
	if dt := (b.Tick - a.Tick).Seconds(); dt > 0 {
		sh.Machine = (b.Busy - a.Busy).Seconds() / dt
	}
	return sh
}
