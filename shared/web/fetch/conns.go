package fetch

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/idna"
)

// ErrConnLimit is what a dial fails with when the fetcher already has
// Options.MaxConns connections open, idle ones closed first. It is
// KindLocal: the caller runs more requests at once than it said it would,
// which is no fault of the host.
var ErrConnLimit = errors.New("connection cap reached")

type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// connTracker knows every connection a fetcher has open, by the host name
// it was dialed for, and whether a request is using it, so that:
//   - CloseHost can close the connections of a host the caller is done
//     with, and the idle pool holds only hosts that still have URLs due;
//   - with a cap (Options.MaxConns), a dial beyond it closes the
//     connection idle the longest instead of failing: a Lambda function
//     has 1,024 file descriptors, and running out of them mid-run would
//     fail healthy hosts (EMFILE) instead of this one request.
//
// A request marks its connection in use from the moment the transport
// hands it over (httptrace's GotConn, see Fetcher.roundTrip) until its body
// is closed; in between, no one closes it.
type connTracker struct {
	max int64 // 0: no cap
	// maxIdle caps the plain connections kept idle (0: no cap).
	maxIdle int
	open    atomic.Int64
	// closeIdle frees the pool's idle connections, the last resort of a
	// full cap (a connection dialed for a request that gave up waits
	// idle in the pool without ever having been handed to one).
	closeIdle func()

	dials, staleRetries atomic.Int64

	mu     sync.Mutex
	byHost map[string]map[*trackedConn]struct{}
	// idle holds the connections whose last request ended, the one idle
	// the longest at the front.
	idle list.List
}

func newConnTracker(max int) *connTracker {
	return &connTracker{max: int64(max), byHost: map[string]map[*trackedConn]struct{}{}}
}

// hostKey is the form hosts are tracked in: the URL's host name as the
// transport dials it (IDNA ASCII), lowercase, no trailing dot or brackets.
func hostKey(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ascii, err := idna.Lookup.ToASCII(host); err == nil {
		host = ascii
	}
	return tableKey(host)
}

func (t *connTracker) take() bool {
	if t.max <= 0 {
		t.open.Add(1)
		return true
	}
	if t.open.Add(1) <= t.max {
		return true
	}
	t.open.Add(-1)
	return false
}

// dial wraps next: a connection is tracked from the dial to its Close.
func (t *connTracker) dial(next dialFunc) dialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if !t.take() && (!t.closeOldestIdle() || !t.take()) {
			t.closeIdle()
			t.closePlainIdle()
			if !t.take() {
				return nil, &net.OpError{Op: "dial", Net: network,
					Err: fmt.Errorf("%w: %d connections open (Options.MaxConns)", ErrConnLimit, t.max)}
			}
		}
		conn, err := next(ctx, network, address)
		if err != nil {
			t.open.Add(-1)
			return nil, err
		}
		t.dials.Add(1)
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address
		}
		c := &trackedConn{Conn: conn, tracker: t, host: hostKey(host)}
		t.mu.Lock()
		set := t.byHost[c.host]
		if set == nil {
			set = map[*trackedConn]struct{}{}
			t.byHost[c.host] = set
		}
		set[c] = struct{}{}
		t.mu.Unlock()
		return c, nil
	}
}

// trackedConn is one connection; its state is guarded by tracker.mu.
type trackedConn struct {
	net.Conn
	tracker *connTracker
	host    string
	inUse   int           // requests using it (HTTP/2 carries several)
	idleAt  *list.Element // in tracker.idle while no request uses it
	// closeWanted: CloseHost asked while a request used it; it closes
	// when the last one ends.
	closeWanted bool
	// stale: closed by the tracker while idle in the transport's pool,
	// which drops it only once its read loop notices. A request handed
	// a stale connection has sent nothing yet (see Fetcher.roundTrip).
	stale bool
	// gone: closed and forgotten; a request that held it must not put it
	// back among the idle.
	gone bool
	once sync.Once
	// plain is set on a connection of the fetcher's own plain HTTP path
	// (plain.go), which keeps it idle itself; nil on the Transport's.
	plain *plainConn
}

// Close closes the connection and forgets it, once.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		t := c.tracker
		t.mu.Lock()
		c.gone = true
		if set := t.byHost[c.host]; set != nil {
			delete(set, c)
			if len(set) == 0 {
				delete(t.byHost, c.host)
			}
		}
		if c.idleAt != nil {
			t.idle.Remove(c.idleAt)
			c.idleAt = nil
		}
		t.mu.Unlock()
		t.open.Add(-1)
	})
	return err
}

// tracked finds the trackedConn under conn as the transport hands it to a
// request: itself, or under TLS.
func tracked(conn net.Conn) *trackedConn {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	c, _ := conn.(*trackedConn)
	return c
}

// acquire marks c in use by one more request; false when c is stale.
func (t *connTracker) acquire(c *trackedConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.stale {
		return false
	}
	c.inUse++
	if c.idleAt != nil {
		t.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
	return true
}

// release ends one request's use of c: c goes idle, or closes if CloseHost
// asked meanwhile.
func (t *connTracker) release(c *trackedConn) {
	t.mu.Lock()
	c.inUse--
	if c.inUse > 0 || c.gone {
		t.mu.Unlock()
		return
	}
	if c.closeWanted {
		c.stale = true
		t.mu.Unlock()
		c.Close()
		return
	}
	c.idleAt = t.idle.PushBack(c)
	if c.plain != nil {
		c.plain.idleSince = time.Now()
	}
	// The plain path's pool is the tracker's: as many idle as the
	// Transport would keep, the one idle the longest closed first.
	var over *trackedConn
	if t.maxIdle > 0 && t.idle.Len() > t.maxIdle {
		for e := t.idle.Front(); e != nil; e = e.Next() {
			if oldest := e.Value.(*trackedConn); oldest.plain != nil {
				over = oldest
				t.retireIdle(over)
				break
			}
		}
	}
	t.mu.Unlock()
	if over != nil {
		over.Close()
	}
}

// adoptPlain makes c, just dialed, a plain connection in use by its
// request; false when it was closed meanwhile.
func (t *connTracker) adoptPlain(c *trackedConn, pc *plainConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.stale || c.gone {
		return false
	}
	c.plain = pc
	c.inUse++
	return true
}

// takePlain hands over an idle plain connection to addr (of host, as
// hostKey gives it), marked in use; nil when there is none fit for a
// request. A connection idle past plainIdleTimeout, or that its host has
// closed or written to while it idled, is closed instead: a request sent
// on it would fail without the host having seen it.
func (t *connTracker) takePlain(host, addr string, now time.Time) *trackedConn {
	for {
		var c, unfit *trackedConn
		t.mu.Lock()
		for cand := range t.byHost[host] {
			if cand.plain == nil || cand.plain.addr != addr || cand.inUse > 0 || cand.stale || cand.gone {
				continue
			}
			c = cand
			break
		}
		if c == nil {
			t.mu.Unlock()
			return nil
		}
		if c.idleAt != nil {
			t.idle.Remove(c.idleAt)
			c.idleAt = nil
		}
		c.inUse++
		if now.Sub(c.plain.idleSince) > plainIdleTimeout {
			unfit = c
		}
		t.mu.Unlock()
		if unfit == nil && idleConnAlive(c.Conn) {
			return c
		}
		c.Close() // ours (in use): no one else closes or hands it out
	}
}

// retireIdle takes c, idle, out of the idle list and marks it stale, for
// the caller to close once t.mu is released.
func (t *connTracker) retireIdle(c *trackedConn) {
	c.stale = true
	if c.idleAt != nil {
		t.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
}

// closeHost closes host's connections: idle ones now, one in use when its
// last request ends.
func (t *connTracker) closeHost(host string) {
	var closing []*trackedConn
	t.mu.Lock()
	for c := range t.byHost[hostKey(host)] {
		if c.inUse > 0 {
			c.closeWanted = true
			continue
		}
		t.retireIdle(c)
		closing = append(closing, c)
	}
	t.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// closePlainIdle closes every idle plain connection (the Transport closes
// its own).
func (t *connTracker) closePlainIdle() {
	var closing []*trackedConn
	t.mu.Lock()
	for e := t.idle.Front(); e != nil; {
		next := e.Next()
		if c := e.Value.(*trackedConn); c.plain != nil {
			t.retireIdle(c)
			closing = append(closing, c)
		}
		e = next
	}
	t.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}

// closeOldestIdle closes the connection idle the longest; false if none is.
func (t *connTracker) closeOldestIdle() bool {
	t.mu.Lock()
	front := t.idle.Front()
	if front == nil {
		t.mu.Unlock()
		return false
	}
	c := front.Value.(*trackedConn)
	t.retireIdle(c)
	t.mu.Unlock()
	c.Close()
	return true
}

// connUse is what one request was handed: the connections it holds in
// use, and whether one was stale.
type connUse struct {
	t     *connTracker
	mu    sync.Mutex
	held  []*trackedConn
	stale bool
	// passes are the gate passes the request holds (Options.Gate), left
	// with status, the answer's, when it is done.
	passes []GatePass
	status int
}

// got is httptrace's GotConn: the transport handed the request conn. It
// reports whether the request holds conn now (false: a stale one, which
// carries nothing).
func (u *connUse) got(conn net.Conn) bool {
	c := tracked(conn)
	if c == nil {
		return true
	}
	ok := u.t.acquire(c)
	u.mu.Lock()
	if ok {
		u.held = append(u.held, c)
	} else {
		u.stale = true
	}
	u.mu.Unlock()
	return ok
}

// hold records c, already acquired (the plain path takes its connection
// itself), as held by the request.
func (u *connUse) hold(c *trackedConn) {
	u.mu.Lock()
	u.held = append(u.held, c)
	u.mu.Unlock()
}

// done releases the connections the request held.
func (u *connUse) done() {
	u.mu.Lock()
	held, passes := u.held, u.passes
	u.held, u.passes = nil, nil
	u.mu.Unlock()
	for _, c := range held {
		u.t.release(c)
	}
	for _, p := range passes {
		p.Leave(u.status)
	}
}

// onlyStale reports a request handed stale connections only: it reached
// no host, so sending it again cannot make one see it twice. (Call it
// before done.)
func (u *connUse) onlyStale() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stale && len(u.held) == 0
}
