package standalone

import (
	"sync"

	"github.com/urldownloader/urldownloader/shared/result"
	"github.com/urldownloader/urldownloader/shared/urlmsg"
)

// tally follows which accepted URLs still owe a result. The run ends when
// none does: the store cannot say it sooner, because a drained host keeps
// its last round queued while its worker lingers for late URLs.
type tally struct {
	follow bool // FollowCrossHostRedirects: a redirect's target owes a result too

	mu         sync.Mutex
	need       map[string]string   // id -> URL: accepted, no result written yet
	got        map[string]struct{} // ids with a result written in this process
	expected   int
	byStatus   map[result.Status]int
	results    int
	duplicates int
	// doneElsewhere counts the URLs another process finished.
	doneElsewhere int
	// empty gets a value whenever need becomes empty.
	empty chan struct{}
}

func newTally(followRedirects bool) *tally {
	return &tally{follow: followRedirects, need: map[string]string{}, got: map[string]struct{}{},
		byStatus: map[result.Status]int{}, empty: make(chan struct{}, 1)}
}

// expect adds URLs that owe a result (id -> URL), unless they have one
// already. It returns how many it added.
func (t *tally) expect(want map[string]string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id, u := range want {
		if _, ok := t.got[id]; ok {
			continue
		}
		if _, ok := t.need[id]; ok {
			continue
		}
		t.need[id] = u
		t.expected++
		n++
	}
	return n
}

// forget drops URLs that were not accepted after all (a failed ingest).
func (t *tally) forget(ids []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if _, ok := t.need[id]; ok {
			delete(t.need, id)
			t.expected--
		}
	}
	t.signal()
}

// seen takes results that are written.
func (t *tally) seen(rs []result.Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range rs {
		t.results++
		if _, dup := t.got[r.ID]; dup {
			t.duplicates++
			continue
		}
		t.got[r.ID] = struct{}{}
		t.byStatus[r.Status]++
		delete(t.need, r.ID)
		// The engine queues a cross-host redirect's target under this id
		// (worker.redirect) before the redirect's result goes out.
		if t.follow && r.Status == result.StatusRedirect && r.Error == "" && r.Location != "" {
			id := urlmsg.MakeID(r.ID, 0, r.Location)
			if _, ok := t.got[id]; !ok {
				if _, ok := t.need[id]; !ok {
					t.need[id] = r.Location
					t.expected++
				}
			}
		}
	}
	t.signal()
}

func (t *tally) signal() {
	if len(t.need) == 0 {
		select {
		case t.empty <- struct{}{}:
		default:
		}
	}
}

func (t *tally) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.need)
}

// missing returns the URLs still owed a result, by id.
func (t *tally) missing() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]string, len(t.need))
	for id, u := range t.need {
		out[id] = u
	}
	return out
}

// unseen returns the entries of want that have no result written.
func (t *tally) unseen(want map[string]string) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for id, u := range want {
		if _, ok := t.got[id]; !ok {
			out[id] = u
		}
	}
	return out
}

// settle drops the URLs owed a result that are no longer queued (queued:
// the store's queued entries by id): another process finished them.
func (t *tally) settle(queued map[string]string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id := range t.need {
		if _, ok := queued[id]; !ok {
			delete(t.need, id)
			n++
		}
	}
	t.doneElsewhere += n
	t.signal()
	return n
}

func (t *tally) elsewhere() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.doneElsewhere
}
