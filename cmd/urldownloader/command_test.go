package main

// The command as a user runs it: the built binary in its own process, on a
// loopback demo site: --help, the exit codes, the summary; and `make run`
// installing nothing for local mode.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/shared/domain/params"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// binary builds the command once for the package's tests.
func binary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "urldownloader-test-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "urldownloader")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// removeBinary removes what binary built (TestMain calls it at the end).
func removeBinary() {
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
}

// runCmd runs the command to its end; stderr is a pipe, not a terminal.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Dir = t.TempDir()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// TestHelpByMode: --help lists local mode's own defaults (no overall
// timeout) and every runtime parameter with its default, from the
// parameter table.
func TestHelpByMode(t *testing.T) {
	code, out, _ := runCmd(t, "--help")
	if code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	local, _, ok := strings.Cut(out, "\nDemo site")
	if !ok || !strings.Contains(local, "\nLocal mode") {
		t.Fatalf("--help has no local mode and demo site sections:\n%s", out)
	}
	for _, c := range []struct{ section, text, want string }{
		{"local", local, `--timeout DURATION\n\s+[^\n]*\(default none`},
		{"local", local, `--check-run DURATION\n\s+[^\n]*\(default 10m\)`},
	} {
		if !regexp.MustCompile(c.want).MatchString(c.text) {
			t.Errorf("%s section lacks %s:\n%s", c.section, c.want, c.text)
		}
	}
	defaults := params.Defaults().Format()
	for _, name := range params.Names() {
		re := regexp.MustCompile(`(?m)^  ` + name + ` +` + regexp.QuoteMeta(defaults[name]) + `$`)
		if !re.MatchString(out) {
			t.Errorf("--help does not list parameter %s with its default %q", name, defaults[name])
		}
	}
	for _, code := range []string{"0 ", "1 ", "2 ", "4 ", "130 "} {
		if !strings.Contains(out, "\n  "+code) {
			t.Errorf("--help does not list exit code %s", code)
		}
	}
}

// crawlDelay1 asks for a Crawl-delay of 1 s.
const crawlDelay1 = "User-agent: *\nCrawl-delay: 1\n"

// site serves pages on two loopback hosts with this robots.txt, and
// writes their URLs to a file.
func site(t *testing.T, pages int, robots string) (urls string) {
	t.Helper()
	s, err := demosite.Start(demosite.Options{Hosts: 2, Robots: robots})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	urls = filepath.Join(t.TempDir(), "urls.txt")
	if err := os.WriteFile(urls, []byte(strings.Join(s.URLs(pages), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return urls
}

func TestExitCodes(t *testing.T) {
	t.Run("all fetched: 0, the bound set by Crawl-delay", func(t *testing.T) {
		urls := site(t, 2, crawlDelay1)
		dir := t.TempDir()
		code, _, stderr := runCmd(t, "--urls", urls, "--state", filepath.Join(dir, "s.db"), "--out", filepath.Join(dir, "out.jsonl"),
			"--allow-private", "--param", "FetchDelay=100ms")
		if code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", code, stderr)
		}
		// Two URLs a host, each a Crawl-delay of 1 s after the previous
		// request (robots.txt first), not FetchDelay's 100 ms.
		for _, want := range []string{"done: 4 of 4 urls have a result", "politeness bound 2s (127.0.0.", ": 2 urls × 1s Crawl-delay)", "by status: fetched 4"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		for _, internal := range []string{"checkInvocations", "URLsPending"} {
			if strings.Contains(stderr, internal) {
				t.Errorf("stderr shows %s without -v:\n%s", internal, stderr)
			}
		}
	})
	t.Run("disallowed by robots.txt: 0, the site's word", func(t *testing.T) {
		urls := site(t, 2, "User-agent: *\nDisallow: /page/1\n")
		dir := t.TempDir()
		code, _, stderr := runCmd(t, "--urls", urls, "--state", filepath.Join(dir, "s.db"), "--out", filepath.Join(dir, "out.jsonl"),
			"--allow-private", "--param", "FetchDelay=100ms")
		if code != 0 || !strings.Contains(stderr, "2 disallowed by the site's robots.txt (not a failure)") {
			t.Errorf("exit %d, want 0 and the denials counted:\n%s", code, stderr)
		}
	})
	t.Run("denied by the address policy: 1, naming the flag", func(t *testing.T) {
		urls := site(t, 1, crawlDelay1)
		dir := t.TempDir()
		code, _, stderr := runCmd(t, "--urls", urls, "--state", filepath.Join(dir, "s.db"), "--out", filepath.Join(dir, "out.jsonl"))
		if code != 1 {
			t.Fatalf("exit %d, want 1:\n%s", code, stderr)
		}
		if !regexp.MustCompile(`2 denied by the address policy \(e\.g\. http://127\.0\.0\.[^\n]*: the flags that would allow them follow\n(.*\n)*urldownloader:   --allow-net 127\.0\.0\.0/8 or --allow-private  \(2 urls`).MatchString(stderr) {
			t.Errorf("no advice for the denied URLs:\n%s", stderr)
		}
	})
	t.Run("bad flag: 2", func(t *testing.T) {
		code, _, stderr := runCmd(t, "--no-such-flag")
		if code != 2 || !strings.Contains(stderr, "--help") {
			t.Errorf("exit %d, want 2 and a pointer to --help:\n%s", code, stderr)
		}
		if code, _, stderr = runCmd(t, "stray"); code != 2 {
			t.Errorf("a stray argument: exit %d, want 2:\n%s", code, stderr)
		}
		if code, _, stderr = runCmd(t, "--faults", "3"); code != 2 {
			t.Errorf("--faults in local mode: exit %d, want 2:\n%s", code, stderr)
		}
	})
	t.Run("damaged state: 4, what is wrong and what to do", func(t *testing.T) {
		dir := t.TempDir()
		state := filepath.Join(dir, "s.db")
		if err := os.WriteFile(state, bytes.Repeat([]byte("not sqlite "), 500), 0o644); err != nil {
			t.Fatal(err)
		}
		urls := filepath.Join(dir, "urls.txt")
		if err := os.WriteFile(urls, []byte("http://127.0.0.1:1/a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCmd(t, "--urls", urls, "--state", state, "--out", filepath.Join(dir, "out.jsonl"))
		if code != 4 {
			t.Errorf("exit %d, want 4:\n%s", code, stderr)
		}
		want := "urldownloader: " + state + " is not a urldownloader state (or is damaged)\n" +
			"urldownloader: running again will not mend it: move " + state + " away (keep it if its job matters) to start a new job, or give another --state\n"
		if stderr != want {
			t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
		}
	})
	t.Run("--backend moto: 2, naming the developer command", func(t *testing.T) {
		if code, _, stderr := runCmd(t, "--backend", "moto"); code != 2 || !strings.Contains(stderr, "make emulated") {
			t.Errorf("exit %d, want 2 and `make emulated`:\n%s", code, stderr)
		}
	})
	// SIGHUP is a closed terminal: the same clean stop as Ctrl-C, not a
	// kill with no summary.
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String()+": 130, the summary, run again to continue", func(t *testing.T) {
			stopBySignal(t, sig)
		})
	}
}

// stopBySignal starts a long run, sends it sig once it has started, and
// wants the clean stop: exit 130, the summary, the advice to continue.
func stopBySignal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	urls := site(t, 30, crawlDelay1) // 30 s at the Crawl-delay: stopped long before
	dir := t.TempDir()
	cmd := exec.Command(binary(t), "--urls", urls, "--state", filepath.Join(dir, "s.db"), "--out", filepath.Join(dir, "out.jsonl"), "--allow-private")
	cmd.Dir = dir
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	started := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "local mode, new state") {
				once.Do(func() { close(started) })
			}
		}
	}()
	select {
	case <-started:
	case <-time.After(60 * time.Second): // bounds a hang only
		_ = cmd.Process.Kill()
		t.Fatal("the run did not start within 60 s")
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	pw.Close()
	<-read
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130:\n%s", code, stderr.String())
	}
	for _, want := range []string{"run the same command again to continue", "urls have a result"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// TestMakeRunInstallsNothing: `make run` builds the command and runs it,
// with no Python environment and no emulator; `make emulated` (the
// emulated AWS stack, a developer's rig) installs moto first.
func TestMakeRunInstallsNothing(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	root, err := proc.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dry := func(args string) string {
		cmd := exec.Command("make", "-n", "--no-print-directory", "run", "ARGS="+args)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n run ARGS=%q: %v\n%s", args, err, out)
		}
		return string(out)
	}
	local := dry("--urls urls.txt --out out.jsonl")
	for _, bad := range []string{"pip", "venv", ".venv", "aws-lambda-rie", "go run"} {
		if strings.Contains(local, bad) {
			t.Errorf("make run (local mode) would run %q:\n%s", bad, local)
		}
	}
	if !strings.Contains(local, "go build -o .build/urldownloader ./cmd/urldownloader") {
		t.Errorf("make run does not build .build/urldownloader:\n%s", local)
	}
	cmd := exec.Command("make", "-n", "--no-print-directory", "emulated", "ARGS=--faults 7")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), ".venv/.installed-moto") {
		t.Errorf("make emulated does not install moto first (%v):\n%s", err, out)
	}
}
