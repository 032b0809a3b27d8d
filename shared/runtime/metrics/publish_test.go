package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

type publishFunc func(context.Context, []result.Result) error

func (f publishFunc) Publish(ctx context.Context, rs []result.Result) error { return f(ctx, rs) }

// TestCountResults: results are counted by status once published, not
// when the publish failed (they are published, and counted, again).
func TestCountResults(t *testing.T) {
	var out metrics.Buffer
	rec := metrics.New(&out, "test", nil, nil)
	fail := false
	c := &metrics.CountResults{Metrics: rec, Publisher: publishFunc(func(context.Context, []result.Result) error {
		if fail {
			return errors.New("sqs down")
		}
		return nil
	})}
	ctx := context.Background()
	_ = c.Publish(ctx, []result.Result{{Status: result.StatusFetched}, {Status: result.StatusFetched}, {Status: result.StatusDenied}})
	fail = true
	_ = c.Publish(ctx, []result.Result{{Status: result.StatusFetched}})
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	docs, err := metrics.Parse(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, tot := range metrics.Totals(docs) {
		if tot.Name == metrics.Results.Name {
			got[tot.DimValue] = tot.Sum()
		}
	}
	want := map[string]float64{"": 3, string(result.StatusFetched): 2, string(result.StatusDenied): 1}
	if len(got) != len(want) {
		t.Fatalf("results %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("results %v, want %v", got, want)
		}
	}
}
