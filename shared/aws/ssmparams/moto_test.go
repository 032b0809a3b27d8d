package ssmparams_test

// Integration tests against a real moto server: they check what a fake
// cannot, that the SDK calls, pagination and decryption work against the
// SSM wire protocol, and that params.Cache behaves end to end.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/urldownloader/urldownloader/internal/moto"
	"github.com/urldownloader/urldownloader/shared/aws/ssmparams"
	"github.com/urldownloader/urldownloader/shared/domain/params"
)

var pathSeq atomic.Int64

// uniquePath gives each test its own stage path, so tests sharing one moto
// server (and reruns with -count) never see each other's parameters.
func uniquePath(t *testing.T) string {
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	return fmt.Sprintf("/urldownloader/it/%s-%d-%d/", name, time.Now().UnixNano(), pathSeq.Add(1))
}

// motoClient returns an SSM client for the shared moto server.
func motoClient(t *testing.T) *ssm.Client {
	t.Helper()
	srv := moto.Shared(t)
	cfg, err := moto.AWSConfig(t.Context(), srv.Endpoint)
	if err != nil {
		t.Fatalf("moto config: %v", err)
	}
	return ssm.NewFromConfig(cfg)
}

// deadClient returns an SSM client pointed at a loopback port that drops
// every connection: an SSM outage as the SDK sees it. The port stays held,
// so no other process on the machine can take it and answer (a load now
// retries for seconds).
func deadClient(t *testing.T) *ssm.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	addr := ln.Addr().String()
	cfg, err := moto.AWSConfig(t.Context(), "http://"+addr)
	if err != nil {
		t.Fatalf("config for %s: %v", addr, err)
	}
	return ssm.NewFromConfig(cfg)
}

// switchClient lets a test cut the parameter store off mid-run.
type switchClient struct{ c atomic.Pointer[ssm.Client] }

func (s *switchClient) GetParameters(ctx context.Context, in *ssm.GetParametersInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersOutput, error) {
	return s.c.Load().GetParameters(ctx, in, optFns...)
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// errorRecords decodes the records logged at level ERROR.
func (b *logBuffer) errorRecords(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["level"] == "ERROR" {
			out = append(out, rec)
		}
	}
	return out
}

// newCache wires a params.Cache over l with an injected clock and a log
// captured for counting.
func newCache(l params.Loader, ttl time.Duration) (*params.Cache, *clock, *logBuffer) {
	clk := &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	logs := &logBuffer{}
	return params.NewCache(l, ttl, clk.Now, slog.New(slog.NewJSONHandler(logs, nil))), clk, logs
}

func seed(t *testing.T, c ssmparams.PutClient, path string, values map[string]string) {
	t.Helper()
	if err := ssmparams.Seed(t.Context(), c, path, values); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// countingClient counts GetParameters calls.
type countingClient struct {
	ssmparams.Client
	n atomic.Int64
}

func (c *countingClient) GetParameters(ctx context.Context, in *ssm.GetParametersInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersOutput, error) {
	c.n.Add(1)
	return c.Client.GetParameters(ctx, in, optFns...)
}

func TestMotoLoadAllParametersByName(t *testing.T) {
	c := motoClient(t)
	path := uniquePath(t)

	// Every parameter: more than one call of 10 names.
	want := params.Defaults()
	want.FetchDelay = 3 * time.Second
	want.MaxAttempts = 7
	want.QueueMode = params.QueueByDomain
	seed(t, c, path, want.Format())
	// Deeper parameters are not ours (the read is not recursive), and a
	// SecureString is decrypted.
	seed(t, c, path+"nested/", map[string]string{params.NamePersistLimit: "1"})
	if _, err := c.PutParameter(t.Context(), &ssm.PutParameterInput{
		Name: aws.String(path + params.NameUserAgent), Value: aws.String("secretbot/1"),
		Type: types.ParameterTypeSecureString, Overwrite: aws.Bool(true),
	}); err != nil {
		t.Fatalf("put SecureString: %v", err)
	}
	want.UserAgent = "secretbot/1"

	counted := &countingClient{Client: c}
	raw, err := ssmparams.New(counted, path).Load(t.Context())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if n, want := counted.n.Load(), int64((len(params.Names())+9)/10); n != want {
		t.Errorf("%d GetParameters calls, want %d", n, want)
	}
	if !maps.Equal(raw, want.Format()) {
		t.Errorf("Load =\n%v\nwant\n%v", raw, want.Format())
	}
	got, err := params.Parse(raw, params.Defaults())
	if err != nil || got != want {
		t.Errorf("Parse(Load) = %+v, %v\nwant %+v", got, err, want)
	}

	// The same path written without slashes reads the same parameters.
	raw2, err := ssmparams.New(c, strings.Trim(path, "/")).Load(t.Context())
	if err != nil || !maps.Equal(raw2, raw) {
		t.Errorf("Load via unnormalised path = %v, %v; want the same parameters", raw2, err)
	}
}

func TestMotoLoadEmptyPath(t *testing.T) {
	raw, err := ssmparams.New(motoClient(t), uniquePath(t)).Load(t.Context())
	if err != nil || len(raw) != 0 {
		t.Errorf("Load of an empty path = %v, %v; want nothing and no error", raw, err)
	}
}

func TestMotoCachePicksUpLiveChangeAfterTTL(t *testing.T) {
	const ttl = 10 * time.Second
	c := motoClient(t)
	path := uniquePath(t)
	seed(t, c, path, map[string]string{params.NameFetchDelay: "2s", params.NamePersistLimit: "500"})

	cache, clk, logs := newCache(ssmparams.New(c, path), ttl)
	if got := cache.Get(t.Context()).FetchDelay; got != 2*time.Second {
		t.Fatalf("FetchDelay = %v, want 2s from SSM", got)
	}

	seed(t, c, path, map[string]string{params.NameFetchDelay: "3s"})
	if got := cache.Get(t.Context()).FetchDelay; got != 2*time.Second {
		t.Errorf("FetchDelay right after the change = %v, want the cached 2s", got)
	}
	// A refresh comes up to a quarter of the ttl early (jittered), never
	// earlier nor later.
	clk.Add(ttl*3/4 - time.Millisecond)
	if got := cache.Get(t.Context()).FetchDelay; got != 2*time.Second {
		t.Errorf("FetchDelay just before three quarters of the ttl = %v, want the cached 2s", got)
	}
	clk.Add(ttl/4 + time.Millisecond)
	if got := cache.Get(t.Context()).FetchDelay; got != 3*time.Second {
		t.Errorf("FetchDelay after ttl = %v, want the new 3s", got)
	}

	// Deleting a parameter brings its default back.
	if _, err := c.DeleteParameter(t.Context(), &ssm.DeleteParameterInput{Name: aws.String(path + params.NamePersistLimit)}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	clk.Add(ttl)
	if got, def := cache.Get(t.Context()).PersistLimit, params.Defaults().PersistLimit; got != def {
		t.Errorf("PersistLimit after delete = %d, want the default %d", got, def)
	}
	if errs := logs.errorRecords(t); len(errs) != 0 {
		t.Errorf("error records %v, want none", errs)
	}
}

func TestMotoInvalidValueKeepsPrevious(t *testing.T) {
	const ttl = 5 * time.Second
	c := motoClient(t)
	path := uniquePath(t)
	seed(t, c, path, map[string]string{params.NamePersistLimit: "50", params.NameMaxAttempts: "4"})

	cache, clk, logs := newCache(ssmparams.New(c, path), ttl)
	cache.Get(t.Context())

	seed(t, c, path, map[string]string{params.NamePersistLimit: "lots", params.NameMaxAttempts: "5"})
	clk.Add(ttl)
	got := cache.Get(t.Context())
	if got.PersistLimit != 50 || got.MaxAttempts != 5 {
		t.Errorf("PersistLimit=%d MaxAttempts=%d, want the previous 50 and the new 5", got.PersistLimit, got.MaxAttempts)
	}
	errs := logs.errorRecords(t)
	if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]["invalid"]), "PersistLimit") {
		t.Errorf("error records %v, want one naming PersistLimit", errs)
	}
}

func TestMotoUnreachableKeepsLastGood(t *testing.T) {
	const ttl = 5 * time.Second
	good := motoClient(t)
	path := uniquePath(t)
	seed(t, good, path, map[string]string{params.NameCheckHostPeriod: "9s"})

	sw := &switchClient{}
	sw.c.Store(good)
	cache, clk, logs := newCache(ssmparams.New(sw, path), ttl)
	if got := cache.Get(t.Context()).CheckHostPeriod; got != 9*time.Second {
		t.Fatalf("CheckHostPeriod = %v, want 9s from SSM", got)
	}

	sw.c.Store(deadClient(t))
	for attempt := 1; attempt <= 2; attempt++ {
		clk.Add(ttl)
		for range 20 {
			if got := cache.Get(t.Context()).CheckHostPeriod; got != 9*time.Second {
				t.Fatalf("attempt %d: CheckHostPeriod = %v during the outage, want the last good 9s", attempt, got)
			}
		}
		errs := logs.errorRecords(t)
		if len(errs) != attempt {
			t.Fatalf("attempt %d: %d error records, want %d (one per refresh, not per call)", attempt, len(errs), attempt)
		}
		if msg := fmt.Sprint(errs[attempt-1]["error"]); !strings.Contains(msg, "read parameters under "+path) {
			t.Errorf("error %q does not say what was being read", msg)
		}
	}

	sw.c.Store(good)
	seed(t, good, path, map[string]string{params.NameCheckHostPeriod: "8s"})
	clk.Add(ttl)
	if got := cache.Get(t.Context()).CheckHostPeriod; got != 8*time.Second {
		t.Errorf("CheckHostPeriod after recovery = %v, want 8s", got)
	}
}
