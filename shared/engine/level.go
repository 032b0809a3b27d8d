package engine

import "sync"

// level is a flag that goroutines can wait on: raised returns a channel
// closed while the flag is up. Lingering workers sleep on the engine's
// "a run wants worker slots" level instead of waking every second to look:
// at 10,000 lingering hosts those wake-ups were 5% of the CPU.
type level struct {
	mu sync.Mutex
	n  int           // raisers: runs whose latest dispatch left a host waiting
	ch chan struct{} // closed while n > 0
}

// add counts a raiser in (+1) or out (-1).
func (l *level) add(d int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	was := l.n > 0
	l.n += d
	switch up := l.n > 0; {
	case up && !was:
		if l.ch == nil {
			l.ch = make(chan struct{})
		}
		close(l.ch)
	case !up && was:
		l.ch = make(chan struct{})
	}
}

// raised returns a channel that is closed while the level is up, and gets
// closed when it goes up.
func (l *level) raised() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == nil {
		l.ch = make(chan struct{})
		if l.n > 0 {
			close(l.ch)
		}
	}
	return l.ch
}

// up tells whether the level is up.
func (l *level) up() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n > 0
}

// pulse wakes every goroutine waiting on it, once a signal: runs whose
// dispatch left due hosts waiting for room sleep on the engine's "room
// made" pulse (a worker gave back its slot or its admitted rate) instead
// of the rest of their tick.
type pulse struct {
	mu sync.Mutex
	ch chan struct{} // closed by the next signal; nil until waited on
}

// signal wakes the goroutines waiting now.
func (p *pulse) signal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil {
		close(p.ch)
		p.ch = nil
	}
}

// wait returns a channel closed by the next signal.
func (p *pulse) wait() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		p.ch = make(chan struct{})
	}
	return p.ch
}
