package engine

import "sync"

// drainedConns keeps the connections of hosts whose session emptied their
// queue while more URLs could still come (Engine.Finished said no), in a
// process whose ingest tells the engine of its appends (Engine.Appends,
// which holds them): kept idle for a later batch of the input, they are
// closed once Finished says yes (CloseFinished), instead of holding memory
// until their idle timeout. A host appended to again leaves them at its
// append, before the ingest that appended returns.
type drainedConns struct {
	mu    sync.Mutex
	hosts map[string]drainedHost
}

type drainedHost struct {
	closer HostCloser
	names  []string
}

// keep notes key's connections, by host name, as kept for now.
func (d *drainedConns) keep(key string, c HostCloser, names []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hosts == nil {
		d.hosts = map[string]drainedHost{}
	}
	d.hosts[key] = drainedHost{closer: c, names: names}
}

// forget drops key: a session of it began, which owns its connections.
func (d *drainedConns) forget(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.hosts, key)
}

// CloseFinished closes the connections kept by hosts drained earlier that
// Engine.Finished now says get no more URLs: for a caller whose input
// just ended (local mode). A host appended to, or whose session began,
// since its connections were kept is not among them.
func (e *Engine) CloseFinished() {
	if e.Finished == nil || e.Appends == nil {
		return
	}
	d := &e.Appends.drained
	d.mu.Lock()
	defer d.mu.Unlock()
	for key, h := range d.hosts {
		if !e.Finished(key) {
			continue
		}
		for _, n := range h.names {
			h.closer.CloseHost(n)
		}
		delete(d.hosts, key)
	}
}
