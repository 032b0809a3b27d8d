package fetch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"golang.org/x/net/idna"
)

// A request over plain HTTP (http://, always HTTP/1.1: there is no h2c) is
// written and its answer read by the caller's own goroutine, on a
// connection the fetcher keeps idle between requests itself, instead of
// through net/http's Transport.
//
// The Transport gives every kept connection two goroutines of its own (a
// read loop and a write loop) and hands each request and response between
// them and the caller over channels. At 10,000 hosts, each with its
// connection kept for its next URL, that was 20,000 goroutines, their
// stacks about as large as the whole heap, and several goroutine switches
// a request. Written here, a request costs one wait on the network, and a
// connection a few kilobytes.
//
// The wire format is net/http's own (http.Request.Write, http.ReadResponse),
// so a host sees the same bytes either way; what this path adds is the
// keeping: which idle connection a request may take, when one is no longer
// fit to (the host closed it while idle, it idled past IdleConnTimeout, its
// last answer said Connection: close or was not read to its end), and the
// bounds the Transport enforced (the header size, the deadline). HTTPS
// (HTTP/2 included) and requests recorded to WARC, whose capture needs the
// Transport's trace hooks, stay on the Transport.

// plainIdleTimeout is how long a plain connection may wait idle before
// it is closed instead of used, as the Transport's IdleConnTimeout.
const plainIdleTimeout = 90 * time.Second

// errPlainHeaderTooLarge is what reading an answer whose header block
// passes maxHeaderBytes fails with.
var errPlainHeaderTooLarge = fmt.Errorf("server response headers exceeded %d bytes; aborted", maxHeaderBytes)

// max1xx is how many 1xx informational answers (103 Early Hints, a 100
// nobody asked for) may come before the real one, on either path: a host
// that sends 1,000 must end the same way with and without --warc.
const max1xx = 5

// errTooMany1xx is what an exchange with more than max1xx informational
// answers fails with: a protocol error, final for the URL.
var errTooMany1xx = fmt.Errorf("more than %d 1xx informational responses before the answer", max1xx)

// plainConn is what a kept plain connection carries besides its socket:
// the address it was dialed for (a request to another port of the host
// must not take it) and, while a request uses it, its buffers.
type plainConn struct {
	addr  string
	limit int64 // bytes the reader may still take; see limitedConn
	// readErr is how the connection's last read failed, nil when none
	// did: bufio hands the parser a partial line ("HTTP/") before the
	// error under it, so the parser's complaint is not the cause.
	readErr error
	br      *bufio.Reader
	bw      *bufio.Writer
	// idleSince is when its last request ended (tracker.mu).
	idleSince time.Time
}

// A connection idle between its host's requests holds no buffer: they
// come from these pools for each request and go back once its answer is
// read to its end (with nothing read past it). At 10,000 hosts, about a
// tenth of them with a request in flight at a time, the buffers kept with
// every connection were 25 MiB.
var (
	plainReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}
	plainWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, writeBufferSize) }}
)

// attach gives the connection c (whose plainConn pc is) its buffers for a
// request.
func (pc *plainConn) attach(c *trackedConn) {
	pc.readErr = nil
	pc.br = plainReaders.Get().(*bufio.Reader)
	pc.br.Reset(limitedConn{c})
	pc.bw = plainWriters.Get().(*bufio.Writer)
	pc.bw.Reset(c)
}

// detach gives the buffers back, empty, as the connection goes idle.
func (pc *plainConn) detach() {
	pc.br.Reset(nil)
	plainReaders.Put(pc.br)
	pc.bw.Reset(nil)
	plainWriters.Put(pc.bw)
	pc.br, pc.bw = nil, nil
}

// limitedConn is the reader under a plain connection's bufio.Reader: while
// an answer's header block is read it passes at most limit bytes, so a
// host cannot make us buffer an endless header.
type limitedConn struct{ c *trackedConn }

func (l limitedConn) Read(p []byte) (int, error) {
	pc := l.c.plain
	if pc.limit <= 0 {
		pc.readErr = errPlainHeaderTooLarge
		return 0, errPlainHeaderTooLarge
	}
	if int64(len(p)) > pc.limit {
		p = p[:pc.limit]
	}
	n, err := l.c.Read(p)
	pc.limit -= int64(n)
	if err != nil {
		pc.readErr = err
	}
	return n, err
}

// headerError is why reading an answer's header block failed: the
// connection's own failure when it was the header cap or a deadline (the
// parser then saw a cut line and would say `malformed HTTP response
// "HTTP/"` or "missing colon"), else the parser's verdict. A connection
// closed mid-line stays the parser's verdict, as on the Transport.
func (pc *plainConn) headerError(err error) error {
	re := pc.readErr
	if re == nil || errors.Is(err, re) {
		return err
	}
	if errors.Is(re, errPlainHeaderTooLarge) || errors.Is(re, os.ErrDeadlineExceeded) {
		return re
	}
	return err
}

// plainAddr is the address a plain request to u dials, as the Transport
// dials it: the host name in ASCII (IDNA) and the port, 80 when the URL
// names none.
func plainAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	host := u.Hostname()
	if ascii, err := idna.Lookup.ToASCII(host); err == nil {
		host = ascii
	}
	return net.JoinHostPort(host, port)
}

// roundTripPlain sends hreq (GET, no body) over a kept or a new plain
// connection and returns its answer once the header block is read. The
// connection is the request's, marked in use in use, until the body is
// closed; the body's Close puts it back idle, or closes it when it is not
// fit for another request.
func (f *Fetcher) roundTripPlain(ctx context.Context, hreq *http.Request, use *connUse) (*http.Response, error) {
	addr := plainAddr(hreq.URL)
	c := f.conns.takePlain(hostKey(hreq.URL.Hostname()), addr, time.Now())
	if c == nil {
		conn, err := f.dial(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		c = conn.(*trackedConn)
		pc := &plainConn{addr: addr}
		if !f.conns.adoptPlain(c, pc) {
			// Closed by CloseHost or the cap between its dial and now:
			// nothing was sent on it.
			c.Close()
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection closed before use")}
		}
	}
	use.hold(c)
	c.plain.attach(c)

	// The request's bound is the connection's deadline while it is the
	// request's; a cancelled context cuts it at once. Neither starts a
	// goroutine.
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		c.Close()
		return nil, ended(ctx, err)
	}
	if err := f.enterGate(ctx, use, hostKey(hreq.URL.Hostname()), c); err != nil {
		return fail(err)
	}

	pc := c.plain
	if err := hreq.Write(pc.bw); err != nil {
		return fail(err)
	}
	if err := pc.bw.Flush(); err != nil {
		return fail(err)
	}
	pc.limit = maxHeaderBytes
	var resp *http.Response
	for informational := 0; ; informational++ {
		r, err := http.ReadResponse(pc.br, hreq)
		if err != nil {
			return fail(pc.headerError(err))
		}
		// 1xx answers (103 Early Hints, a 100 nobody asked for) come
		// before the real one, as the Transport skips them; 101 would be
		// a protocol switch, which a GET of ours never asks for.
		if r.StatusCode >= 100 && r.StatusCode < 200 && r.StatusCode != http.StatusSwitchingProtocols {
			if informational == max1xx {
				return fail(errTooMany1xx)
			}
			pc.limit = maxHeaderBytes
			continue
		}
		resp = r
		break
	}
	pc.limit = 1<<63 - 1
	reusable := !resp.Close && !hreq.Close && resp.StatusCode != http.StatusSwitchingProtocols
	resp.Body = &plainBody{rc: resp.Body, ctx: ctx, c: c, stop: stop, reusable: reusable, eof: resp.Body == http.NoBody}
	return resp, nil
}

// plainBody is a plain answer's body: once read to its end and closed, its
// connection may carry the host's next request.
type plainBody struct {
	rc       io.ReadCloser
	ctx      context.Context
	c        *trackedConn
	stop     func() bool
	reusable bool
	eof      bool
	closed   bool
}

func (b *plainBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.reusable = false
		err = ended(b.ctx, err)
	}
	return n, err
}

// ended says why an exchange failed when the request's context is the
// cause: cancelled, or its deadline passed (the connection's deadline is
// the context's, and may fire a moment before the context's own timer),
// as the Transport's errors say it.
func ended(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	if dl, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}

// Close does not close rc: an http body not read to its end would read the
// rest to discard it, and a body cut at MaxBodyBytes may be far larger.
//
// Close keeps the connection for the host's next request when the answer
// was read to its end, said nothing against keeping it and came within
// the request's bound; otherwise it closes it (an answer left unread would
// be read as the next one's). The connection stays marked in use until
// the request's connUse is done.
func (b *plainBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	cut := !b.stop() // the context ended: a deadline in the past is set
	if !b.eof || !b.reusable || cut || b.c.plain.br.Buffered() > 0 {
		b.c.Close()
		return nil
	}
	b.c.SetDeadline(time.Time{})
	b.c.plain.detach()
	return nil
}
