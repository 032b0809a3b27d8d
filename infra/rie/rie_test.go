package rie

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/proc"
)

var testFn struct {
	once sync.Once
	path string
	err  error
}

// buildTestFn builds testdata/fn once per test binary.
func buildTestFn(t *testing.T) string {
	t.Helper()
	testFn.once.Do(func() {
		root, err := proc.ModuleRoot()
		if err != nil {
			testFn.err = err
			return
		}
		dir, err := os.MkdirTemp("", "rie-test-")
		if err != nil {
			testFn.err = err
			return
		}
		testFn.path, testFn.err = buildPackage(context.Background(), root, "./infra/rie/testdata/fn", filepath.Join(dir, "fn"))
	})
	if testFn.err != nil {
		t.Fatalf("build test function: %v", testFn.err)
	}
	return testFn.path
}

// startFn starts the emulator on the test function; it fails, never skips,
// when the emulator is missing.
func startFn(t *testing.T, opts Options) *Emulator {
	t.Helper()
	opts.Bootstrap = buildTestFn(t)
	e, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		e.Close()
		if t.Failed() {
			t.Logf("emulator output:\n%s", e.Output())
		}
	})
	return e
}

type answer struct {
	Op          string            `json:"op"`
	RequestID   string            `json:"requestId"`
	FunctionARN string            `json:"functionArn"`
	DeadlineIn  float64           `json:"deadlineIn"`
	Env         map[string]string `json:"env"`
	PID         int               `json:"pid"`
}

func invoke(t *testing.T, e *Emulator, event string) (answer, error) {
	t.Helper()
	body, err := e.Invoke(t.Context(), []byte(event))
	var a answer
	if err == nil {
		if jerr := json.Unmarshal(body, &a); jerr != nil {
			t.Fatalf("invoke %s: answer %q: %v", event, body, jerr)
		}
	}
	return a, err
}

func mustInvoke(t *testing.T, e *Emulator, event string) answer {
	t.Helper()
	a, err := invoke(t, e, event)
	if err != nil {
		t.Fatalf("invoke %s: %v", event, err)
	}
	return a
}

func lastReport(t *testing.T, e *Emulator) Report {
	t.Helper()
	rs := e.Reports()
	if len(rs) == 0 {
		t.Fatal("no reports")
	}
	return rs[len(rs)-1]
}

func TestInvokeAnswersAndReports(t *testing.T) {
	t.Parallel()
	e := startFn(t, Options{
		Timeout: 2500 * time.Millisecond, MemorySize: 256, FunctionName: "probe",
		Env: map[string]string{"TABLE_NAME": "t1", "AWS_LAMBDA_FUNCTION_TIMEOUT": "99"},
	})

	a := mustInvoke(t, e, `{"op":"env"}`)
	first := lastReport(t, e)
	if a.RequestID != first.RequestID || a.RequestID == "" {
		t.Errorf("function saw request id %q, report has %q", a.RequestID, first.RequestID)
	}
	if !strings.HasSuffix(a.FunctionARN, ":function:probe") {
		t.Errorf("function ARN %q, want it to name the function probe", a.FunctionARN)
	}
	// 2.5 s rounds up to 3 s, the emulator's whole-second timeout.
	if a.DeadlineIn < 2 || a.DeadlineIn > 3 {
		t.Errorf("deadline in %.2fs, want about 3s", a.DeadlineIn)
	}
	for k, want := range map[string]string{
		"TABLE_NAME": "t1", "AWS_LAMBDA_FUNCTION_TIMEOUT": "3", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"AWS_LAMBDA_FUNCTION_NAME": "probe", "TZ": ":UTC", "LAMBDA_TASK_ROOT": filepath.Dir(buildTestFn(t)),
	} {
		if got := a.Env[k]; got != want {
			t.Errorf("function env %s=%q, want %q", k, got, want)
		}
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if got, ok := a.Env[k]; ok && got == v && v != "" && k != "PATH" && k != "TZ" {
			t.Errorf("the test process's %s leaked into the function", k)
		}
	}
	if api := a.Env["AWS_LAMBDA_RUNTIME_API"]; api == "" || strings.HasSuffix(api, ":9001") || strings.HasSuffix(api, ":0") {
		t.Errorf("AWS_LAMBDA_RUNTIME_API=%q, want a port of our own", api)
	}
	if !first.Cold || first.InitDuration <= 0 || first.Duration <= 0 || first.BilledDuration < first.Duration || first.RuntimeDuration <= 0 {
		t.Errorf("first report %+v, want cold with init, duration, billed and runtime durations", first)
	}
	if first.MemorySize != 256 || first.StatusCode != 200 || first.Error != "" {
		t.Errorf("first report %+v, want memory size 256, status 200, no error", first)
	}

	mustInvoke(t, e, `{"op":"alloc"}`)
	warm := lastReport(t, e)
	if warm.Cold || warm.InitDuration != 0 || warm.Duration <= 0 {
		t.Errorf("second report %+v, want warm, no init, a duration", warm)
	}
	if _, err := os.Stat("/proc/self/status"); err == nil && warm.MaxMemoryUsed < 64 {
		t.Errorf("max memory used %d MB after allocating 64 MiB, want at least 64", warm.MaxMemoryUsed)
	}
	if !strings.Contains(e.Output(), "fn stdout: op=env") || !strings.Contains(e.Output(), "fn stderr: op=env") {
		t.Errorf("output lacks the function's stdout and stderr lines:\n%s", e.Output())
	}
	if n := len(e.Reports()); n != 2 {
		t.Errorf("%d reports, want 2", n)
	}
}

func TestInvokeFunctionErrors(t *testing.T) {
	t.Parallel()
	e := startFn(t, Options{Timeout: time.Second})
	mustInvoke(t, e, `{"op":"ok"}`)

	tests := []struct {
		name       string
		event      string
		wantType   string
		wantStatus int
		wantMsg    string
	}{
		{"returned error", `{"op":"fail"}`, "errorString", 200, "failed on purpose"},
		{"not the event type", `[1,2]`, "UnmarshalTypeError", 200, "cannot unmarshal"},
		{"timeout", `{"op":"sleep","sleep":"5s"}`, "Sandbox.Timedout", 200, "Task timed out after 1.00 seconds"},
		{"panic", `{"op":"panic"}`, "string", 502, "panicked on purpose"},
		{"exit", `{"op":"exit"}`, "Runtime.ExitError", 502, "exit status 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := invoke(t, e, tt.event)
			var fe *FunctionError
			if !errors.As(err, &fe) {
				t.Fatalf("invoke %s: error %v, want a *FunctionError", tt.event, err)
			}
			if fe.Type != tt.wantType || fe.StatusCode != tt.wantStatus || !strings.Contains(fe.Message, tt.wantMsg) {
				t.Errorf("got %s (status %d), want type %s, status %d, message with %q", fe, fe.StatusCode, tt.wantType, tt.wantStatus, tt.wantMsg)
			}
			if fe.TimedOut() != (tt.wantType == "Sandbox.Timedout") {
				t.Errorf("TimedOut() = %v", fe.TimedOut())
			}
			if r := lastReport(t, e); r.Error != tt.wantType || r.StatusCode != tt.wantStatus {
				t.Errorf("report %+v, want error %s, status %d", r, tt.wantType, tt.wantStatus)
			}
			// The emulator recovers: a timeout or a crash costs the next
			// invocation a cold start.
			mustInvoke(t, e, `{"op":"ok"}`)
			r := lastReport(t, e)
			wantCold := tt.wantStatus == 502 || tt.wantType == "Sandbox.Timedout"
			if r.Cold != wantCold {
				t.Errorf("invocation after %s: cold=%v, want %v", tt.name, r.Cold, wantCold)
			}
		})
	}
}

func TestInvokeSerialises(t *testing.T) {
	t.Parallel()
	e := startFn(t, Options{Timeout: 10 * time.Second})
	// Overlapping requests crash the emulator itself; Invoke must queue them.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Invoke(t.Context(), []byte(`{"op":"sleep","sleep":"150ms"}`))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent invoke: %v", err)
		}
	}

	// An abandoned invocation still holds the emulator; the next waits.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := e.Invoke(ctx, []byte(`{"op":"sleep","sleep":"700ms"}`)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("invoke with a short context: %v, want deadline exceeded", err)
	}
	start := time.Now()
	mustInvoke(t, e, `{"op":"ok"}`)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("next invoke returned after %v: it did not wait for the abandoned one", waited)
	}
	if n := len(e.Reports()); n != 6 {
		t.Errorf("%d reports, want 6", n)
	}
}

func TestCloseStopsTheFunction(t *testing.T) {
	t.Parallel()
	e := startFn(t, Options{Timeout: 10 * time.Second})
	a := mustInvoke(t, e, `{"op":"ok"}`)
	if a.PID <= 0 {
		t.Fatalf("function pid %d", a.PID)
	}
	e.Close()
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(a.PID, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("function process %d still runs after Close", a.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := e.Invoke(t.Context(), []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("invoke after Close: %v, want an error saying the emulator exited", err)
	}
	e.Close() // twice is fine
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(t.Context(), Options{Bootstrap: filepath.Join(t.TempDir(), "bootstrap")}); err == nil || !strings.Contains(err.Error(), "rie.Build") {
		t.Errorf("missing bootstrap: %v, want an error pointing at rie.Build", err)
	}
	notExec := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(t.Context(), Options{Bootstrap: notExec}); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Errorf("non-executable bootstrap: %v", err)
	}
	t.Setenv(EnvEmulator, filepath.Join(t.TempDir(), "no-such-rie"))
	if _, err := Start(t.Context(), Options{Bootstrap: notExec}); err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("missing emulator: %v, want an error telling to run make tools", err)
	}
}

func TestBuildRejectsUnknownFunctions(t *testing.T) {
	for _, name := range []string{"", "../infra", "nope", "Ingest"} {
		if _, err := Build(t.Context(), t.TempDir(), name); err == nil {
			t.Errorf("Build(%q) succeeded", name)
		}
	}
}

func TestParseReportLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want ReportLine
		ok   bool
	}{
		{
			"cold",
			"REPORT RequestId: 6ad0b86c-a8e8-4e8e-adf6-7e73a87f1059\tInit Duration: 0.06 ms\tDuration: 4.22 ms\tBilled Duration: 5 ms\tMemory Size: 3008 MB\tMax Memory Used: 3008 MB\t",
			ReportLine{RequestID: "6ad0b86c-a8e8-4e8e-adf6-7e73a87f1059", InitDuration: 60 * time.Microsecond, Duration: 4220 * time.Microsecond, BilledDuration: 5 * time.Millisecond, MemorySize: 3008, MaxMemoryUsed: 3008},
			true,
		},
		{
			"warm timeout",
			"REPORT RequestId: 067b\tDuration: 3000.00 ms\tBilled Duration: 3000 ms\tMemory Size: 512 MB\tMax Memory Used: 512 MB\t",
			ReportLine{RequestID: "067b", Duration: 3 * time.Second, BilledDuration: 3 * time.Second, MemorySize: 512, MaxMemoryUsed: 512},
			true,
		},
		{"end line", "END RequestId: 067b", ReportLine{}, false},
		{"function output", `{"msg":"REPORT RequestId: x"}`, ReportLine{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseReportLine(tt.line)
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseReportLine = %+v, %v\nwant %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
