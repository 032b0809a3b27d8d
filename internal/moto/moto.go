// Package moto runs moto's server mode, a local stand-in for DynamoDB, SQS
// and SSM, as a child process, and gives an aws-sdk-go-v2 configuration
// that talks to it.
//
// The moto_server command comes from the project's .venv (`make tools`).
// Tests that need it must fail, never skip, when it is missing: a skipped
// integration test in CI looks like a passing one. Shared starts one server
// per test binary; tests isolate themselves by unique resource names rather
// than by resetting it. See NOTES.md for where moto differs from AWS.
package moto

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/middleware"

	"github.com/urldownloader/urldownloader/internal/proc"
	"github.com/urldownloader/urldownloader/shared/aws/config"
)

// Region is the region of every configuration this package makes. moto
// keeps separate state per region, so all clients must agree on one.
const Region = "us-east-1"

// AccountID is the account moto reports by default; it appears in the ARNs
// of the resources it creates.
const AccountID = "123456789012"

// EnvServer names the environment variable that gives the moto_server
// command's path; the Makefile sets it for tests and the local runner.
const EnvServer = "MOTO_SERVER"

// startTimeout bounds how long Start waits for a fresh server to answer
// when ctx has no earlier deadline. A cold start takes about a second; a
// loaded CI machine can take several.
const startTimeout = 60 * time.Second

// Server is a running moto_server child process.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string

	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited
	output *proc.Tail
	once   sync.Once
}

// Options shape a server.
type Options struct {
	// Stock runs moto_server as installed, without the patches for its
	// O(size) queues and queries (see patches): only to compare with.
	Stock bool
}

// Start starts moto_server, with the patches that make its SQS queues and
// DynamoDB queries cost O(1) and O(matches) rather than O(size) per call,
// on a free loopback port and waits until it answers. The caller must
// Close it. The server dies with the calling process on Linux even if
// Close is never called.
func Start(ctx context.Context) (*Server, error) { return StartWith(ctx, Options{}) }

// StartWith is Start with options.
func StartWith(ctx context.Context, opts Options) (*Server, error) {
	bin, err := FindServer()
	if err != nil {
		return nil, err
	}
	argv := []string{bin}
	if !opts.Stock {
		if argv, err = patchedCommand(bin); err != nil {
			return nil, err
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	// The port is free when we look, but another process may take it before
	// moto binds it; then moto exits at once and we try another port.
	var errs []error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("start moto: %w", err)
		}
		s, err := start(ctx, argv, port)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("start moto (%s): %w", bin, errors.Join(errs...))
}

func start(ctx context.Context, argv []string, port int) (*Server, error) {
	bin := argv[len(argv)-1]
	s := &Server{
		Endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		done:     make(chan struct{}),
		output:   &proc.Tail{Max: 16 << 10},
	}
	s.cmd = exec.Command(argv[0], append(argv[1:], "-H", "127.0.0.1", "-p", strconv.Itoa(port))...)
	s.cmd.Stdout = s.output
	s.cmd.Stderr = s.output
	// Not exec.CommandContext: ctx bounds the start only, not the server's life.
	// SIGKILL on the parent's death: a test binary that never calls Close
	// (see Shared) leaves no moto_server behind.
	if err := proc.Start(s.cmd, s.done, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("moto on port %d: %w; its output:\n%s", port, err, s.output.String())
	}
	return s, nil
}

// waitReady polls the server until it answers, the process exits or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/moto-api/data.json", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return errors.New("moto_server exited before it answered")
		case <-ctx.Done():
			return fmt.Errorf("moto_server did not answer: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// PID is the server's process id (its CPU time is in /proc/PID/stat).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Close kills the server's process group and waits for it to exit. It is
// safe to call more than once.
func (s *Server) Close() error {
	s.once.Do(func() {
		// The whole group, so any helper process moto spawned dies too.
		proc.KillGroup(s.cmd)
		<-s.done
	})
	return nil
}

// Reset clears every resource in every service of the server. Tests that
// share a server (see Shared) must not call it: they would wipe each
// other's tables and queues.
func (s *Server) Reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/moto-api/reset", nil)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reset moto: %s", resp.Status)
	}
	return nil
}

// FindServer returns the moto_server command to run: $MOTO_SERVER if set,
// else .venv/bin/moto_server in the module root (see ModuleRoot). Its
// errors tell to run `make tools`.
func FindServer() (string, error) {
	return proc.FindTool(EnvServer, ".venv/bin/moto_server")
}

// ModuleRoot returns the product module's root, the directory holding
// go.mod and template.yaml at or above the working directory (see
// proc.ModuleRoot).
func ModuleRoot() (string, error) { return proc.ModuleRoot() }

// AWSConfig returns an SDK configuration for the moto server at endpoint:
// static test credentials, Region, and every service's BaseEndpoint set to
// endpoint. It reads no environment variables or shared config files, so
// a developer's AWS profile can neither break nor redirect a test.
func AWSConfig(ctx context.Context, endpoint string) (aws.Config, error) {
	if endpoint == "" {
		return aws.Config{}, errors.New("moto config: empty endpoint")
	}
	cfg := aws.Config{
		Region:       Region,
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("test", "test", "")),
		BaseEndpoint: aws.String(endpoint),
		// The functions' own retry policy, so a test meets the retries a
		// deployment makes (config.RetryOptions).
		Retryer:    func() aws.Retryer { return config.Retryer() },
		HTTPClient: &http.Client{Timeout: 2 * time.Minute, Transport: newTransport()},
		// moto does not make conditional writes atomic; see atomic.go.
		APIOptions: []func(*middleware.Stack) error{atomicConditions},
	}
	return cfg, nil
}

// newTransport is the connection pool of one config (one function, as a
// Lambda execution environment has its own): moto is one Python process
// serving a thread per connection, and a burst of a thousand requests at
// once (a shard's workers when hosts fall due together) overflows its
// listen backlog into connection resets. Requests beyond the cap wait for
// a connection instead; kept-alive connections spare the handshakes.
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost = 64
	t.MaxIdleConnsPerHost = 64
	return t
}

// Env returns the environment variables that point an SDK that loads its
// configuration from the environment (config.LoadDefaultConfig, as the
// Lambda functions do) at the moto server at endpoint. The empty
// AWS_SESSION_TOKEN is deliberate: merged over a developer's environment,
// it clears a real session token that would otherwise ride along.
func Env(endpoint string) map[string]string {
	return map[string]string{
		"AWS_ENDPOINT_URL":          endpoint,
		"AWS_ACCESS_KEY_ID":         "test",
		"AWS_SECRET_ACCESS_KEY":     "test",
		"AWS_SESSION_TOKEN":         "",
		"AWS_REGION":                Region,
		"AWS_DEFAULT_REGION":        Region,
		"AWS_EC2_METADATA_DISABLED": "true",
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
