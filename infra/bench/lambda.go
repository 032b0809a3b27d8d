package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/infra/rie"
	"github.com/urldownloader/urldownloader/internal/moto"
)

func nowFixed() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// FunctionFigures are one function's start-up and invocation times under
// aws-lambda-rie on this machine (host architecture, not arm64).
type FunctionFigures struct {
	Name  string
	Event string
	// Init is the runtime's init (INIT REPORT); ColdDuration the first
	// invocation's REPORT Duration (init included).
	Init, ColdDuration time.Duration
	// Warm is the median REPORT Duration of the warm invocations, WarmRuntime
	// the handler's own time in them.
	Warm, WarmRuntime time.Duration
	WarmN             int
	MaxMemoryMB       int
}

// LambdaResult holds the Lambda figures.
type LambdaResult struct {
	// Sizes are the arm64, stripped bootstrap sizes from `make build`.
	Sizes    map[string]int64
	BuildErr string
	Funcs    []FunctionFigures
	// Ingest CPU, from benchmarkIngest.
	IngestNsPerURL     float64
	IngestAllocsPerURL float64
	IngestBytesPerURL  float64
	IngestBatch        string
}

func (e *benchEnv) lambda(ctx context.Context) (*LambdaResult, error) {
	lr := &LambdaResult{Sizes: map[string]int64{}}
	if e.cfg.LambdaBuild {
		e.log.Info("lambda: make build (arm64)")
		cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "build")
		cmd.Dir = e.root
		if out, err := cmd.CombinedOutput(); err != nil {
			lr.BuildErr = fmt.Sprintf("make build: %v: %s", err, bytes.TrimSpace(out))
		}
		for _, f := range []string{"ingest", "check"} {
			if st, err := os.Stat(filepath.Join(e.root, ".build", f, "bootstrap")); err == nil {
				lr.Sizes[f] = st.Size()
			}
		}
	}

	e.log.Info("lambda: ingest CPU benchmark")
	r := testing.Benchmark(benchmarkIngest)
	if r.N > 0 {
		lr.IngestNsPerURL = float64(r.NsPerOp()) / ingestBatchRecords
		lr.IngestAllocsPerURL = float64(r.AllocsPerOp()) / ingestBatchRecords
		lr.IngestBytesPerURL = float64(r.AllocedBytesPerOp()) / ingestBatchRecords
	}
	lr.IngestBatch = fmt.Sprintf("%d records of 1 URL over %d hosts, %d runs", ingestBatchRecords, ingestBatchHosts, r.N)

	e.log.Info("lambda: aws-lambda-rie")
	funcs, err := e.rieFigures(ctx)
	if err != nil {
		return lr, err
	}
	lr.Funcs = funcs
	return lr, nil
}

// rieFigures runs both functions under aws-lambda-rie against a stack on the
// run's moto: a cold invocation, then warm ones.
func (e *benchEnv) rieFigures(ctx context.Context) ([]FunctionFigures, error) {
	p, err := e.pipeline(ctx, "rie", e.cfg.CostDelay, nil, nil)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	dir, err := os.MkdirTemp("", "bench-rie-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	env := map[string]string{}
	for k, v := range p.Stack.Env() {
		env[k] = v
	}
	for k, v := range moto.Env(e.moto.Endpoint) {
		env[k] = v
	}
	env["ALLOW_PRIVATE_NETWORKS"] = "true"
	// An idle shard's check runs for CHECK_RUN_SECONDS: keep it short.
	env["CHECK_RUN_SECONDS"] = "1"

	small, err := os.ReadFile(filepath.Join(e.root, "infra", "events", "ingest-sqs.json"))
	if err != nil {
		return nil, err
	}
	var probe struct{ Records []json.RawMessage }
	_ = json.Unmarshal(small, &probe)
	big, err := json.Marshal(ingestEvent(ingestBatchRecords, ingestBatchHosts))
	if err != nil {
		return nil, err
	}
	shard, err := os.ReadFile(filepath.Join(e.root, "infra", "events", "check-shard-0.json"))
	if err != nil {
		return nil, err
	}
	warm := 5
	if e.cfg.Smoke {
		warm = 1
	}
	var out []FunctionFigures
	for _, f := range []struct {
		name, fn string
		mem      int
		timeout  time.Duration
		events   [][]byte
		label    string
	}{
		{"ingest", "ingest", 256, time.Minute, [][]byte{small}, fmt.Sprintf("infra/events/ingest-sqs.json (%d records)", len(probe.Records))},
		{"ingest", "ingest", 256, time.Minute, [][]byte{big}, fmt.Sprintf("%d records x 1 URL, %d hosts", ingestBatchRecords, ingestBatchHosts)},
		{"check", "check", 512, 20 * time.Second, [][]byte{shard}, "infra/events/check-shard-0.json, idle shard, CHECK_RUN_SECONDS=1"},
	} {
		bin, ok := prebuilt.bootstraps[f.fn]
		if !ok {
			var err error
			if bin, err = rie.Build(ctx, dir, f.fn); err != nil {
				return nil, err
			}
		}
		em, err := rie.Start(ctx, rie.Options{Bootstrap: bin, Env: env, Timeout: f.timeout, MemorySize: f.mem, FunctionName: f.fn})
		if err != nil {
			return nil, err
		}
		for i := 0; i < 1+warm; i++ {
			if _, err := em.Invoke(ctx, f.events[0]); err != nil {
				em.Close()
				return nil, fmt.Errorf("invoke %s: %w; the function's output ends:\n%s", f.name, err, lastLines(em.Output(), 40))
			}
		}
		reps := em.Reports()
		em.Close()
		ff := FunctionFigures{Name: f.name, Event: f.label}
		var ws, wr []time.Duration
		for _, r := range reps {
			if r.Cold {
				ff.Init, ff.ColdDuration = r.InitDuration, r.Duration
			} else {
				ws, wr = append(ws, r.Duration), append(wr, r.RuntimeDuration)
			}
			ff.MaxMemoryMB = max(ff.MaxMemoryMB, r.MaxMemoryUsed)
		}
		ff.Warm, ff.WarmRuntime, ff.WarmN = median(ws), median(wr), len(ws)
		out = append(out, ff)
	}
	return out, nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func mb(n int64) string { return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + " MB" }
