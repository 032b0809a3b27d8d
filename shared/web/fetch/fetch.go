// Package fetch performs exactly one HTTP GET for the downloader and reports
// precisely what happened. It is safe to point at URLs submitted by anyone:
// it connects only to public addresses on allowed ports unless its
// AddressPolicy opens more (checked at dial time), never follows redirects, never uses a proxy, bounds the whole
// request by a timeout and keeps at most MaxBodyBytes of the decoded body.
//
// Scheduling, per-host delays, retries and redirect following belong to the
// caller (the check engine); Fetch gives it the facts to decide: the status,
// Retry-After, the absolute Location, and a typed *Error with a Kind.
package fetch

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/body"
	"github.com/urldownloader/urldownloader/shared/web/coding"
	"github.com/urldownloader/urldownloader/shared/web/warc"
)

// Defaults applied by New to zero-valued Options fields.
const (
	// DefaultTimeout matches StormCrawler's http.timeout: long enough for a
	// slow page, short enough that one host cannot stall a check run.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxBodyBytes matches Colly's MaxBodySize (10 MiB).
	DefaultMaxBodyBytes int64 = 10 << 20
	// DefaultUserAgent is sent when Options.UserAgent is empty, so a site's
	// operator always sees who we are instead of Go's generic client name.
	DefaultUserAgent = "urldownloader/1.0"
	// DefaultMaxIdleConns is how many connections wait idle for their
	// host's next request without Options.MaxConns: one for each of
	// 10,000 hosts fetched at once, so a host's URLs share one
	// connection. The caller's CloseHost keeps the pool to the hosts
	// that still have URLs due; it needs as many file descriptors.
	DefaultMaxIdleConns = 10_000
	// MaxConnsPerHost is the most connections the fetcher opens to one
	// host (scheme, name and port), and keeps idle for it: the most
	// requests a caller may have in flight to one host (a HostRules rule's
	// connections, at most 16: params.MaxConnections). A host requested one
	// request at a time uses one of them. More would queue in the
	// transport, their timeouts running, instead of reaching the host.
	MaxConnsPerHost = 16
	// minTLSSessions is the least TLS sessions kept for resumption.
	minTLSSessions = 1024
)

// The buffers kept with every connection, the Transport's and the plain
// path's:
//   - a request is a line and a few headers, well under 1 KiB (a longer one
//     is written in pieces): the default 4 KiB write buffer kept with every
//     pooled connection was 30 MiB at 10,000 hosts;
//   - the read buffer carries a response's status line and headers (a body
//     is read in larger pieces, which pass it by): 2 KiB holds a usual
//     header in one read, and a longer one is read in more. The default
//     4 KiB was 40 MiB at 10,000 kept connections.
const (
	writeBufferSize = 1 << 10
	readBufferSize  = 2 << 10
)

// maxHeaderBytes caps the response header block: a server that sends
// megabytes of headers is refused as a protocol error instead of buffered.
const maxHeaderBytes = 256 << 10

// Options configures a Fetcher. The zero value is usable: New fills in the
// defaults above and allows ports 80 and 443 on public addresses only.
type Options struct {
	// UserAgent is sent on every request; its product token (up to the
	// first '/') is also what robots.txt groups are matched against.
	UserAgent string
	// Timeout bounds the whole request: connect, TLS, headers and body.
	Timeout time.Duration
	// MaxBodyBytes caps the decoded body kept; more is cut and Truncated set.
	MaxBodyBytes int64
	// Addresses says which addresses beyond the public internet the
	// fetcher may connect to (see AddressPolicy); the zero value, public
	// addresses on AllowedPorts only, is the one for submitted URLs.
	Addresses AddressPolicy
	// AllowPrivate also opens the private set (AddressPolicy.OpenPrivate:
	// loopback, RFC 1918, CGNAT, unique local, on every port), as local
	// mode's --allow-private does; never link-local or a metadata address.
	AllowPrivate bool
	// AllowedPorts are the destination ports allowed; default {80, 443}.
	AllowedPorts []int
	// Resolve, when set, replaces DNS, as curl's --resolve does: host names
	// are looked up in this table (case-insensitive, trailing dot ignored)
	// and their addresses dialed in order; a name the table lacks fails as
	// "no such host", exactly like an NXDOMAIN answer (KindDNS, permanent).
	// For the local stack and tests, which must send no DNS query; nil in
	// production, where DNS answers. The address guard judges the table's
	// addresses as it judges DNS answers. It bypasses DNS.
	Resolve map[string][]netip.Addr
	// DNS is the cache that resolves host names (see DNSCache); nil means
	// the process's shared one (DefaultDNSCache), so every fetcher of a
	// process shares its answers. Set it to name other nameservers
	// (DNSCacheOptions.Servers) or, in tests, to count and time answers.
	// Unused with Resolve, and with Network unless set.
	DNS *DNSCache
	// MaxConns, when above zero, caps the connections the fetcher holds open
	// at once, in use and idle; every one of them may wait idle for its
	// host's next request. A dial beyond the cap first closes the
	// connection idle the longest (then, if none is known, every idle
	// one), and fails as KindLocal (ErrConnLimit) only when all MaxConns
	// carry requests, so a caller that runs fewer requests at once never
	// meets it. Zero means no cap (DefaultMaxIdleConns idle).
	MaxConns int
	// Network, when set, replaces the operating system's network: every
	// connection is dialed through it (after Resolve, or DNS when set,
	// and the address guard, which judge its addresses as they judge a
	// socket's; with neither, names reach it unresolved). For tests only (see fetchtest.Network: in-memory connections, so a
	// whole exchange can run on a testing/synctest bubble's virtual
	// clock); nil everywhere else.
	Network Dialer
	// Archive, when set, is given every exchange that got an answer, as
	// transferred (the request as sent, the status line and headers as
	// received, the payload before its content coding is undone, the
	// remote address): WARC output. Response.Warc then says where it
	// went. Nil captures nothing and costs nothing.
	Archive Archive
	// Gate, when set, is met by every request once its connection is
	// known, a new or a reused one, before anything is written on it: the
	// politeness gate of the connection's remote address (package
	// server's, through the engine). Its wait is bounded by the request's
	// context; the pass is left when the body is closed.
	Gate Gate
	// viaTransport sends plain HTTP through net/http's Transport too, as
	// HTTPS is: tests compare the two paths with it.
	viaTransport bool
}

// Gate spaces requests per server address (Options.Gate).
type Gate interface {
	// EnterConn waits until a request to host may go over a connection to
	// addr, or ctx ends; the request leaves the pass once it is over.
	EnterConn(ctx context.Context, host string, addr netip.Addr) (GatePass, error)
}

// GatePass is one request's place at a gate.
type GatePass interface {
	// Leave ends the request, whose answer had status (0 without one).
	Leave(status int)
}

// ServerAddr is the address a request to host is dialed at first: an IP
// literal itself, the Resolve table's first, else the DNS cache's first
// answer (looked up if need be, or from the cache only when cachedOnly).
// false when it is not known. The engine uses it to claim the address's
// gate before a request; the connection's real address decides (Gate).
func (f *Fetcher) ServerAddr(ctx context.Context, host string, cachedOnly bool) (netip.Addr, bool) {
	host = hostKey(host)
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), true
	}
	var addrs []netip.Addr
	switch {
	case f.table != nil:
		addrs, _ = f.table.lookup(ctx, "tcp", host)
	case f.dns != nil && cachedOnly:
		addrs, _ = f.dns.Cached(host)
	case f.dns != nil:
		addrs, _ = f.dns.lookup(ctx, "tcp", host)
	}
	if len(addrs) == 0 {
		return netip.Addr{}, false
	}
	return addrs[0].Unmap(), true
}

// remoteAddr is conn's remote IP address, if it has one.
func remoteAddr(conn net.Conn) (netip.Addr, bool) {
	if conn == nil || conn.RemoteAddr() == nil {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap(), true
}

// enterGate meets the gate of conn's remote address for a request to host
// (Options.Gate), holding the pass in use until done.
func (f *Fetcher) enterGate(ctx context.Context, use *connUse, host string, conn net.Conn) error {
	if f.opts.Gate == nil {
		return nil
	}
	a, ok := remoteAddr(conn)
	if !ok {
		return nil
	}
	pass, err := f.opts.Gate.EnterConn(ctx, host, a)
	if err != nil {
		return fmt.Errorf("wait for server %s (ServerDelay): %w", a, err)
	}
	use.mu.Lock()
	use.passes = append(use.passes, pass)
	use.mu.Unlock()
	return nil
}

// Dialer makes connections; *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Request is one GET. ETag and LastModified, when set, make it conditional
// (If-None-Match / If-Modified-Since) so an unchanged page costs a 304.
type Request struct {
	URL          string
	ETag         string
	LastModified string
	// MaxBodyBytes, when above zero, replaces Options.MaxBodyBytes for this
	// request: robots.txt must be read to at least 500 KiB (RFC 9309 §2.5)
	// whatever the cap on pages, without a second fetcher and its pool.
	MaxBodyBytes int64
	// Store, when set with InlineBytes above zero and below the body cap,
	// takes a body longer than InlineBytes as it is read: the bytes read
	// so far and then the rest stream into Store.Put (up to the cap), so a
	// body of any allowed size never sits whole in memory. Response.Stored
	// then says where it went and Body is nil. The upload is part of the
	// request: Options.Timeout bounds it too.
	Store       body.Store
	InlineBytes int64
}

// Response is what the server answered, whatever the status: 3xx, 4xx and
// 5xx are responses, not errors, so the caller can apply its own policy.
type Response struct {
	HTTPStatus  int
	ContentType string
	// Body is the decoded body (every coding of package coding undone),
	// at most MaxBodyBytes (the request's, else the Options') long.
	Body []byte
	// Encoding is the Content-Encoding of a body passed on as sent,
	// because it names a coding the fetcher does not undo; empty when the
	// body is decoded.
	Encoding string
	// Stored is where a body longer than Request.InlineBytes was put
	// (Request.Store); nil when the body is in Body.
	Stored *body.Ref
	// Truncated is set when the decoded body was longer than MaxBodyBytes.
	Truncated bool
	// ETag and LastModified are the validators to send back next time.
	ETag         string
	LastModified string
	// Location is the Location header resolved against the request URL, or
	// empty when absent or unparseable (the raw value stays in Header).
	Location string
	// RetryAfter is the Retry-After header as a wait from now (the injected
	// clock); a date in the past gives 0. RetryAfterSet tells "Retry-After:
	// 0" apart from no or an invalid header.
	RetryAfter    time.Duration
	RetryAfterSet bool
	// Header holds all response headers as received.
	Header http.Header
	// Warc is where Options.Archive wrote the exchange's response (or
	// revisit) record; nil without an Archive.
	Warc *warc.Ref
}

// Fetcher performs GETs over one shared transport, so connections to a host
// are kept alive between the requests a check run makes to it. It is safe for
// concurrent use.
type Fetcher struct {
	opts      Options
	now       func() time.Time
	transport *http.Transport
	client    *http.Client
	conns     *connTracker
	dns       *DNSCache // nil with Options.Resolve, or a Network alone
	table     hostTable // Options.Resolve's
	// dial opens a tracked connection (guard, DNS cache, cap): the
	// Transport's and the plain path's (plain.go).
	dial dialFunc

	tlsFull, tlsResumed atomic.Int64
}

// New returns a Fetcher. now is the clock Retry-After dates are measured
// against; nil means time.Now.
func New(opts Options, now func() time.Time) *Fetcher {
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if len(opts.AllowedPorts) == 0 {
		opts.AllowedPorts = defaultPorts
	}
	// The guard closes over its own copy: a caller reusing the slice must
	// not be able to widen the policy afterwards.
	opts.AllowedPorts = slices.Clone(opts.AllowedPorts)
	if now == nil {
		now = time.Now
	}

	dialer := &net.Dialer{
		KeepAlive: 30 * time.Second,
		// The guard runs on the resolved address of every connection, so no
		// host name, redirect target or DNS answer can lead past it.
		Control: dialControl(opts),
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	var through Dialer = dialer
	if opts.Network != nil {
		through = guardedNetwork{opts.Network, dialer.Control}
	}
	dial := dialFunc(through.DialContext)
	var cache *DNSCache
	var table hostTable
	switch {
	case opts.Resolve != nil:
		table = newHostTable(opts.Resolve)
		dial = resolvingDial(table.lookup, through)
	case opts.DNS != nil || opts.Network == nil:
		// A test's Network without a DNS cache gets names as they are
		// (and its guard refuses them): no query leaves its bubble.
		cache = cmp.Or(opts.DNS, DefaultDNSCache())
		dial = resolvingDial(cache.lookup, through)
	}
	conns := newConnTracker(max(opts.MaxConns, 0))
	dial = conns.dial(dial)
	maxIdle := DefaultMaxIdleConns
	if opts.MaxConns > 0 {
		maxIdle = opts.MaxConns
	}
	conns.maxIdle = maxIdle
	f := &Fetcher{opts: opts, now: now, conns: conns, dns: cache, table: table, dial: dial}
	transport := &http.Transport{
		// No proxy, deliberately, even if HTTP_PROXY is set: through a
		// proxy we would dial the proxy's address, the guard would check
		// that instead of the target's, and the proxy would reach private
		// networks on our behalf.
		Proxy:       nil,
		DialContext: dial,
		Protocols:   protocols,
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			// A connection opened again to a host (its idle one closed,
			// by the host, CloseHost or the cap) resumes its TLS session
			// instead of a full handshake: one for each host the pool
			// can hold.
			ClientSessionCache: tls.NewLRUClientSessionCache(max(maxIdle, minTLSSessions)),
			// Runs after the certificate checks, on every handshake, a
			// resumed one too: only counts.
			VerifyConnection: f.countHandshake,
		},
		TLSHandshakeTimeout: opts.Timeout,
		// Compression is negotiated and undone by us, so MaxBodyBytes caps
		// the decoded size; the transport's transparent gzip would hide
		// how much a small compressed body expands to.
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxHeaderBytes,
		WriteBufferSize:        writeBufferSize,
		ReadBufferSize:         readBufferSize,
		MaxIdleConns:           maxIdle,
		// A caller paces its requests per host and, for most hosts, makes
		// one at a time, which one connection per host (scheme, name and
		// port) carries: the transport opens another only while one is
		// busy. A host given several connections by its HostRules rule has
		// that many requests in flight, each on its own connection, kept
		// idle between them (see MaxConnsPerHost).
		MaxIdleConnsPerHost: MaxConnsPerHost,
		MaxConnsPerHost:     MaxConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
	}
	conns.closeIdle = transport.CloseIdleConnections
	f.transport = transport
	f.client = &http.Client{
		Transport: transport,
		// The caller follows redirects itself, through its per-host queues
		// and robots checks; we hand back the 3xx with Location.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return f
}

func (f *Fetcher) countHandshake(cs tls.ConnectionState) error {
	if cs.DidResume {
		f.tlsResumed.Add(1)
	} else {
		f.tlsFull.Add(1)
	}
	return nil
}

// OpenConns is how many connections the fetcher holds open, in use and
// idle.
func (f *Fetcher) OpenConns() int { return int(f.conns.open.Load()) }

// CloseHost closes the connections to host (a URL's Hostname: every
// scheme and port of that name), so the idle pool keeps only hosts that
// still have URLs due. The caller calls it when it is done with a host
// for now: its session ended and no request to it is in flight. An idle
// connection closes at once; one carrying a request closes when that
// request ends, so a request is never cut. A request that the transport
// hands a connection closed this way (its pool drops it a moment later)
// is sent on a new one: it had sent nothing, so the host sees it once.
func (f *Fetcher) CloseHost(host string) { f.conns.closeHost(host) }

// Stats are a Fetcher's counters since New, for benchmarks and logs.
type Stats struct {
	// Dials is the connections opened (TCP connects that succeeded).
	Dials int64
	// OpenConns is the connections open now, in use and idle.
	OpenConns int64
	// TLSFull and TLSResumed count the TLS handshakes done: full ones,
	// and those that resumed a kept session.
	TLSFull, TLSResumed int64
	// StaleRetries is the requests sent again because the connection
	// they were handed had been closed by CloseHost or the cap.
	StaleRetries int64
	// DNS is the counters of the fetcher's DNS cache, shared by every
	// fetcher that uses it (the process's, unless Options.DNS); zero
	// with Options.Resolve.
	DNS DNSStats
}

// Stats returns the fetcher's counters: cheap atomic reads.
func (f *Fetcher) Stats() Stats {
	s := Stats{
		Dials:        f.conns.dials.Load(),
		OpenConns:    f.conns.open.Load(),
		TLSFull:      f.tlsFull.Load(),
		TLSResumed:   f.tlsResumed.Load(),
		StaleRetries: f.conns.staleRetries.Load(),
	}
	if f.dns != nil {
		s.DNS = f.dns.Stats()
	}
	return s
}

// CloseIdleConnections closes kept-alive connections, for example before a
// Lambda invocation returns and the environment may be frozen.
func (f *Fetcher) CloseIdleConnections() {
	f.transport.CloseIdleConnections()
	f.conns.closePlainIdle()
}

// Fetch performs one GET of req.URL. It returns a *Response for any HTTP
// answer (including 3xx, 4xx and 5xx), or a nil Response and an *Error whose
// Kind says why no answer was received. The whole call, body included, is
// bounded by Options.Timeout and by ctx.
func (f *Fetcher) Fetch(ctx context.Context, req Request) (*Response, error) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, &Error{Kind: KindBadURL, Op: "parse url", URL: req.URL, Err: err}
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		// Refused before any connection: file:, gopher: or ftp: would let a
		// submitted URL reach things no web page should.
		return nil, &Error{Kind: KindDenied, Op: "check scheme", URL: req.URL,
			Err: fmt.Errorf("scheme %q is not allowed (only http and https)", u.Scheme)}
	}
	if u.Hostname() == "" {
		return nil, &Error{Kind: KindBadURL, Op: "parse url", URL: req.URL, Err: errors.New("no host")}
	}
	// The fragment is never sent; dropping it keeps Location resolution
	// and error messages about what was actually requested.
	u.Fragment, u.RawFragment = "", ""

	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()

	hreq, resp, use, capt, err := f.roundTrip(ctx, u.String(), req)
	if err != nil {
		return nil, err
	}
	defer capt.close()
	// Released once the body is closed (defers run last first): until
	// then the connection is the request's, and CloseHost leaves it.
	use.status = resp.StatusCode
	defer use.done()
	// Closing without draining on truncation drops the connection instead
	// of downloading the rest: the right trade for an oversized body.
	defer resp.Body.Close()
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		// RFC 9110 section 15 defines 100-599 only; net/http reads any
		// three digits. A 600 or 999 is no status the engine can act on,
		// and read as a server error it would be retried as transient.
		return nil, &Error{Kind: KindProtocol, Op: "read status", URL: req.URL,
			Err: fmt.Errorf("status %d is outside 100-599", resp.StatusCode)}
	}

	limit := f.opts.MaxBodyBytes
	if req.MaxBodyBytes > 0 {
		limit = req.MaxBodyBytes
	}
	contentType := resp.Header.Get("Content-Type")
	var data []byte
	var stored *body.Ref
	var truncated bool
	if capt != nil {
		capt.tee(resp)
	}
	if req.Store != nil && req.InlineBytes > 0 && req.InlineBytes < limit {
		data, stored, truncated, err = readOrStore(ctx, resp, limit, req.InlineBytes, req.Store, contentType)
	} else {
		data, truncated, err = readBody(resp, limit)
	}
	if err != nil {
		if re, ok := errors.AsType[*body.ReadError](err); ok || stored == nil && !isStoreError(err) {
			if ok {
				err = re.Err
			}
			return nil, f.wrap(ctx, "read body", req.URL, err)
		}
		if cerr := ctx.Err(); cerr != nil {
			// The request's own bound ran out while the body was being
			// stored (the upload is part of the request): a timeout like
			// a slow body's, counted against the URL's attempts, so a body
			// that can never be kept in time ends instead of coming back.
			return nil, f.wrap(ctx, "store body", req.URL, fmt.Errorf("%w: %w", cerr, err))
		}
		// The body arrived but could not be kept: not the host's failure.
		// The URL stays queued and is fetched again (see KindLocal).
		return nil, &Error{Kind: KindLocal, Op: "store body", URL: req.URL, Err: err}
	}

	var archived *warc.Ref
	if capt != nil {
		ref, err := f.opts.Archive.Exchange(ctx, capt.exchange(u.String(), hreq, resp, req, truncated))
		if err != nil {
			// The answer arrived but could not be archived: not the
			// host's failure, and no result may go out without its
			// record. The URL stays queued (see KindLocal).
			return nil, &Error{Kind: KindLocal, Op: "archive", URL: req.URL, Err: err}
		}
		archived = &ref
	}

	out := &Response{
		Warc:         archived,
		HTTPStatus:   resp.StatusCode,
		ContentType:  contentType,
		Body:         data,
		Stored:       stored,
		Truncated:    truncated,
		ETag:         resp.Header.Get("ETag"),
		LastModified: resp.Header.Get("Last-Modified"),
		Header:       resp.Header,
		Encoding:     undecoded(resp),
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		if lu, err := hreq.URL.Parse(loc); err == nil {
			out.Location = lu.String()
		}
	}
	out.RetryAfter, out.RetryAfterSet = parseRetryAfter(resp.Header.Get("Retry-After"), f.now())
	return out, nil
}

// roundTrip sends the GET and returns the response with the connection
// use it holds (to release once the body is closed).
//
// net/http silently sends a GET again on a new connection when a
// kept-alive one dies before answering, so the server would see two
// requests with no delay between them. A request whose Body is neither
// nil nor http.NoBody (and has no GetBody) is not replayable; the
// transport still probes the empty body, finds EOF at once and sends a
// plain GET with no body. The failure then comes back as a connection
// error, which the caller paces and retries like any other.
//
// The one exception is ours: a connection CloseHost (or the cap) closed
// while idle can be handed out before the transport's pool drops it. The
// request then wrote nothing to any host, so it is sent once more, on a
// new connection.
func (f *Fetcher) roundTrip(ctx context.Context, rawURL string, req Request) (*http.Request, *http.Response, *connUse, *capture, error) {
	for try := 0; ; try++ {
		use := &connUse{t: f.conns}
		n1xx := 0
		host := hostKey(hreqHost(rawURL))
		gotConn := func(conn net.Conn) {
			if !use.got(conn) {
				return
			}
			if err := f.enterGate(ctx, use, host, conn); err != nil {
				// Nothing is written on it: the request fails with
				// ctx's error, as it would have waiting for a dial.
				conn.Close()
			}
		}
		trace := &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { gotConn(info.Conn) },
			// The Transport's own bound on 1xx answers is the header
			// size, 10,000 of them fit: the plain path's count holds
			// here too (max1xx).
			Got1xxResponse: func(int, textproto.MIMEHeader) error {
				if n1xx++; n1xx > max1xx {
					return errTooMany1xx
				}
				return nil
			},
		}
		var capt *capture
		if f.opts.Archive != nil {
			capt = newCapture(f.now())
			trace.GotConn = func(info httptrace.GotConnInfo) {
				gotConn(info.Conn)
				capt.gotConn(info.Conn)
			}
			trace.WroteHeaderField = capt.wroteField
		}
		tctx := httptrace.WithClientTrace(ctx, trace)
		hreq, err := http.NewRequestWithContext(tctx, http.MethodGet, rawURL, nil)
		if err != nil {
			capt.close()
			return nil, nil, nil, nil, &Error{Kind: KindBadURL, Op: "build request", URL: req.URL, Err: err}
		}
		hreq.Header.Set("User-Agent", f.opts.UserAgent)
		hreq.Header.Set("Accept", "*/*")
		hreq.Header.Set("Accept-Encoding", coding.Accept)
		if req.ETag != "" {
			hreq.Header.Set("If-None-Match", req.ETag)
		}
		if req.LastModified != "" {
			hreq.Header.Set("If-Modified-Since", req.LastModified)
		}
		var resp *http.Response
		if capt == nil && hreq.URL.Scheme == "http" && !f.opts.viaTransport {
			resp, err = f.roundTripPlain(ctx, hreq, use)
		} else {
			hreq.Body = io.NopCloser(strings.NewReader(""))
			resp, err = f.client.Do(hreq)
		}
		if err == nil {
			return hreq, resp, use, capt, nil
		}
		again := try == 0 && use.onlyStale() && ctx.Err() == nil
		use.done()
		capt.close()
		if again {
			f.conns.staleRetries.Add(1)
			continue
		}
		return nil, nil, nil, nil, f.wrap(ctx, "request", req.URL, err)
	}
}

// hreqHost is rawURL's host name, empty when it does not parse.
func hreqHost(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Size is the body's length as kept: in Body or in the store.
func (r *Response) Size() int64 {
	if r.Stored != nil {
		return r.Stored.Bytes
	}
	return int64(len(r.Body))
}

// wrap turns a transport or body error into an *Error. The *url.Error layer
// is dropped because our Error already names the URL; a guard refusal from
// the dial hook keeps its own message, which names the address and the rule.
func (f *Fetcher) wrap(ctx context.Context, op, rawURL string, err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	if fe, ok := errors.AsType[*Error](err); ok && fe.Kind == KindDenied {
		return &Error{Kind: KindDenied, Op: "dial", URL: rawURL, Err: fe.Err}
	}
	kind := classify(err)
	if kind == KindTimeout && (errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded)) {
		err = fmt.Errorf("no complete answer within %s: %w", f.opts.Timeout, err)
	}
	return &Error{Kind: kind, Op: op, URL: rawURL, Err: err}
}
