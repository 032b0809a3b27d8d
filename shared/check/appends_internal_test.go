package check

import "testing"

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
