package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestModuleRootHoldsGoMod(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatalf("ModuleRoot: %v", err)
	}
	for _, name := range []string{"go.mod", "template.yaml"} {
		if _, err := os.Stat(filepath.Join(root, name)); err != nil {
			t.Errorf("ModuleRoot = %s, which holds no %s: %v", root, name, err)
		}
	}
}

func TestFindTool(t *testing.T) {
	const env = "PROC_TEST_TOOL"
	root, err := ModuleRoot()
	if err != nil {
		t.Fatalf("ModuleRoot: %v", err)
	}
	existing := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(existing, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		envValue string
		relPath  string
		want     string
		wantErr  []string
	}{
		{name: "from the environment", envValue: existing, relPath: ".bin/none", want: existing},
		{name: "in the module root", relPath: "go.mod", want: filepath.Join(root, "go.mod")},
		{name: "environment names a missing file", envValue: "/nonexistent/tool", relPath: "go.mod",
			wantErr: []string{env + "=/nonexistent/tool", "make tools"}},
		{name: "missing in the module root", relPath: ".bin/no-such-tool",
			wantErr: []string{"find no-such-tool:", filepath.Join(root, ".bin", "no-such-tool") + " is missing", "make tools", "or set " + env}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(env, tt.envValue)
			got, err := FindTool(env, tt.relPath)
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Errorf("FindTool = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("FindTool = %q, want an error", got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("FindTool error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestStartAndKillGroup(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	done := make(chan struct{})
	if err := Start(cmd, done, syscall.SIGKILL); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setpgid {
		t.Error("Start did not put the child in a process group of its own")
	}
	select {
	case <-done:
		t.Fatal("done closed before the child exited")
	case <-time.After(50 * time.Millisecond):
	}
	KillGroup(cmd)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("done not closed 5s after KillGroup")
	}
}

func TestStartFailureClosesDone(t *testing.T) {
	done := make(chan struct{})
	if err := Start(exec.Command(filepath.Join(t.TempDir(), "missing")), done, syscall.SIGKILL); err == nil {
		t.Fatal("Start of a missing binary succeeded")
	}
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Error("done not closed after a failed Start")
	}
	KillGroup(&exec.Cmd{}) // a command that never started: no panic
}
