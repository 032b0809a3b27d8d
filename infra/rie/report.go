package rie

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Report is what is known about one invocation, from the emulator's REPORT
// line, its own log and /proc. Durations are as the emulator measured them
// on this machine: they show relative costs (cold against warm, one build
// against another), not what Lambda on arm64 would bill.
type Report struct {
	// RequestID is the function's AwsRequestID (Invoke chooses it).
	RequestID string
	// Cold is true when this invocation started a runtime process: the
	// first one, and the first after a timeout or a crash.
	Cold bool
	// InitDuration is how long the runtime took from its start until it
	// asked for its first event ("INIT REPORT" in the emulator's log);
	// zero when warm. The REPORT line's own "Init Duration" is not used:
	// the emulator times a call that returns before the runtime has
	// started (about 0.05 ms), and prints none after a re-init.
	InitDuration time.Duration
	// Duration is the REPORT line's Duration: from the emulator taking the
	// request until the function answered, capped at the timeout. On a
	// cold invocation it includes InitDuration.
	Duration time.Duration
	// BilledDuration is the REPORT line's Billed Duration (Duration
	// rounded up to a millisecond).
	BilledDuration time.Duration
	// RuntimeDuration is the handler's time alone, from the event handed
	// to the runtime until its response ("INVOKE RTDONE" in the log);
	// zero when the runtime did not answer.
	RuntimeDuration time.Duration
	// MemorySize is the configured memory in MB.
	MemorySize int
	// MaxMemoryUsed is the function process's peak resident memory in MB
	// (VmHWM from /proc, Linux only), read when the invocation ended; zero
	// when unknown (not Linux, or the process was killed by a timeout).
	// Like Lambda's figure it is the peak of the execution environment so
	// far, not of this invocation alone. The REPORT line's value is not
	// used: the emulator prints MemorySize there.
	MaxMemoryUsed int
	// StatusCode is the emulator's HTTP status for the invocation.
	StatusCode int
	// Error is the FunctionError's Type when the invocation failed.
	Error string

	reported     bool // the REPORT line was seen
	invokeLogged bool // the emulator's log had INVOKE START for it
	rtDone       bool // and INVOKE RTDONE (RuntimeDuration)
}

// logState follows the emulator's log (stderr) across lines: an INIT
// belongs to the INVOKE that follows it, as invocations never overlap.
type logState struct {
	cold    bool
	init    time.Duration
	current *Report
}

var (
	reReport      = regexp.MustCompile(`^REPORT RequestId: (\S+)`)
	reReportField = regexp.MustCompile(`(Init Duration|Billed Duration|Duration|Memory Size|Max Memory Used): ([0-9.]+) (ms|MB)`)
	reInitReport  = regexp.MustCompile(`\(rapid\) INIT REPORT\(durationMs: ([0-9.]+)\)`)
	reInvokeStart = regexp.MustCompile(`\(rapid\) INVOKE START\(requestId: ([^)\s]+)\)`)
	reRTDone      = regexp.MustCompile(`\(rapid\) INVOKE RTDONE\(.*duration: ([0-9.]+)ms\)`)
)

// ReportLine is one parsed REPORT line of the emulator.
type ReportLine struct {
	RequestID      string
	InitDuration   time.Duration // as printed; see Report.InitDuration
	Duration       time.Duration
	BilledDuration time.Duration
	MemorySize     int // MB
	MaxMemoryUsed  int // MB, as printed; see Report.MaxMemoryUsed
}

// ParseReportLine parses a line such as
//
//	REPORT RequestId: 6ad0...	Init Duration: 0.06 ms	Duration: 4.22 ms	Billed Duration: 5 ms	Memory Size: 3008 MB	Max Memory Used: 3008 MB
//
// and reports whether it was one.
func ParseReportLine(line string) (ReportLine, bool) {
	m := reReport.FindStringSubmatch(line)
	if m == nil {
		return ReportLine{}, false
	}
	r := ReportLine{RequestID: m[1]}
	for _, f := range reReportField.FindAllStringSubmatch(line, -1) {
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			continue
		}
		switch f[1] {
		case "Init Duration":
			r.InitDuration = millis(v)
		case "Duration":
			r.Duration = millis(v)
		case "Billed Duration":
			r.BilledDuration = millis(v)
		case "Memory Size":
			r.MemorySize = int(v)
		case "Max Memory Used":
			r.MaxMemoryUsed = int(v)
		}
	}
	return r, true
}

func millis(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// read hands every line of r to parse and to the output copies. Lines
// longer than the scanner's buffer are passed on in pieces.
func (e *Emulator) read(r io.ReadCloser, parse func(string)) {
	defer e.readers.Done()
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			e.outMu.Lock()
			_, _ = e.out.Write([]byte(line))
			if e.opts.Output != nil {
				_, _ = io.WriteString(e.opts.Output, line)
			}
			e.outMu.Unlock()
			parse(strings.TrimRight(line, "\r\n"))
		}
		if err != nil {
			return
		}
	}
}

// stdoutLine takes REPORT lines; the rest of stdout is the function's own
// output and the emulator's START/END lines.
func (e *Emulator) stdoutLine(line string) {
	rl, ok := ParseReportLine(line)
	if !ok {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	rep := e.byID[rl.RequestID]
	if rep == nil {
		return
	}
	rep.Duration = rl.Duration
	rep.BilledDuration = rl.BilledDuration
	if rl.MemorySize > 0 {
		rep.MemorySize = rl.MemorySize
	}
	rep.reported = true
}

// stderrLine follows the emulator's own log.
func (e *Emulator) stderrLine(line string) {
	if !strings.Contains(line, "(rapid)") {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.log
	switch {
	case strings.Contains(line, "(rapid) INIT START"):
		s.cold = true
	case reInitReport.MatchString(line):
		v, _ := strconv.ParseFloat(reInitReport.FindStringSubmatch(line)[1], 64)
		s.init = millis(v)
	case reInvokeStart.MatchString(line):
		rep := e.byID[reInvokeStart.FindStringSubmatch(line)[1]]
		s.current = rep
		if rep != nil {
			rep.Cold = s.cold
			rep.InitDuration = s.init
			rep.invokeLogged = true
		}
		s.cold, s.init = false, 0
	case reRTDone.MatchString(line):
		if s.current != nil {
			v, _ := strconv.ParseFloat(reRTDone.FindStringSubmatch(line)[1], 64)
			s.current.RuntimeDuration = millis(v)
			s.current.rtDone = true
		}
	}
}
