package checkhandler_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/engine"
)

// syncRunner records requests from concurrent runs.
type syncRunner struct {
	mu   sync.Mutex
	reqs []engine.RunRequest
	fail map[int]bool
}

func (s *syncRunner) Run(_ context.Context, req engine.RunRequest) (engine.Summary, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if s.fail[req.Shard] {
		return engine.Summary{Shard: req.Shard}, errors.New("store down")
	}
	return engine.Summary{Shard: req.Shard, Hosts: 1, Requests: 2, Results: map[result.Status]int{result.StatusFetched: 2}}, nil
}

// TestHandleWake: a wake queue batch runs each named shard once, as a
// wake-up (ends at once if another run holds it, no lease wait), ignores
// bodies that name no valid shard, and never fails the batch.
func TestHandleWake(t *testing.T) {
	r := &syncRunner{fail: map[int]bool{0: true}}
	var log bytes.Buffer
	sum, err := newHandler(r, &log).Handle(context.Background(), decodeEvent(t, "wake-sqs.json"))
	if err != nil {
		t.Fatalf("a wake-up batch failed: %v (it must not: a retry comes only after the visibility timeout)", err)
	}
	var shards []int
	for _, req := range r.reqs {
		shards = append(shards, req.Shard)
		if !req.Wake || req.LeaseWait != 0 || req.ShardCount != 4 {
			t.Errorf("shard %d run as %+v, want Wake, no LeaseWait, ShardCount 4", req.Shard, req)
		}
		if !req.Until.Equal(base.Add(55 * time.Second)) {
			t.Errorf("shard %d Until %v, want the run time from now", req.Shard, req.Until)
		}
	}
	slices.Sort(shards)
	if !slices.Equal(shards, []int{0, 2}) {
		t.Errorf("ran shards %v, want 0 and 2 once each (7 is out of range for ShardCount 4)", shards)
	}
	if sum.Hosts != 1 || sum.Results[result.StatusFetched] != 2 {
		t.Errorf("summary %+v, want the successful shard's counts", sum)
	}
	for _, want := range []string{"ignore wake-up", `"shard\":7`, "woken check", "store down"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

// TestHandleScheduleIsNotWake: the schedule's event runs a normal shard run.
func TestHandleScheduleIsNotWake(t *testing.T) {
	r := &syncRunner{}
	if _, err := newHandler(r, nil).Handle(context.Background(), shard(1)); err != nil {
		t.Fatal(err)
	}
	if len(r.reqs) != 1 || r.reqs[0].Wake || r.reqs[0].LeaseWait == 0 {
		t.Errorf("scheduled run %+v, want one run, not a wake-up, with a lease wait", r.reqs)
	}
}
