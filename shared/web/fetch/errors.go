package fetch

import (
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// Kind classifies why a fetch failed, so the caller can decide between
// "retry later", "give up" and "refused by policy" without parsing messages.
type Kind int

// The kinds of fetch failure. KindOther is the zero value on purpose: an
// error that was never classified must not look like a known, retryable one.
const (
	// KindOther: not an error from this package, or nil.
	KindOther Kind = iota
	// KindDenied: the address or port guard refused the connection before any
	// byte was sent, or the scheme is not http/https. Never retry.
	KindDenied
	// KindBadURL: the URL could not be parsed or has no host. Never retry.
	KindBadURL
	// KindTimeout: Options.Timeout (or the caller's context deadline) ran out
	// while connecting, waiting for headers or reading the body.
	KindTimeout
	// KindConnection: the connection was refused, reset, closed early or the
	// network was unreachable.
	KindConnection
	// KindDNS: the host name could not be resolved. Transient only when the
	// resolver says so (IsTransient); "no such host" is permanent.
	KindDNS
	// KindTLS: the TLS handshake failed (bad certificate, no common protocol,
	// alert from the server).
	KindTLS
	// KindProtocol: the server's answer was not valid HTTP (malformed status
	// line, headers too large, broken chunking or content encoding).
	KindProtocol
	// KindCanceled: the caller's context was canceled; the server is not to
	// blame, so the caller should not record a failure against the host.
	KindCanceled
	// KindLocal: this process ran out of a local resource before any byte
	// reached the host: file descriptors (EMFILE, ENFILE), kernel buffers or
	// memory for a socket, or the fetcher's own connection cap
	// (Options.MaxConns). The host is not to blame and the URL was not
	// tried: the caller should stop, keep the URL queued and report the
	// error as its own, not count it against the host or the URL.
	KindLocal
)

var kindNames = [...]string{
	KindOther:      "other",
	KindDenied:     "denied",
	KindBadURL:     "bad_url",
	KindTimeout:    "timeout",
	KindConnection: "connection",
	KindDNS:        "dns",
	KindTLS:        "tls",
	KindProtocol:   "protocol",
	KindCanceled:   "canceled",
	KindLocal:      "local",
}

// String returns a short stable name ("timeout", "denied", ...) fit for logs
// and the result message's error text.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Error is the only error type Fetch returns; read it with errors.As or
// KindOf. Err keeps the underlying chain (net.OpError, net.DNSError, ...) so
// errors.As on it still works.
type Error struct {
	Kind Kind
	// Op is the step that failed: "parse url", "dial", "request", "read body".
	Op string
	// URL is the requested URL, empty for CheckAddress.
	URL string
	Err error
}

// Error formats as "get <url>: <op>: <cause>", so one line in a log or a
// result message says what was fetched, which step failed and why.
func (e *Error) Error() string {
	var b strings.Builder
	if e.URL != "" {
		b.WriteString("get ")
		b.WriteString(e.URL)
		b.WriteString(": ")
	}
	b.WriteString(e.Op)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap gives errors.Is/As access to the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of err: the Kind of the first *Error in its chain,
// or a best-effort classification of a raw transport error, or KindOther.
func KindOf(err error) Kind {
	if err == nil {
		return KindOther
	}
	if fe, ok := errors.AsType[*Error](err); ok {
		return fe.Kind
	}
	return classify(err)
}

// IsTransient reports whether trying the same URL again later may succeed:
// timeouts, connection failures and temporary DNS failures. Denials, bad
// URLs, TLS and protocol errors will fail the same way next time, and a
// canceled context is the caller's own decision. KindLocal is not transient
// either: it says nothing about the host, so it must not be retried as a
// failure of the host (see KindLocal).
func IsTransient(err error) bool {
	switch KindOf(err) {
	case KindTimeout, KindConnection:
		return true
	case KindDNS:
		if de, ok := errors.AsType[*net.DNSError](err); ok {
			return de.IsTemporary || de.IsTimeout
		}
		return false
	default:
		return false
	}
}

// classify maps an error from the transport or the body reader to a Kind.
// Order matters: a guard refusal travels inside a *net.OpError, and a DNS
// timeout is both a DNS error and a timeout (we call it a timeout).
func classify(err error) Kind {
	if fe, ok := errors.AsType[*Error](err); ok {
		return fe.Kind
	}
	if errors.Is(err, context.Canceled) {
		return KindCanceled
	}
	// Before the dial and timeout cases below: a socket that could not be
	// made comes back as a dial *net.OpError, which would read as the
	// host's connection failure.
	if isLocal(err) {
		return KindLocal
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT) {
		return KindTimeout
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return KindTimeout
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return KindDNS
	}
	if isTLSError(err) {
		return KindTLS
	}
	if isDecodeError(err) {
		return KindProtocol
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN),
		errors.Is(err, syscall.ENETDOWN),
		errors.Is(err, syscall.EPIPE),
		// The server closed the connection before or in the middle of its
		// answer: a dropped connection, not a malformed one.
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF):
		return KindConnection
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "dial" {
		// Any other failure to connect (no route, address in use, ...).
		return KindConnection
	}
	// What is left from an exchange that got a connection is net/http
	// rejecting what the server sent; those errors are untyped strings.
	return KindProtocol
}

// isLocal reports a failure of this process's own resources: descriptors
// (per process and system-wide), socket buffers, memory, and the fetcher's
// connection cap.
func isLocal(err error) bool {
	return errors.Is(err, ErrConnLimit) ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}

// isDecodeError reports a body whose Content-Encoding does not match its
// bytes: the server sent something other than it declared.
func isDecodeError(err error) bool {
	if _, ok := errors.AsType[*decodeError](err); ok {
		return true
	}
	if _, ok := errors.AsType[flate.CorruptInputError](err); ok {
		return true
	}
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, zlib.ErrHeader) || errors.Is(err, zlib.ErrChecksum) || errors.Is(err, zlib.ErrDictionary)
}

// isTLSError recognises handshake failures. The typed ones come from
// certificate checks; alerts from the server arrive as a *net.OpError with
// Op "remote error", and local handshake failures are plain errors whose
// text starts with "tls:" (crypto/tls exports no type for them).
func isTLSError(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.AlertError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "remote error" {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), "tls: ") {
			return true
		}
	}
	return false
}
