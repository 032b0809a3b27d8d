// Package rie runs a Lambda function's bootstrap under aws-lambda-rie, the
// runtime interface emulator that `sam local invoke` runs inside its
// containers, as a child process without Docker, and invokes it through
// the real Lambda invoke protocol.
//
// The emulator comes from the project's .bin (`make tools`); AWS_LAMBDA_RIE
// overrides the path. Tests that need it must fail, never skip, when it is
// missing. NOTES.md records how the pinned emulator behaves; in short:
//
//   - it runs one invocation at a time and crashes (nil pointer panic) when
//     a second request arrives during one, so Invoke serialises them;
//   - a function error is HTTP 200 with {"errorMessage","errorType"} and no
//     X-Amz-Function-Error header; a timeout is HTTP 200 with the plain text
//     "Task timed out after N.00 seconds"; a crash or panic is HTTP 502.
//     Invoke turns all three into a *FunctionError;
//   - after a timeout or a crash the next invocation starts a new runtime
//     process (a cold start);
//   - the REPORT line's Init Duration and Max Memory Used are not measured,
//     so Report takes them from the emulator's log and from /proc instead.
package rie

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/urldownloader/urldownloader/internal/proc"
)

// EnvEmulator names the environment variable that gives the aws-lambda-rie
// binary's path; the Makefile sets it for tests, the local runner and the
// benchmark.
const EnvEmulator = "AWS_LAMBDA_RIE"

// InvokePath is the emulator's invoke endpoint, the same path as Lambda's
// Invoke API for a function named "function".
const InvokePath = "/2015-03-31/functions/function/invocations"

// DefaultTimeout is the function timeout when Options.Timeout is zero: the
// emulator's own default.
const DefaultTimeout = 300 * time.Second

// startTimeout bounds how long Start waits for the emulator to answer when
// ctx has no earlier deadline. It answers within milliseconds; a loaded CI
// machine can take seconds.
const startTimeout = 30 * time.Second

// reportWait bounds how long Invoke waits for the emulator's log lines about
// an invocation it has already answered (they arrive on other pipes).
const reportWait = 2 * time.Second

// Options shape one emulated function.
type Options struct {
	// Bootstrap is the path of the function's executable (see Build). It
	// runs with its own directory as working directory, as /var/task is on
	// Lambda.
	Bootstrap string
	// Env is the function's environment (e.g. stack.Function.Env merged
	// with moto.Env). The emulator passes its own environment to the
	// function, so this is also the emulator's: Start gives it only PATH,
	// TZ=:UTC, LAMBDA_TASK_ROOT and the AWS_LAMBDA_FUNCTION_* variables
	// besides, nothing from the calling process, so a developer's AWS
	// profile or proxy settings never reach the function. Env wins over
	// all of them.
	Env map[string]string
	// Timeout is the function timeout (AWS_LAMBDA_FUNCTION_TIMEOUT); the
	// emulator takes whole seconds only, so it is rounded up. Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// MemorySize in MB is reported to the function and in REPORT lines
	// (AWS_LAMBDA_FUNCTION_MEMORY_SIZE); the emulator enforces no limit.
	// Zero leaves the emulator's default, 3008.
	MemorySize int
	// FunctionName is AWS_LAMBDA_FUNCTION_NAME, part of the invoked ARN the
	// function sees. Empty: the bootstrap's directory name.
	FunctionName string
	// EphemeralStorageMB is the size of the function's /tmp (the
	// template's EphemeralStorage): a tmpfs of that size, mounted in a
	// mount namespace of the emulator's own, with TMPDIR pointing at it
	// (/tmp itself stays, as the bootstrap may live there), so a write
	// beyond it fails with ENOSPC as on Lambda. Zero means Lambda's default,
	// 512; -1 leaves the host's disk.
	EphemeralStorageMB int
	// Hosts, when set, are names the function resolves to the addresses
	// given, as the stack's resolver table does for in-process functions:
	// a hosts file listing them (and localhost) is bind-mounted over
	// /etc/hosts in the emulator's mount namespace, so the function's own
	// resolver answers them (fetch.DNSCache hands names in /etc/hosts to
	// the system resolver) without a DNS query, and the machine's
	// /etc/hosts is untouched. Needs that namespace: EphemeralStorageMB
	// must not be -1.
	Hosts map[string][]netip.Addr
	// Output, when set, receives every line the emulator and the function
	// print (the function's stdout and stderr both arrive on the
	// emulator's stdout). It must be safe to call from one goroutine at a
	// time; Start serialises the writes.
	Output io.Writer
}

// Emulator is a running aws-lambda-rie with one function.
type Emulator struct {
	// Endpoint is the emulator's base URL, http://127.0.0.1:PORT.
	Endpoint string

	opts    Options
	timeout time.Duration
	cmd     *exec.Cmd
	done    chan struct{} // closed when the emulator process has exited
	readers sync.WaitGroup
	client  *http.Client
	sem     chan struct{} // one invocation at a time
	closed  sync.Once

	outMu sync.Mutex
	out   *proc.Tail

	mu      sync.Mutex
	reports []*Report
	byID    map[string]*Report
	log     logState
	tmp     string // the tmpfs mount point that is the function's /tmp
	// hostsDir holds the hosts file of Options.Hosts.
	hostsDir string
}

// DefaultEphemeralStorageMB is Lambda's default /tmp, in MB
// (https://docs.aws.amazon.com/lambda/latest/dg/configuration-ephemeral-storage.html).
const DefaultEphemeralStorageMB = 512

// withTmpfs runs argv in a mount namespace of its own where a tmpfs of mb
// megabytes is mounted at dir: unshare(1) then sh mount and exec argv, so
// the emulator keeps the process id Start gave it. Unprivileged, a user
// namespace maps the caller to root in it.
//
// With hosts (a file's path), that file is bind-mounted over /etc/hosts
// in the namespace too (Options.Hosts).
func withTmpfs(argv []string, dir string, mb int, hosts string) []string {
	un := []string{"unshare", "--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		un = []string{"unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"}
	}
	script := `mount -t tmpfs -o size=` + strconv.Itoa(mb) + `m,mode=1777 tmpfs "$0" && exec "$@"`
	if hosts != "" {
		script = `mount --bind ` + shellQuote(hosts) + ` /etc/hosts && ` + script
	}
	return append(append(un, "sh", "-c", script, dir), argv...)
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writeHosts writes a hosts file listing hosts (and localhost) into dir.
func writeHosts(dir string, hosts map[string][]netip.Addr) (string, error) {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n::1 localhost\n")
	for _, name := range slices.Sorted(maps.Keys(hosts)) {
		for _, a := range hosts[name] {
			fmt.Fprintf(&b, "%s %s\n", a, name)
		}
	}
	path := filepath.Join(dir, "hosts")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("rie: hosts file: %w", err)
	}
	return path, nil
}

// Start starts the emulator for opts.Bootstrap on free loopback ports and
// waits until it answers. The function's process starts on the first
// Invoke, as on Lambda. The caller must Close the Emulator; on Linux the
// emulator also stops when the calling process dies.
func Start(ctx context.Context, opts Options) (*Emulator, error) {
	bin, err := FindEmulator()
	if err != nil {
		return nil, err
	}
	if opts.Bootstrap == "" {
		return nil, errors.New("rie: Options.Bootstrap is empty")
	}
	boot, err := filepath.Abs(opts.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("rie: bootstrap %s: %w", opts.Bootstrap, err)
	}
	// The emulator starts the bootstrap only at the first invocation and
	// then answers 502; a clear error here is kinder.
	if st, err := os.Stat(boot); err != nil {
		return nil, fmt.Errorf("rie: bootstrap: %w (build it with rie.Build)", err)
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("rie: bootstrap %s is not an executable file", boot)
	}
	opts.Bootstrap = boot
	if len(opts.Hosts) > 0 && opts.EphemeralStorageMB < 0 {
		return nil, errors.New("rie: Options.Hosts needs the emulator's mount namespace (EphemeralStorageMB -1 has none)")
	}
	if opts.Timeout < 0 || opts.MemorySize < 0 {
		return nil, fmt.Errorf("rie: negative Timeout %v or MemorySize %d", opts.Timeout, opts.MemorySize)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	// A port that was free when we looked may be taken before the emulator
	// binds it; it then exits at once and we try other ports.
	var errs []error
	for attempt := 0; attempt < 3; attempt++ {
		e, err := start(ctx, bin, opts)
		if err == nil {
			return e, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("start aws-lambda-rie (%s) for %s: %w", bin, opts.Bootstrap, errors.Join(errs...))
}

func start(ctx context.Context, bin string, opts Options) (*Emulator, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	invokeAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	// The runtime API port must be ours too: the emulator's default, 9001,
	// would make two emulators (parallel tests) collide, and port 0 is
	// passed to the function verbatim as AWS_LAMBDA_RUNTIME_API.
	runtimeAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	timeoutSec := int64(math.Ceil(opts.Timeout.Seconds()))
	e := &Emulator{
		Endpoint: "http://" + invokeAddr,
		opts:     opts,
		timeout:  time.Duration(timeoutSec) * time.Second,
		done:     make(chan struct{}),
		// The emulator answers when the function does or times out; the
		// margin covers its own bookkeeping after a timeout.
		client: &http.Client{Timeout: time.Duration(timeoutSec)*time.Second + 30*time.Second},
		sem:    make(chan struct{}, 1),
		out:    &proc.Tail{Max: 256 << 10},
		byID:   map[string]*Report{},
	}
	argv := []string{bin,
		// Our functions read LOG_LEVEL too, and the emulator exits on a
		// level logrus does not know; its INIT/INVOKE lines need info.
		"--log-level", "info",
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", runtimeAddr,
		opts.Bootstrap}
	env := environ(opts, timeoutSec)
	if opts.EphemeralStorageMB >= 0 {
		mb := opts.EphemeralStorageMB
		if mb == 0 {
			mb = DefaultEphemeralStorageMB
		}
		if e.tmp, err = os.MkdirTemp("", "rie-tmp-*"); err != nil {
			return nil, fmt.Errorf("rie: /tmp of the function: %w", err)
		}
		hosts := ""
		if len(opts.Hosts) > 0 {
			// Beside the tmpfs's mount point, not under it: the tmpfs
			// hides what was there.
			if e.hostsDir, err = os.MkdirTemp("", "rie-hosts-*"); err != nil {
				return nil, fmt.Errorf("rie: hosts file: %w", err)
			}
			if hosts, err = writeHosts(e.hostsDir, opts.Hosts); err != nil {
				return nil, err
			}
		}
		argv = withTmpfs(argv, e.tmp, mb, hosts)
		env = append(env, "TMPDIR="+e.tmp)
	}
	e.cmd = exec.Command(argv[0], argv[1:]...)
	e.cmd.Dir = filepath.Dir(opts.Bootstrap)
	e.cmd.Env = env

	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("rie: pipe: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdoutR.Close()
		stdoutW.Close()
		return nil, fmt.Errorf("rie: pipe: %w", err)
	}
	// Our own pipes, not io.Writers on exec.Cmd: the function process
	// inherits the emulator's stdout, and Wait would block on its copy
	// goroutines for as long as an orphaned function keeps it open.
	e.cmd.Stdout = stdoutW
	e.cmd.Stderr = stderrW
	// SIGTERM on the parent's death, not SIGKILL: the function runs in a
	// process group of its own that only the emulator knows to kill, and
	// SIGTERM makes it do so and exit even if Close is never called.
	err = proc.Start(e.cmd, e.done, syscall.SIGTERM)
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdoutR.Close()
		stderrR.Close()
		if e.tmp != "" {
			os.Remove(e.tmp)
		}
		if e.hostsDir != "" {
			os.RemoveAll(e.hostsDir)
		}
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	e.readers.Add(2)
	go e.read(stdoutR, e.stdoutLine)
	go e.read(stderrR, e.stderrLine)

	if err := e.waitReady(ctx, runtimeAddr); err != nil {
		e.Close()
		return nil, fmt.Errorf("emulator on %s: %w; its output:\n%s", invokeAddr, err, e.Output())
	}
	return e, nil
}

// environ builds the emulator's (and so the function's) environment.
func environ(opts Options, timeoutSec int64) []string {
	name := opts.FunctionName
	if name == "" {
		name = filepath.Base(filepath.Dir(opts.Bootstrap))
	}
	env := map[string]string{
		"PATH":                        os.Getenv("PATH"),
		"TZ":                          ":UTC",
		"LAMBDA_TASK_ROOT":            filepath.Dir(opts.Bootstrap),
		"AWS_LAMBDA_FUNCTION_NAME":    name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT": strconv.FormatInt(timeoutSec, 10),
	}
	if opts.MemorySize > 0 {
		env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = strconv.Itoa(opts.MemorySize)
	}
	maps.Copy(env, opts.Env)
	// The emulator parses it with ParseInt and panics on anything else.
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = strconv.FormatInt(timeoutSec, 10)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// waitReady polls both of the emulator's ports until they answer, the
// process exits or ctx ends. The invoke path is not polled: any request to
// it, even a GET, is an invocation.
func (e *Emulator) waitReady(ctx context.Context, runtimeAddr string) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	answers := func(url string) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	}
	for {
		if answers(e.Endpoint+"/") && answers("http://"+runtimeAddr+"/") {
			return nil
		}
		select {
		case <-e.done:
			return errors.New("aws-lambda-rie exited before it answered")
		case <-ctx.Done():
			return fmt.Errorf("aws-lambda-rie did not answer: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// FunctionError is a failed invocation: the function returned an error,
// panicked, exited or timed out. Payload is the emulator's answer.
type FunctionError struct {
	// Type is the errorType the function reported ("errorString",
	// "Runtime.ExitError", ...) or "Sandbox.Timedout" for a timeout.
	Type    string
	Message string
	// StatusCode is the emulator's HTTP status: 200 for a returned error
	// or a timeout, 502 for a crash.
	StatusCode int
	Payload    []byte
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("function error %s: %s", e.Type, e.Message)
}

// TimedOut reports whether the invocation hit the function timeout.
func (e *FunctionError) TimedOut() bool { return e.Type == "Sandbox.Timedout" }

// Invoke invokes the function with payload (an event JSON) and returns its
// response payload. A failed invocation returns the payload and a
// *FunctionError (use errors.As); any other error means the emulator could
// not be reached or answered something unexpected.
//
// Invocations are serialised: a concurrent call waits for the running one
// (the emulator crashes on overlapping invocations). When ctx ends during
// an invocation, Invoke returns at once but the next one still waits until
// the emulator has finished the abandoned invocation.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("invoke: waiting for the previous invocation: %w", ctx.Err())
	case <-e.done:
		return nil, e.exitedError()
	}
	type answer struct {
		body []byte
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() { <-e.sem }()
		body, err := e.invoke(context.WithoutCancel(ctx), payload)
		ch <- answer{body, err}
	}()
	select {
	case a := <-ch:
		return a.body, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("invoke: %w (the emulator finishes the invocation anyway)", ctx.Err())
	}
}

func (e *Emulator) invoke(ctx context.Context, payload []byte) ([]byte, error) {
	select {
	case <-e.done:
		return nil, e.exitedError()
	default:
	}
	id := newRequestID()
	rep := &Report{RequestID: id, MemorySize: e.opts.MemorySize}
	if rep.MemorySize == 0 {
		rep.MemorySize = 3008
	}
	e.mu.Lock()
	e.reports = append(e.reports, rep)
	e.byID[id] = rep
	e.mu.Unlock()

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Endpoint+InvokePath, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("invoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// Our id becomes the function's AwsRequestID and names the emulator's
	// START/END/REPORT lines, so they can be matched to this call.
	req.Header.Set("X-Amzn-RequestId", id)
	resp, err := e.client.Do(req)
	if err != nil {
		select {
		case <-e.done:
			return nil, e.exitedError()
		default:
		}
		return nil, fmt.Errorf("invoke %s: %w", id, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("invoke %s: read response: %w", id, err)
	}
	ferr := classify(resp.StatusCode, body)
	e.settle(rep, resp.StatusCode, ferr)
	if ferr != nil {
		return body, ferr
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("invoke %s: emulator answered %s: %s", id, resp.Status, clip(body, 500))
	}
	return body, nil
}

// classify finds a failed invocation in an emulator answer, or returns nil.
func classify(status int, body []byte) *FunctionError {
	if status == http.StatusOK && bytes.HasPrefix(body, []byte("Task timed out after ")) {
		return &FunctionError{Type: "Sandbox.Timedout", Message: string(body), StatusCode: status, Payload: body}
	}
	var fe struct {
		Type    *string `json:"errorType"`
		Message *string `json:"errorMessage"`
	}
	// A function's own answer could carry these keys too; ours never do,
	// and on Lambda the X-Amz-Function-Error header would decide.
	if err := json.Unmarshal(body, &fe); err == nil && fe.Type != nil && fe.Message != nil {
		return &FunctionError{Type: *fe.Type, Message: *fe.Message, StatusCode: status, Payload: body}
	}
	if status == http.StatusBadGateway {
		return &FunctionError{Type: "Runtime.Unknown", Message: string(clip(body, 500)), StatusCode: status, Payload: body}
	}
	return nil
}

// settle waits briefly for the emulator's log lines about an answered
// invocation and records its outcome and the runtime's peak memory.
func (e *Emulator) settle(rep *Report, status int, ferr *FunctionError) {
	// The emulator prints REPORT only when it answers 200 (success,
	// function error, timeout), and logs INVOKE START before it answers.
	// A success's RTDONE is on stderr, REPORT on stdout: either may be
	// read first.
	wantReport := status == http.StatusOK
	wantRuntime := wantReport && ferr == nil
	deadline := time.Now().Add(reportWait)
	for {
		e.mu.Lock()
		ok := rep.invokeLogged && (rep.reported || !wantReport) && (rep.rtDone || !wantRuntime)
		e.mu.Unlock()
		if ok || time.Now().After(deadline) {
			break
		}
		select {
		case <-e.done:
			deadline = time.Time{}
		case <-time.After(5 * time.Millisecond):
		}
	}
	peak := runtimePeakMB(e.cmd)
	e.mu.Lock()
	defer e.mu.Unlock()
	rep.StatusCode = status
	if ferr != nil {
		rep.Error = ferr.Type
	}
	if peak > 0 {
		rep.MaxMemoryUsed = peak
	}
}

// Reports returns one Report per invocation so far, in order. Each is
// complete when its Invoke has returned.
func (e *Emulator) Reports() []Report {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Report, len(e.reports))
	for i, r := range e.reports {
		out[i] = *r
	}
	return out
}

// Output returns the end (up to 256 KiB) of what the emulator and the
// function printed: tests show it when an invocation fails.
func (e *Emulator) Output() string { return e.out.String() }

// Close stops the emulator and the function, if it runs. It is safe to call
// more than once.
func (e *Emulator) Close() error {
	e.closed.Do(func() {
		// SIGTERM lets the emulator SIGKILL the function's process group
		// (the function runs in a group of its own) before it exits.
		children := childPIDs(e.cmd)
		signalProcess(e.cmd, terminate)
		select {
		case <-e.done:
		case <-time.After(3 * time.Second):
		}
		proc.KillGroup(e.cmd)
		for _, pid := range children {
			killPID(pid)
		}
		<-e.done
		if e.tmp != "" {
			os.Remove(e.tmp) // empty here: the tmpfs was the namespace's
		}
		if e.hostsDir != "" {
			os.RemoveAll(e.hostsDir)
		}
		// The pipes end when every holder is gone; an orphaned function
		// that survived would hold them, so do not wait for ever.
		waited := make(chan struct{})
		go func() { e.readers.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(2 * time.Second):
		}
	})
	return nil
}

func (e *Emulator) exitedError() error {
	return fmt.Errorf("aws-lambda-rie has exited (%v); its output:\n%s", e.cmd.ProcessState, e.Output())
}

// FindEmulator returns the aws-lambda-rie binary to run: $AWS_LAMBDA_RIE if
// set, else .bin/aws-lambda-rie in the module root (the directory holding
// go.mod at or above the working directory). Its errors tell to run
// `make tools`.
func FindEmulator() (string, error) {
	return proc.FindTool(EnvEmulator, ".bin/aws-lambda-rie")
}

func freePorts(n int) ([]int, error) {
	// Hold every listener until all are open, so the ports differ.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newRequestID returns a random version 4 UUID, the shape of Lambda's
// request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return append(b[:n:n], "..."...)
	}
	return b
}
