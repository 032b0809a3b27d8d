// Package samlocal drives the SAM CLI's local commands (`sam local invoke`,
// `sam local start-api`) against the stack on moto: the built functions run
// in Docker exactly as `sam local` runs them, and talk to moto and to sites
// on the host's loopback. `make sam-local` provisions Docker and runs this
// package's tests (build tag samlocal); `make up` serves POST /urls through
// StartAPI when Docker runs.
//
// Two things SAM does not do by itself, and how they are bridged (each is
// also said where it is done):
//   - `--env-vars` only overrides variables the template declares, and the
//     template does not declare AWS_ENDPOINT_URL (it has no business on
//     AWS). LocalTemplate writes a copy of the built template that declares
//     it, empty, so the env file can point the functions at moto.
//   - `--docker-network host` is accepted but not applied by SAM CLI 1.170
//     (aws/aws-sam-cli issues #4236, #3609): the container stays on the
//     bridge, where 127.0.0.1 is itself. infra/scripts/sam-host-network.py
//     runs SAM with the host network applied, which SAM runs through.
package samlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/internal/stack"
)

// EndpointVar is the variable the functions read to talk to an emulator
// instead of AWS (shared/runtime/wiring awsenv.go).
const EndpointVar = "AWS_ENDPOINT_URL"

// EnvImage names the environment variable that gives the invoke image
// (`make sam-local` builds it from packages, see
// infra/scripts/docker-provision.sh).
const EnvImage = "SAM_LOCAL_IMAGE"

// BuiltTemplate is where `sam build` (make sam-build) leaves the template
// that points at the built functions, relative to the module root.
const BuiltTemplate = ".aws-sam/build/template.yaml"

// LocalTemplateName is the file LocalTemplate writes beside the built
// template: CodeUri paths in it are relative to its folder.
const LocalTemplateName = "template.samlocal.yaml"

// LocalTemplate reads the template at src and writes to dst a copy whose
// Globals declare EndpointVar (empty) among the functions' environment
// variables, so that `--env-vars` may set it. Nothing else changes: the
// functions, their other variables and events are the template's.
func LocalTemplate(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("local template: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("local template: parse %s: %w", src, err)
	}
	vars, err := mapPath(&doc, "Globals", "Function", "Environment", "Variables")
	if err != nil {
		return fmt.Errorf("local template: %s: %w", src, err)
	}
	if lookup(vars, EndpointVar) == nil {
		vars.Content = append(vars.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: EndpointVar},
			&yaml.Node{Kind: yaml.ScalarNode, Value: "", Style: yaml.SingleQuotedStyle})
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("local template: encode: %w", err)
	}
	if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("local template: %w", err)
	}
	return nil
}

// mapPath walks mapping keys from the document root.
func mapPath(doc *yaml.Node, keys ...string) (*yaml.Node, error) {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for i, k := range keys {
		next := lookup(n, k)
		if next == nil || next.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("no mapping %s", strings.Join(keys[:i+1], "."))
		}
		n = next
	}
	return n, nil
}

func lookup(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// EnvVars is the `--env-vars` document for a stack on moto at endpoint:
// each function's environment as the template resolves it on the stack,
// EndpointVar set to endpoint, and extra (by function logical id) over it.
// Only loopback endpoints are accepted: the functions must never be
// pointed at anything but a local emulator this way.
func EnvVars(st *stack.Stack, endpoint string, extra map[string]map[string]string) (map[string]map[string]string, error) {
	if err := checkLoopback(endpoint); err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for id, fn := range st.Functions {
		env := maps.Clone(fn.Env)
		env[EndpointVar] = endpoint
		maps.Copy(env, extra[id])
		out[id] = env
	}
	for id := range extra {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("env vars: the template has no function %s", id)
		}
	}
	return out, nil
}

func checkLoopback(endpoint string) error {
	host := strings.TrimPrefix(strings.TrimPrefix(endpoint, "http://"), "https://")
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("endpoint %q is not on a loopback address", endpoint)
	}
	return nil
}

// WriteJSON writes v as indented JSON to path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SAM runs the SAM CLI's local commands for one local template.
type SAM struct {
	// Python is the .venv's interpreter, which runs
	// infra/scripts/sam-host-network.py (SAM with the host network).
	Python string
	// Root is the module root.
	Root string
	// Template is the local template (LocalTemplate).
	Template string
	// EnvFile is the --env-vars file (EnvVars).
	EnvFile string
	// Image is the invoke image, used with --skip-pull-image: no registry
	// is reachable, and SAM pulls its own otherwise.
	Image string
	// Log receives SAM's and the functions' output (stderr); nil drops it.
	Log io.Writer
}

// NewSAM returns a SAM for the module at root with the .venv's Python.
func NewSAM(root, template, envFile, image string, log io.Writer) (*SAM, error) {
	py := filepath.Join(root, ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		return nil, fmt.Errorf("sam local: %s is missing: run `make tools`", py)
	}
	if image == "" {
		return nil, fmt.Errorf("sam local: no invoke image (set %s; `make sam-local` builds one)", EnvImage)
	}
	return &SAM{Python: py, Root: root, Template: template, EnvFile: envFile, Image: image, Log: log}, nil
}

func (s *SAM) command(ctx context.Context, args ...string) *exec.Cmd {
	argv := append([]string{filepath.Join(s.Root, "infra", "scripts", "sam-host-network.py")}, args...)
	argv = append(argv,
		"--template", s.Template, "--env-vars", s.EnvFile,
		"--invoke-image", s.Image, "--skip-pull-image",
		"--docker-network", "host", "--region", "us-east-1")
	cmd := exec.CommandContext(ctx, s.Python, argv...)
	cmd.Dir = s.Root
	// No telemetry (there is no internet), and no developer profile: SAM
	// passes the session's credentials to the container, moto takes any.
	cmd.Env = append(os.Environ(), "SAM_CLI_TELEMETRY=0",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Invoke runs `sam local invoke function -e event` and returns the
// function's answer (SAM's stdout). A function error is an error, with
// its errorMessage; SAM's and the function's logs go to s.Log.
func (s *SAM) Invoke(ctx context.Context, function, event string) ([]byte, error) {
	cmd := s.command(ctx, "local", "invoke", function, "--event", event)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = s.log()
	began := time.Now()
	err := cmd.Run()
	fmt.Fprintf(s.log(), "samlocal: sam local invoke %s -e %s: %v\n", function, filepath.Base(event), time.Since(began).Round(time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("sam local invoke %s -e %s: %w", function, event, err)
	}
	answer := bytes.TrimSpace(out.Bytes())
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if json.Unmarshal(answer, &fnErr) == nil && fnErr.ErrorMessage != "" {
		return answer, fmt.Errorf("sam local invoke %s -e %s: function error %s: %s", function, event, fnErr.ErrorType, fnErr.ErrorMessage)
	}
	if !json.Valid(answer) {
		return answer, fmt.Errorf("sam local invoke %s -e %s: answer is not JSON: %q", function, event, answer)
	}
	return answer, nil
}

func (s *SAM) log() io.Writer {
	if s.Log == nil {
		return io.Discard
	}
	return s.Log
}

// API is a running `sam local start-api`.
type API struct {
	// URL is the API's base URL, http://127.0.0.1:PORT.
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartAPI runs `sam local start-api` on 127.0.0.1:port and waits until it
// answers (SAM mounts the routes before it listens). Containers are kept
// warm (LAZY) so that only the first request pays for one.
func (s *SAM) StartAPI(ctx context.Context, port int) (*API, error) {
	// Not CommandContext: the API outlives the call; Close stops it.
	cmd := s.command(context.WithoutCancel(ctx), "local", "start-api",
		"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--warm-containers", "LAZY")
	cmd.Stdout = s.log()
	cmd.Stderr = s.log()
	a := &API{URL: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, done: make(chan struct{})}
	if err := proc.Start(cmd, a.done, syscall.SIGTERM); err != nil {
		return nil, fmt.Errorf("sam local start-api: %w", err)
	}
	ready := time.NewTimer(2 * time.Minute)
	defer ready.Stop()
	for {
		// Any HTTP answer means the server listens (GET /urls is 403
		// "Missing Authentication Token", as on API Gateway).
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return a, nil
		}
		select {
		case <-a.done:
			return nil, errors.New("sam local start-api exited before it answered (its output is in the log)")
		case <-ctx.Done():
			a.Close()
			return nil, fmt.Errorf("sam local start-api: %w", ctx.Err())
		case <-ready.C:
			a.Close()
			return nil, errors.New("sam local start-api did not answer within 2 minutes")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Close stops the API: an interrupt first, so SAM removes its warm
// containers, then a kill of its process group if it lingers.
func (a *API) Close() {
	if a.cmd.Process == nil {
		return
	}
	_ = a.cmd.Process.Signal(os.Interrupt)
	select {
	case <-a.done:
	case <-time.After(15 * time.Second):
		proc.KillGroup(a.cmd)
		<-a.done
	}
}

// DockerAvailable reports whether a Docker daemon answers here.
func DockerAvailable(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, "docker", "info").Run() == nil
}

// FreePort returns a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
