package ingesthandler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/metrics"
)

// TestHandleMetrics: an SQS batch counts its accepted URLs (not those whose
// host could not be written: SQS delivers them again), every item of a
// refused record as rejected, the evicted ones, and Handle flushes them.
func TestHandleMetrics(t *testing.T) {
	ing := &fakeIngester{ingest: func(msgs []urlmsg.Message) hostqueue.IngestResult {
		res := failHost("fail.example")(msgs)
		res.Evicted = 2
		return res
	}}
	h := newHandler(ing, nil)
	var out metrics.Buffer
	h.Metrics = metrics.New(&out, "test", nil, nil)
	if _, err := h.Handle(context.Background(), json.RawMessage(readFile(t, "sqs-batch.json"))); err != nil {
		t.Fatal(err)
	}
	docs, err := metrics.Parse(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, tot := range metrics.Totals(docs) {
		got[tot.Name] = tot.Sum()
	}
	// sqs-batch.json: a.example; a cut-short record (one); an array of
	// three with a bad item (all three); c.example and a.example; and
	// fail.example, whose append fails.
	want := map[string]float64{metrics.URLsAccepted.Name: 3, metrics.URLsRejected.Name: 4, metrics.URLsEvicted.Name: 2}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v (all: %v)", name, got[name], v, got)
		}
	}
}
