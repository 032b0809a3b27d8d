package standalone

// Progress is a live view of a run, for a progress line.
type Progress struct {
	// Expected counts the URLs owed a result in this run so far, Results
	// the results written; Backlog those still owed one.
	Expected, Results, Backlog int
	// Requests counts the HTTP requests sent so far, InFlight those not
	// answered yet.
	Requests, InFlight int64
	// Hosts counts the host workers at work now (each works one host).
	Hosts int
}

// Progress returns the run's progress now. It is safe to call while Run
// runs.
func (rt *Runtime) Progress() Progress {
	var p Progress
	t := rt.tally
	t.mu.Lock()
	p.Expected, p.Results, p.Backlog = t.expected, t.results, t.owed
	t.mu.Unlock()
	p.Requests, p.InFlight = rt.requests.Load(), rt.inFlight.Load()
	for _, e := range rt.engines {
		n, _ := e.Workers()
		p.Hosts += n
	}
	return p
}
