// Package fetchtest is an in-memory network for tests of code that fetches:
// servers listen on addresses of a Network, a fetch.Fetcher dials them
// through fetch.Options.Network, and no socket is opened. Servers, fetcher
// and the code under test can so run in one testing/synctest bubble, whose
// clock is virtual: it moves only when every goroutine of the bubble waits,
// so a test of delays, back-off and timeouts takes milliseconds and sees
// exact times. (A goroutine blocked on a real socket never counts as
// waiting, which is why loopback cannot be used there.)
package fetchtest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"sync"
	"syscall"
)

// Network is a set of in-memory listeners by "ip:port". The zero Network
// is ready to use; it is safe for concurrent use.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*Listener
	nextPort  int
}

var _ interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
} = (*Network)(nil)

// Listen returns a listener on ip (an IPv4 or IPv6 literal) at a port of
// its own.
func (n *Network) Listen(ip string) *Listener {
	addr := netip.MustParseAddr(ip)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners, n.nextPort = map[string]*Listener{}, 40000
	}
	n.nextPort++
	l := &Listener{
		net:    n,
		addr:   net.TCPAddrFromAddrPort(netip.AddrPortFrom(addr, uint16(n.nextPort))),
		conns:  make(chan net.Conn),
		closed: make(chan struct{}),
	}
	n.listeners[l.addr.String()] = l
	return l
}

// DialContext connects to the listener at address ("ip:port"). An address
// nobody listens on is refused as a closed TCP port is (ECONNREFUSED).
func (n *Network) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[address]
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if l == nil {
		return nil, refused
	}
	client, server := net.Pipe()
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1024}
	select {
	case l.conns <- conn{server, l.addr, local}:
		return conn{client, local, l.addr}, nil
	case <-l.closed:
		return nil, refused
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
}

// Listener is one in-memory listening address; see Network.Listen.
type Listener struct {
	net       *Network
	addr      *net.TCPAddr
	conns     chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
}

// Accept waits for a connection, or returns net.ErrClosed once closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops listening: dials are refused from now on.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.net.mu.Lock()
		delete(l.net.listeners, l.addr.String())
		l.net.mu.Unlock()
		close(l.closed)
	})
	return nil
}

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.addr }

// conn is one end of a net.Pipe with TCP addresses, as servers log them.
type conn struct {
	net.Conn
	local, remote net.Addr
}

func (c conn) LocalAddr() net.Addr  { return c.local }
func (c conn) RemoteAddr() net.Addr { return c.remote }

// NewServer starts an HTTP server for h on a new address of ip. Close it
// (t.Cleanup) before the test's bubble ends: its goroutines must end too.
func (n *Network) NewServer(ip string, h http.Handler) *httptest.Server {
	s := n.NewUnstartedServer(ip, h)
	s.Start()
	return s
}

// NewUnstartedServer is NewServer not yet started: set it up, then call
// Start or StartTLS (httptest's self-signed certificate, which a fetcher
// rejects as it would a real one).
func (n *Network) NewUnstartedServer(ip string, h http.Handler) *httptest.Server {
	return &httptest.Server{Listener: n.Listen(ip), Config: &http.Server{Handler: h}}
}
