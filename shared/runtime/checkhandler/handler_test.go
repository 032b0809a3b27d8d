package checkhandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/urldownloader/urldownloader/shared/engine"
	"github.com/urldownloader/urldownloader/shared/runtime/checkhandler"
)

// fakeRunner records the requests it gets; run decides the outcome.
type fakeRunner struct {
	run  func(req engine.RunRequest) (engine.Summary, error)
	reqs []engine.RunRequest
}

func (f *fakeRunner) Run(_ context.Context, req engine.RunRequest) (engine.Summary, error) {
	f.reqs = append(f.reqs, req)
	if f.run == nil {
		return engine.Summary{Shard: req.Shard}, nil
	}
	return f.run(req)
}

// base is the injected clock's time; context deadlines are set relative to
// it (and to the wall clock, so the contexts are not already expired).
var base = time.Now().Add(time.Hour).Truncate(time.Second)

func newHandler(r checkhandler.Runner, log *bytes.Buffer) *checkhandler.Handler {
	if log == nil {
		log = &bytes.Buffer{}
	}
	return &checkhandler.Handler{
		Runner:     r,
		ShardCount: 4,
		Run:        55 * time.Second,
		Now:        func() time.Time { return base },
		Log:        slog.New(slog.NewJSONHandler(log, nil)),
	}
}

func shard(n int) checkhandler.Event { return checkhandler.Event{Shard: &n} }

func decodeEvent(t *testing.T, name string) checkhandler.Event {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var ev checkhandler.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return ev
}

func TestHandleMissingShard(t *testing.T) {
	tests := []struct {
		name string
		ev   checkhandler.Event
	}{
		{"zero event", checkhandler.Event{}},
		{"EventBridge default payload", decodeEvent(t, "schedule-default-event.json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRunner{}
			_, err := newHandler(r, nil).Handle(context.Background(), tt.ev)
			if err == nil {
				t.Fatal("Handle ran an event without a shard")
			}
			for _, want := range []string{`no "shard"`, `{"shard": N}`, "from 0 to 3"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if len(r.reqs) != 0 {
				t.Errorf("runner called %d times", len(r.reqs))
			}
		})
	}
}

func TestHandleShardFromEvent(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want int
	}{
		{"testdata file", "", 1},
		{"shard zero is a shard", `{"shard": 0}`, 0},
		{"last shard", `{"shard": 3}`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev checkhandler.Event
			if tt.raw == "" {
				ev = decodeEvent(t, "schedule-shard-1.json")
			} else if err := json.Unmarshal([]byte(tt.raw), &ev); err != nil {
				t.Fatal(err)
			}
			r := &fakeRunner{}
			if _, err := newHandler(r, nil).Handle(context.Background(), ev); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if len(r.reqs) != 1 || r.reqs[0].Shard != tt.want || r.reqs[0].ShardCount != 4 {
				t.Errorf("requests %+v, want one for shard %d of 4", r.reqs, tt.want)
			}
		})
	}
}

func TestHandleUntilAndDeadline(t *testing.T) {
	tests := []struct {
		name         string
		run          time.Duration
		deadlineIn   time.Duration // 0: no context deadline
		wantUntil    time.Duration // after base
		wantDeadline time.Duration // after base; 0 means the zero time
	}{
		{"no deadline: Run decides", 55 * time.Second, 0, 55 * time.Second, 0},
		{"far deadline: Run decides", 55 * time.Second, 15 * time.Minute, 55 * time.Second, 15*time.Minute - 5*time.Second},
		{"deadline just far enough", 55 * time.Second, 70 * time.Second, 55 * time.Second, 65 * time.Second},
		{"one-minute Lambda: margin before the deadline", 55 * time.Second, 60 * time.Second, 45 * time.Second, 55 * time.Second},
		{"long run capped by the deadline", 10 * time.Minute, 5 * time.Minute, 5*time.Minute - 15*time.Second, 5*time.Minute - 5*time.Second},
		{"short run, long deadline", 5 * time.Second, 15 * time.Minute, 5 * time.Second, 15*time.Minute - 5*time.Second},
		{"deadline inside the margin: nothing to start", 55 * time.Second, 10 * time.Second, -5 * time.Second, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRunner{}
			h := newHandler(r, nil)
			h.Run = tt.run
			ctx := context.Background()
			if tt.deadlineIn != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, base.Add(tt.deadlineIn))
				defer cancel()
			}
			if _, err := h.Handle(ctx, shard(2)); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if len(r.reqs) != 1 {
				t.Fatalf("runner called %d times", len(r.reqs))
			}
			req := r.reqs[0]
			if want := base.Add(tt.wantUntil); !req.Until.Equal(want) {
				t.Errorf("Until = base%+v, want base%+v", req.Until.Sub(base), tt.wantUntil)
			}
			if tt.wantDeadline == 0 {
				if !req.Deadline.IsZero() {
					t.Errorf("Deadline = base%+v, want zero without a context deadline", req.Deadline.Sub(base))
				}
			} else if want := base.Add(tt.wantDeadline); !req.Deadline.Equal(want) {
				t.Errorf("Deadline = base%+v, want base%+v", req.Deadline.Sub(base), tt.wantDeadline)
			}
			if !req.Deadline.IsZero() && !req.Until.Before(req.Deadline) {
				t.Errorf("Until %v is not before Deadline %v", req.Until, req.Deadline)
			}
			if tt.deadlineIn != 0 && !req.Deadline.Before(base.Add(tt.deadlineIn)) {
				t.Errorf("Deadline %v leaves no time before the Lambda deadline", req.Deadline)
			}
			if req.LeaseWait <= 0 {
				t.Errorf("LeaseWait = %v, want a positive wait for a predecessor's lease", req.LeaseWait)
			}
		})
	}
}

func TestHandleOwner(t *testing.T) {
	local := regexp.MustCompile(`^local-[0-9a-f]{16}$`)
	tests := []struct {
		name      string
		ctx       context.Context
		wantOwner string // empty: a local- owner
	}{
		{"Lambda request id", lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "8476a536-e9f4-11e8-9739-2dfe598c3fcd"}), "8476a536-e9f4-11e8-9739-2dfe598c3fcd"},
		{"no Lambda context", context.Background(), ""},
		{"Lambda context without request id", lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRunner{}
			var log bytes.Buffer
			h := newHandler(r, &log)
			for range 2 {
				if _, err := h.Handle(tt.ctx, shard(0)); err != nil {
					t.Fatalf("Handle: %v", err)
				}
			}
			a, b := r.reqs[0].Owner, r.reqs[1].Owner
			if tt.wantOwner != "" {
				if a != tt.wantOwner || b != tt.wantOwner {
					t.Errorf("owners %q %q, want the request id %q", a, b, tt.wantOwner)
				}
			} else {
				if !local.MatchString(a) || !local.MatchString(b) {
					t.Errorf("owners %q %q, want local-<16 hex>", a, b)
				}
				if a == b {
					t.Errorf("two local invocations share the owner %q: their leases would not exclude each other", a)
				}
			}
			if !strings.Contains(log.String(), `"requestId":"`+a+`"`) {
				t.Errorf("log does not carry the owner %q:\n%s", a, log.String())
			}
		})
	}
}

func TestHandleRunnerResult(t *testing.T) {
	t.Run("summary returned", func(t *testing.T) {
		want := engine.Summary{Shard: 3, VirtualShards: []int{3, 7, 11, 15}, Leased: []int{3, 7}, Hosts: 12, Requests: 40, Errors: 1}
		r := &fakeRunner{run: func(engine.RunRequest) (engine.Summary, error) { return want, nil }}
		got, err := newHandler(r, nil).Handle(context.Background(), shard(3))
		if err == nil {
			// Errors: 1 is a store or publish call that failed after
			// its retries: the invocation fails, its summary kept.
			t.Fatal("a run with a failed call: no error")
		}
		if got.Shard != want.Shard || !slices.Equal(got.Leased, want.Leased) || got.Hosts != 12 || got.Requests != 40 || got.Errors != 1 {
			t.Errorf("summary %+v, want %+v", got, want)
		}
	})
	t.Run("error wrapped with the shard", func(t *testing.T) {
		boom := errors.New("shard 9 of 4: shard must be in [0, shardCount)")
		r := &fakeRunner{run: func(req engine.RunRequest) (engine.Summary, error) { return engine.Summary{Shard: req.Shard}, boom }}
		sum, err := newHandler(r, nil).Handle(context.Background(), shard(9))
		if !errors.Is(err, boom) {
			t.Fatalf("error %v does not wrap the runner's", err)
		}
		if !strings.HasPrefix(err.Error(), "check shard 9: ") {
			t.Errorf("error %q does not name the shard", err)
		}
		if sum.Shard != 9 {
			t.Errorf("partial summary not returned: %+v", sum)
		}
	})
}

// TestRunWindow checks that RunWindow is the least time from a run's start
// to its deadline whenever the function's timeout leaves DeadlineMargin
// after the run (the template's 120s for 55s does): a FetchTimeout bounded
// by it can start a request in every such invocation.
func TestRunWindow(t *testing.T) {
	for _, tt := range []struct {
		name     string
		run      time.Duration
		timeout  time.Duration
		tightest bool
	}{
		{"the template's timeout", 55 * time.Second, 120 * time.Second, false},
		{"timeout just long enough", 55 * time.Second, 55*time.Second + checkhandler.DeadlineMargin, true},
		{"short run", 3 * time.Second, 3*time.Second + checkhandler.DeadlineMargin, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &fakeRunner{}
			h := newHandler(r, nil)
			h.Run = tt.run
			ctx, cancel := context.WithDeadline(context.Background(), base.Add(tt.timeout))
			defer cancel()
			if _, err := h.Handle(ctx, shard(0)); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			window := r.reqs[0].Deadline.Sub(base)
			want := checkhandler.RunWindow(tt.run)
			if window < want || tt.tightest && window != want {
				t.Errorf("run %v, timeout %v: window %v, want RunWindow %v at least (equal at the tightest timeout)", tt.run, tt.timeout, window, want)
			}
			if engine.FetchTimeoutLimit(want) <= 0 {
				t.Errorf("FetchTimeoutLimit(%v) = %v leaves no timeout at all", want, engine.FetchTimeoutLimit(want))
			}
		})
	}
}
