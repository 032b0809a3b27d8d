package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to read the state's lease rows

	"github.com/urldownloader/urldownloader/internal/demosite"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// asMain makes the test binary the runner when the tests start it as a
// subprocess (runner below): a real process, which SIGKILL ends for real.
const asMain = "LOCALRUN_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(run())
	}
	code := m.Run()
	removeBinary()
	os.Exit(code)
}

// runner starts the runner as a subprocess with args; its stderr goes to
// the returned buffer (read it after Wait).
func runner(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &stderr
}

// waitFor polls cond every 20ms until it holds, failing the test after
// limit, which only bounds a hang: it is generous, not a speed target.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: still waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitCode waits for cmd (bounded: a hang fails the test) and returns its
// exit code.
func exitCode(t *testing.T, cmd *exec.Cmd, limit time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the runner did not exit within %s", limit)
	}
	return cmd.ProcessState.ExitCode()
}

// TestKillAndRestart kills a local run with SIGKILL in the middle of its
// job and starts the same command again: the second process takes the
// dead one's shard leases over at once (its first request comes before
// those leases would have expired, read from the state before the
// restart), a third runner on the state meanwhile is refused naming the
// second's pid, the job finishes with a result for every URL in one
// results file of whole lines, the delay held on every host across the
// kill, and the lock goes with the process: a run after it is not refused.
func TestKillAndRestart(t *testing.T) {
	t.Parallel()
	const delay = 250 * time.Millisecond
	site, err := demosite.Start(demosite.Options{Hosts: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	urls := site.URLs(30)
	dir := t.TempDir()
	in, state, out := filepath.Join(dir, "urls.txt"), filepath.Join(dir, "s.db"), filepath.Join(dir, "results.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--urls", in, "--state", state, "--out", out, "--allow-private", "--param", "FetchDelay=" + delay.String()}

	first, _ := runner(t, args...)
	waitFor(t, 2*time.Minute, "the first run's requests", func() bool { return len(site.Requests()) >= 6 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	killed := time.Now()
	expire := leaseExpiry(t, state)
	if expire.IsZero() {
		t.Fatal("the killed run left no live shard lease in the state: nothing to take over")
	}
	t.Logf("killed after %d requests; its leases would expire %s after the kill", len(site.Requests()), expire.Sub(killed).Round(time.Millisecond))

	second, stderr := runner(t, args...)
	var firstReq time.Time
	waitFor(t, 2*time.Minute, "the restarted run's first request", func() bool {
		for _, r := range site.Requests() {
			if r.Start.After(killed) {
				firstReq = r.Start
				return true
			}
		}
		return false
	})
	t.Logf("first request %s after the kill", firstReq.Sub(killed).Round(time.Millisecond))
	if !firstReq.Before(expire) {
		t.Errorf("the restarted run's first request came at %s, after the dead run's leases expired (%s): they were waited out, not taken over",
			firstReq.Format(time.StampMilli), expire.Format(time.StampMilli))
	}

	// A third runner while the second works: refused at once.
	third, thirdErr := runner(t, args...)
	if code := exitCode(t, third, 2*time.Minute); code != 2 || !strings.Contains(thirdErr.String(), "pid "+strconv.Itoa(second.Process.Pid)) {
		t.Errorf("a second runner on a state in use: exit %d, stderr %q; want exit 2 naming pid %d", code, thirdErr, second.Process.Pid)
	}

	if code := exitCode(t, second, 3*time.Minute); code != 0 {
		t.Fatalf("restarted run: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "took over its") {
		t.Errorf("the restarted run does not say it took over the dead run's leases:\n%s", stderr)
	}
	got := map[string]bool{}
	for _, r := range readResults(t, out) {
		if r.Status == result.StatusFetched {
			got[r.URL] = true
		}
	}
	for _, u := range urls {
		if !got[u] {
			t.Errorf("no fetched result for %s", u)
		}
	}
	for h, g := range demosite.Gaps(site.Requests()) {
		if g.Min < delay {
			t.Errorf("host %s: two requests %s apart across the kill, want at least %s", h, g.Min, delay)
		}
	}

	// The lock went with the process: the same command runs (nothing left).
	again, againErr := runner(t, args...)
	if code := exitCode(t, again, 2*time.Minute); code != 0 {
		t.Errorf("a run after the job ended: exit %d\n%s", code, againErr)
	}
}

// leaseExpiry is when the earliest live shard lease in the state expires
// (zero when there is none).
func leaseExpiry(t *testing.T, state string) time.Time {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+state+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var until sql.NullInt64
	if err := db.QueryRowContext(context.Background(), "SELECT min(until) FROM leases WHERE until > ?", time.Now().UnixMilli()).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if !until.Valid {
		return time.Time{}
	}
	return time.UnixMilli(until.Int64)
}

// readResults reads a results file of whole JSON lines.
func readResults(t *testing.T, path string) []result.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s ends in a partial line", path)
	}
	var out []result.Result
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		var r result.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s line %d: %v", path, n, err)
		}
		out = append(out, r)
	}
	return out
}
