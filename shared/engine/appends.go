package engine

import (
	"context"
	"sync"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
)

// Appends connects a process's ingest to its lingering workers (see
// Engine.Appends): the store wrapper that appends calls Appended with the
// host's key, and the host's lingering worker, waiting on watch, takes the
// new URLs up at once. A key nobody watches costs nothing.
type Appends struct {
	mu sync.Mutex
	// waiting holds, per key, the channel its watchers wait on; closed and
	// removed at the next append.
	waiting map[string]*watchers
	// drained are the connections of emptied hosts kept for a later
	// batch (Engine.CloseFinished); an append to the host takes them
	// back for its next session.
	drained drainedConns
}

type watchers struct {
	ch chan struct{}
	n  int
}

// Appended tells the watchers of key that its queue grew.
func (a *Appends) Appended(key string) {
	a.drained.forget(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	if w, ok := a.waiting[key]; ok {
		close(w.ch)
		delete(a.waiting, key)
	}
}

// watch returns a channel closed at key's next append, and the function
// that stops watching (so a host that leaves its linger leaves no entry).
func (a *Appends) watch(key string) (<-chan struct{}, func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting == nil {
		a.waiting = map[string]*watchers{}
	}
	w, ok := a.waiting[key]
	if !ok {
		w = &watchers{ch: make(chan struct{})}
		a.waiting[key] = w
	}
	w.n++
	return w.ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if cur, ok := a.waiting[key]; ok && cur == w {
			if w.n--; w.n == 0 {
				delete(a.waiting, key)
			}
		}
	}
}

// Watched is how many hosts are waiting for an append now.
func (a *Appends) Watched() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.waiting)
}

// Telling wraps the store ingest appends through, so that every append
// tells a: the store of an Ingester running in the engine's process.
// A store that takes a batch's appends at once (hostqueue.BatchAppender)
// keeps doing so through the wrapper.
func (a *Appends) Telling(s hostqueue.Store) hostqueue.Store {
	if _, ok := s.(hostqueue.BatchAppender); ok {
		return tellingBatch{telling{Store: s, appends: a}}
	}
	return telling{Store: s, appends: a}
}

type tellingBatch struct{ telling }

func (t tellingBatch) AppendBatch(ctx context.Context, reqs []hostqueue.AppendRequest) []hostqueue.AppendOutcome {
	out := t.Store.(hostqueue.BatchAppender).AppendBatch(ctx, reqs)
	for i, o := range out {
		if o.Err == nil {
			t.appends.Appended(reqs[i].Key)
		}
	}
	return out
}

type telling struct {
	hostqueue.Store
	appends *Appends
}

func (t telling) Append(ctx context.Context, req hostqueue.AppendRequest) (hostqueue.AppendResult, error) {
	res, err := t.Store.Append(ctx, req)
	if err == nil {
		t.appends.Appended(req.Key)
	}
	return res, err
}
