package localmode

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// TestRecordStaysBeforeUncommittedResults: the results file's record never
// passes a result whose URL the state has not committed, so a run stopped
// between the two (a state disk full while the record still fits, or
// kill -9) finds it past the offset next time and does not write it twice.
func TestRecordStaysBeforeUncommittedResults(t *testing.T) {
	out, err := os.Create(filepath.Join(t.TempDir(), "out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	u := newUnsettled(func() time.Time { return now })
	lw := newLineWriter(out, nil)
	lw.unsettled = u
	files := &stateFiles{out: out, synced: lw.Synced, unsettled: u}
	engine := settling{Publisher: lw, u: u, synced: lw.Synced}
	ctx := context.Background()
	publish := func(ids ...string) {
		t.Helper()
		var rs []result.Result
		for _, id := range ids {
			rs = append(rs, result.Result{ID: id, URL: "http://a.example/" + id, Status: result.StatusFetched})
		}
		if err := engine.Publish(ctx, rs); err != nil {
			t.Fatal(err)
		}
	}
	recorded := func() int64 { files.measure(); return files.rec.Size }

	publish("a1", "a2")
	u.committed(hostqueue.Commit{Done: []string{"a1", "a2"}})
	afterA := lw.Synced()
	if got := recorded(); got != afterA {
		t.Fatalf("all committed: record at %d, want the synced end %d", got, afterA)
	}
	publish("b1")
	publish("c1")
	u.committed(hostqueue.Commit{Done: []string{"c1"}})
	if got := recorded(); got != afterA {
		t.Errorf("b1 published, not committed: record at %d, want %d (before b1's line)", got, afterA)
	}
	ids, err := idsFrom(out, recorded())
	if err != nil || !ids["b1"] {
		t.Errorf("the next run would read %v (%v) past the record, want b1 among them", ids, err)
	}
	u.committed(hostqueue.Commit{Refreshed: []hostqueue.Refresh{{ID: "b1"}}})
	if got := recorded(); got != lw.Synced() {
		t.Errorf("b1 rescheduled: record at %d, want the synced end %d", got, lw.Synced())
	}
	// A result not the engine's (a URL refused at entry) does not hold
	// the record back.
	if err := lw.Publish(ctx, []result.Result{{ID: "refused", URL: "http://b.example/", Status: result.StatusDenied}}); err != nil {
		t.Fatal(err)
	}
	if got := recorded(); got != lw.Synced() {
		t.Errorf("a refused URL's result: record at %d, want the synced end %d", got, lw.Synced())
	}
	// One no commit names (a redirect target evicted) holds it back for
	// settleWithin only.
	publish("evicted")
	held := recorded()
	now = now.Add(settleWithin)
	if got := recorded(); got <= held || got != lw.Synced() {
		t.Errorf("an evicted URL's result after %v: record at %d, want the synced end %d", settleWithin, got, lw.Synced())
	}
}

// TestWrittenKeysCarrySeq: a result an earlier run wrote past its record is
// not written again, but a refreshing URL's next result (same id, next
// seq) is.
func TestWrittenKeysCarrySeq(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if err := os.WriteFile(path, []byte(`{"id":"r","seq":1,"url":"http://a.example/"}`+"\n"+`{"id":"p","url":"http://a.example/p"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lw := newLineWriter(f, nil)
	if lw.written, err = idsFrom(f, 0); err != nil {
		t.Fatal(err)
	}
	rs := []result.Result{
		{ID: "r", Seq: 1, URL: "http://a.example/"},
		{ID: "p", URL: "http://a.example/p"},
		{ID: "r", Seq: 2, URL: "http://a.example/"},
	}
	if err := lw.Publish(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	got := readResults(t, path)
	if len(got) != 3 || got[2].ID != "r" || got[2].Seq != 2 {
		t.Errorf("results file holds %+v, want r#1 and p once each, then r#2", got)
	}
}
