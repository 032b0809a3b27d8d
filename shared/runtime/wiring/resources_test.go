package wiring

import (
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/urldownloader/urldownloader/shared/aws/config"
	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/params"
	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/web/fetch"
)

// keepMemoryLimit restores the process's memory limit after a test.
func keepMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

// defaultKeptBody is what a worker holds of a body at the default
// parameters (engine.Engine.keptBody): the inline limit and the byte that
// shows there is more, since both deployments have a body store (the body
// bucket; local mode's bodies folder) and a longer body streams into it.
var defaultKeptBody = min(params.Defaults().MaxBodyBytes, params.Defaults().InlineBodyBytes+1)

func TestBudgetFor(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		memory      int
		wantWorkers int // at the default body sizes
	}{
		{0, 0},     // not in Lambda: unbounded
		{128, 15},  // (64 - 48) MiB of bodies
		{512, 198}, // the check function: memory binds
		{1024, 443},
		{10240, 585}, // descriptors bind: 668 = 800 - 24 - 108, less an eighth
	}
	for _, tc := range tests {
		b := BudgetFor(tc.memory)
		if got := b.Workers(defaultKeptBody); got != tc.wantWorkers {
			t.Errorf("BudgetFor(%d MiB) = %+v: %d workers, want %d", tc.memory, b, got, tc.wantWorkers)
		}
		if tc.memory > 0 && (b.Conns+runtimeFDs+sdkConns > fdBudget || b.Memory > int64(tc.memory)*mib/2) {
			t.Errorf("BudgetFor(%d MiB) = %+v: beyond the descriptor budget or half the memory", tc.memory, b)
		}
	}
}

// TestFromEnvResources: in a function of known memory, FromEnv sets
// GOMEMLIMIT below it, bounds the check engine by the memory's budget and
// caps the fetcher's connections; GOMEMLIMIT from the environment wins;
// outside Lambda nothing is bounded.
func TestFromEnvResources(t *testing.T) {
	fn := map[string]string{"TABLE_NAME": "hosts", "OUTPUT_QUEUE_URL": "http://127.0.0.1:1/out", "PARAM_PATH": "/p/", "SHARD_COUNT": "4"}
	t.Run("lambda memory", func(t *testing.T) {
		keepMemoryLimit(t)
		setEnv(t, fn)
		t.Setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
		t.Setenv("GOMEMLIMIT", "")
		s, _, err := FromEnv(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		share := memoryLimitShare
		if got, want := debug.SetMemoryLimit(-1), int64(float64(512<<20)*share); got != want {
			t.Errorf("memory limit %d, want %d (85%% of 512 MiB)", got, want)
		}
		if s.Engine.Budget != BudgetFor(512) || s.Engine.Budget.Workers(params.Defaults().MaxBodyBytes) == 0 {
			t.Errorf("engine budget %+v, want BudgetFor(512) = %+v", s.Engine.Budget, BudgetFor(512))
		}
		f, ok := s.Engine.Fetcher(params.Defaults()).(*fetch.Fetcher)
		if !ok || f.OpenConns() != 0 {
			t.Errorf("the fetcher does not count its connections (MaxConns unset)")
		}
	})
	t.Run("GOMEMLIMIT set", func(t *testing.T) {
		keepMemoryLimit(t)
		setEnv(t, fn)
		t.Setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
		t.Setenv("GOMEMLIMIT", "300MiB")
		debug.SetMemoryLimit(300 << 20) // what the runtime read at start
		if _, _, err := FromEnv(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := debug.SetMemoryLimit(-1); got != 300<<20 {
			t.Errorf("memory limit %d, want GOMEMLIMIT's 300 MiB kept", got)
		}
	})
	t.Run("not in lambda", func(t *testing.T) {
		keepMemoryLimit(t)
		debug.SetMemoryLimit(math.MaxInt64)
		setEnv(t, fn)
		t.Setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "")
		s, _, err := FromEnv(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 || s.Engine.Budget != (engine.Budget{}) {
			t.Errorf("limit %d, budget %+v; want neither set", got, s.Engine.Budget)
		}
	})
}

// TestSDKConnectionsCapped: hundreds of store calls at once through the
// services' own SDK client use at most dynamoConns connections (they wait
// for one instead of opening a descriptor each).
func TestSDKConnectionsCapped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var open, peak atomic.Int32
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond)
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Write([]byte("{}")) // GetItem: no such item
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				n := open.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	awsCfg := aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String("http://" + ln.Addr().String()),
		Credentials: credentials.NewStaticCredentialsProvider("id", "secret", ""),
	}
	cfg := config.Config{TableName: "t", OutputQueueURL: "http://127.0.0.1:1/q", ParamPath: "/p/", ShardCount: 1}
	s := New(awsCfg, cfg, Options{})
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 300 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := s.Store.Load(ctx, "host"+string(rune('a'+i%26)), 1); !errors.Is(err, hostqueue.ErrNotFound) {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of 300 loads did not answer ErrNotFound", n)
	}
	if p := peak.Load(); p > dynamoConns || p < 2 {
		t.Errorf("%d connections open at once, want at most %d (and several)", p, dynamoConns)
	}
}

// TestMachineBudget: local mode's budget follows the process's descriptor
// limit and the machine's memory, whichever binds, and never drops to no
// worker at all.
func TestMachineBudget(t *testing.T) {
	const gib = 1 << 30
	maxBody := defaultKeptBody
	tests := []struct {
		name        string
		fds         int
		memory      int64
		wantWorkers int
	}{
		{"this machine: 20,000 descriptors, 24 GiB: memory binds, above 10,000", 20000, 24 * gib, 11691},
		{"20,000 descriptors, 64 GiB: descriptors bind", 20000, 64 * gib, 17276},
		{"a laptop: 1,048,576 descriptors, 8 GiB: memory binds", 1 << 20, 8 * gib, 3866},
		{"the usual soft limit of 1,024", 1024, 8 * gib, 672},
		{"memory unknown: 4 GiB assumed", 20000, 0, 1910},
		{"hardly any descriptors: still one worker", 10, 8 * gib, 2},
	}
	for _, tc := range tests {
		b := MachineBudget(tc.fds, tc.memory)
		if got := b.Workers(maxBody); got != tc.wantWorkers {
			t.Errorf("%s: MachineBudget(%d, %d) = %+v: %d workers, want %d", tc.name, tc.fds, tc.memory, b, got, tc.wantWorkers)
		}
		if b.Conns > max(2, tc.fds-localFDReserve) {
			t.Errorf("%s: %d connections allowed with %d descriptors", tc.name, b.Conns, tc.fds)
		}
	}
	if fds, memory := ProcessLimits(); fds < 1 || memory < 0 {
		t.Errorf("ProcessLimits() = %d, %d", fds, memory)
	}
}
