package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
)

// ErrConnLimit is what a dial fails with when the fetcher already has
// Options.MaxConns connections open, idle ones closed first. It is
// KindLocal: the caller runs more requests at once than it said it would,
// which is no fault of the host.
var ErrConnLimit = errors.New("connection cap reached")

type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// connCap counts the connections a fetcher has open, in use or idle in the
// pool, and refuses a dial beyond max: a Lambda function has 1,024 file
// descriptors, and running out of them mid-run would fail healthy hosts
// (EMFILE) instead of this one request.
type connCap struct {
	max  int64
	open atomic.Int64
	// closeIdle frees the pool's idle connections: they are the only ones a
	// full cap can give back without failing a request.
	closeIdle func()
}

func (c *connCap) take() bool {
	if c.open.Add(1) <= c.max {
		return true
	}
	c.open.Add(-1)
	return false
}

// dial wraps next: a connection is counted from the dial to its Close.
func (c *connCap) dial(next dialFunc) dialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		if !c.take() {
			c.closeIdle()
			if !c.take() {
				return nil, &net.OpError{Op: "dial", Net: network,
					Err: fmt.Errorf("%w: %d connections open (Options.MaxConns)", ErrConnLimit, c.max)}
			}
		}
		conn, err := next(ctx, network, address)
		if err != nil {
			c.open.Add(-1)
			return nil, err
		}
		return &countedConn{Conn: conn, release: func() { c.open.Add(-1) }}, nil
	}
}

// countedConn gives its slot back once, on the first Close.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
