package engine

import (
	"testing"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/embedded/sqlite"
)

// TestAppendsWatch: an append closes the channel of every watcher of its
// key and of no other, and a watcher that stops leaves nothing behind.
func TestAppendsWatch(t *testing.T) {
	var a Appends
	a.Appended("nobody-watches") // costs nothing, keeps nothing
	ch1, stop1 := a.watch("a")
	ch2, stop2 := a.watch("a")
	other, stopOther := a.watch("b")
	a.Appended("a")
	for i, ch := range []<-chan struct{}{ch1, ch2} {
		select {
		case <-ch:
		default:
			t.Errorf("watcher %d of a not woken by its append", i)
		}
	}
	select {
	case <-other:
		t.Error("watcher of b woken by an append to a")
	default:
	}
	stop1()
	stop2()
	stopOther()
	if n := a.Watched(); n != 0 {
		t.Errorf("%d keys watched after every watcher stopped", n)
	}
	// A watch begun after an append waits for the next one.
	ch3, stop3 := a.watch("a")
	defer stop3()
	select {
	case <-ch3:
		t.Error("a new watch woken by an earlier append")
	default:
	}
}

// TestTellingKeepsBatches: the wrapper of a store that takes a batch's
// appends at once still does (hostqueue.BatchAppender), tells the watchers
// of each host appended to, and takes back the connections kept for it.
func TestTellingKeepsBatches(t *testing.T) {
	s, err := sqlite.NewMemory(time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var a Appends
	ba, ok := a.Telling(s).(hostqueue.BatchAppender)
	if !ok {
		t.Fatal("Telling(a BatchAppender) is not a BatchAppender: ingest would append one host at a time")
	}
	a.drained.keep("a.example", nil, []string{"a.example"})
	ch, stop := a.watch("a.example")
	defer stop()
	out := ba.AppendBatch(t.Context(), []hostqueue.AppendRequest{{Key: "a.example", Limit: 10, Due: time.Now(),
		Entries: []hostqueue.Entry{{ID: "1", URL: "http://a.example/1"}}}})
	if len(out) != 1 || out[0].Err != nil || out[0].Result.Appended != 1 {
		t.Fatalf("outcomes %+v, want one append", out)
	}
	select {
	case <-ch:
	default:
		t.Error("the watcher of a.example not told of its batch append")
	}
	if len(a.drained.hosts) != 0 {
		t.Errorf("connections still kept for a host appended to: %v", a.drained.hosts)
	}
	if _, ok := a.Telling(struct{ hostqueue.Store }{s}).(hostqueue.BatchAppender); ok {
		t.Error("Telling(a store without AppendBatch) claims to take batches")
	}
}
