package localmode

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"golang.org/x/net/netutil"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
	"github.com/urldownloader/urldownloader/shared/runtime/apigw"
	"github.com/urldownloader/urldownloader/shared/runtime/ingesthandler"
)

// Defaults of ServeOptions: the limits that keep serve mode safe to leave
// running on a laptop. A client can hold a connection for at most
// ReadTimeout (reading its request) plus WriteTimeout's remainder (taking
// its answer), then IdleTimeout between requests; at most MaxConns
// connections are open at once, and further ones wait in the kernel's
// accept queue until a slot frees.
const (
	// DefaultReadHeaderTimeout bounds the wait for a request's headers.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds the whole request, body included: a
	// 1 MiB payload (urlmsg.MaxPayloadBytes) needs 70 KB/s.
	DefaultReadTimeout = 15 * time.Second
	// DefaultWriteTimeout runs from the end of the headers to the end of
	// the answer: the body's ReadTimeout, the ingest handler's own 29 s
	// (API Gateway's limit) and a margin.
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout closes a kept-alive connection with no request.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultMaxConns caps open connections: a few kilobytes each, so the
	// cap is about slots, not memory. 500 clients that never send their
	// body are all cut off within 4 × ReadTimeout.
	DefaultMaxConns = 128
	// maxHeaderBytes caps a request's headers (net/http's default is 1 MiB).
	maxHeaderBytes = 64 << 10
)

// ErrTokenRequired is returned by Listen for an address that is not
// loopback when no token is given: anyone on the network could submit.
var ErrTokenRequired = errors.New("a non-loopback listen address needs a bearer token")

// ServeOptions shape serve mode's listener.
type ServeOptions struct {
	// Addr is the address to listen on (host:port; port 0 picks one).
	Addr string
	// AllowedHosts are further names the Host header may carry ("name"
	// with the listen port, or "name:port", e.g. behind a proxy). The
	// listen address's own names are always allowed: for loopback,
	// localhost, 127.0.0.1 and [::1] with the port.
	AllowedHosts []string
	// Token, when set, is the bearer token every request but GET /healthz
	// must carry. Required for an address that is not loopback.
	Token string
	// Zero takes the Default* values above.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	MaxConns                                                  int
}

func (o *ServeOptions) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&o.ReadTimeout, DefaultReadTimeout)
	def(&o.WriteTimeout, DefaultWriteTimeout)
	def(&o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
}

// CheckServeOptions refuses options Listen would refuse, without
// listening: an address that is not loopback with no token.
func CheckServeOptions(o ServeOptions) error {
	host, _, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", o.Addr, err)
	}
	if strings.TrimSpace(o.Token) == "" && !loopbackHost(host) {
		return fmt.Errorf("listen on %s: %w", o.Addr, ErrTokenRequired)
	}
	return nil
}

// loopbackHost tells whether a listen host can only be reached from this
// machine. An empty host, 0.0.0.0 and :: are every address; any other
// name may resolve to a public one.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Server is serve mode: POST /urls, GET /urls/{id} and GET /healthz on a
// listener of its own, with the checks that keep other web pages and
// other machines out. Close it after Run returns, then Close the runtime.
type Server struct {
	rt      *Runtime
	results *resultStore
	ln      net.Listener
	srv     *http.Server
	hosts   map[string]bool // allowed Host values, host:port, lower case
	token   []byte          // SHA-256 of the token; nil: none
	served  chan error
}

// Listen checks the options, listens on opts.Addr and serves until Close.
// It makes sure the state has the results table GET /urls/{id} reads.
func (rt *Runtime) Listen(opts ServeOptions) (*Server, error) {
	if err := CheckServeOptions(opts); err != nil {
		return nil, err
	}
	opts.defaults()
	results, err := rt.serveResults()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", opts.Addr, err)
	}
	// "localhost" is loopback only if it resolved to loopback.
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && strings.TrimSpace(opts.Token) == "" && !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("listen on %s (%s): %w", opts.Addr, tcp.IP, ErrTokenRequired)
	}
	hosts, err := allowedHosts(opts.Addr, ln.Addr(), opts.AllowedHosts)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{rt: rt, results: results, ln: netutil.LimitListener(ln, opts.MaxConns), hosts: hosts, served: make(chan error, 1)}
	if tok := strings.TrimSpace(opts.Token); tok != "" {
		sum := sha256.Sum256([]byte(tok))
		s.token = sum[:]
	}
	s.srv = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(rt.log.Handler(), slog.LevelWarn),
	}
	go func() { s.served <- s.srv.Serve(s.ln) }()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, lets requests in flight finish until ctx ends,
// then drops the connections left.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	if serveErr := <-s.served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// allowedHosts are the Host values a request may carry: the listen
// address's names with its port, and the extra names.
func allowedHosts(addr string, bound net.Addr, extra []string) (map[string]bool, error) {
	host, _, _ := net.SplitHostPort(addr)
	_, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return nil, fmt.Errorf("listen address %s: %w", bound, err)
	}
	ip, ipErr := netip.ParseAddr(host)
	wildcard := host == "" || ipErr == nil && ip.IsUnspecified()
	var names []string
	if !wildcard {
		names = append(names, host)
	}
	if wildcard || loopbackHost(host) {
		names = append(names, "localhost", "127.0.0.1", "::1")
	}
	if wildcard {
		// Every address of the machine, and its name.
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					names = append(names, p.Addr().WithZone("").String())
				}
			}
		}
		if name, err := os.Hostname(); err == nil {
			names = append(names, name)
		}
	}
	hosts := map[string]bool{}
	for _, n := range names {
		hosts[hostKey(n, port)] = true
	}
	for _, e := range extra {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if h, p, err := net.SplitHostPort(e); err == nil {
			hosts[hostKey(h, p)] = true
		} else {
			hosts[hostKey(e, port)] = true
		}
	}
	return hosts, nil
}

// hostKey is host:port in one spelling: lower case, no trailing dot, an
// IPv6 address in brackets.
func hostKey(host, port string) string {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	return net.JoinHostPort(host, port)
}

// requestHost is a Host header (or an Origin's host) as a hostKey, with
// the scheme's default port when it names none.
func requestHost(h, defaultPort string) string {
	if host, port, err := net.SplitHostPort(h); err == nil {
		return hostKey(host, port)
	}
	return hostKey(h, defaultPort)
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/urls", s.serveURLs)
	mux.HandleFunc("GET /urls/{id}", s.serveResult)
	mux.HandleFunc("GET /healthz", s.serveHealth)
	return s.guard(mux)
}

// guard refuses, before any route: a Host that is not this server's (a
// DNS-rebinding page names its own), an Origin that is not this server's
// (another web page's request: no CORS is ever granted, so a preflight is
// refused too), and, with a token, a request without it (but /healthz).
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hosts[requestHost(r.Host, "80")] {
			refuse(w, http.StatusMisdirectedRequest, fmt.Sprintf("Host %q is not this server's: use the listen address, or allow the name with --allowed-host", r.Host))
			return
		}
		if origin, ok := r.Header["Origin"]; ok && !s.ownOrigin(origin[0]) {
			refuse(w, http.StatusForbidden, fmt.Sprintf("Origin %q is not this server's: requests from other web pages are refused", origin[0]))
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			refuse(w, http.StatusForbidden, fmt.Sprintf("Sec-Fetch-Site %q: requests from other web pages are refused", site))
			return
		}
		if r.Method == http.MethodOptions {
			refuse(w, http.StatusForbidden, "no cross-origin request is granted (no CORS)")
			return
		}
		if s.token != nil && !(r.Method == http.MethodGet && r.URL.Path == "/healthz") && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="urldownloader"`)
			refuse(w, http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownOrigin tells whether a browser's Origin is this server's own.
func (s *Server) ownOrigin(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" && u.Path != "/" {
		return false // includes "null"
	}
	port := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	return port != "" && s.hosts[requestHost(u.Host, port)]
}

// authorized compares the bearer token in constant time (hashed first, so
// not even its length shows).
func (s *Server) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.token) == 1
}

// refuse answers code with a JSON message, as the API's own answers are.
func refuse(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"message": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// serveHealth answers GET /healthz: the process serves, and how far the
// run is (counts kept in memory: cheap).
func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	p := s.rt.Progress()
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "expected": p.Expected, "results": p.Results, "pending": p.Backlog})
}

// serveResult answers GET /urls/{id} from the state: 200 with the result's
// line as written to the output, 202 while it is pending, 404 for an id
// this state never accepted through POST /urls (a URL read from --urls is
// found once its result is written).
func (s *Server) serveResult(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	line, known, err := s.results.lookup(r.Context(), id)
	switch {
	case err != nil:
		s.rt.log.ErrorContext(r.Context(), "GET /urls/{id}", "id", id, "error", err)
		refuse(w, http.StatusInternalServerError, err.Error())
	case !known:
		writeJSON(w, http.StatusNotFound, map[string]string{"id": id, "message": "no URL with this id was accepted in this state"})
	case line == nil:
		writeJSON(w, http.StatusAccepted, map[string]string{"id": id, "status": "pending"})
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(line, '\n'))
	}
}

// serveURLs hands POST /urls to the ingest handler, as API Gateway does:
// each request becomes an APIGatewayProxyRequest for HandleAPI, and its
// response is written back (shared/runtime/apigw). A POST must say its
// body is JSON, which no web page can send to another origin without a
// preflight (refused).
// The ids it accepted are pending in the results table before the answer
// names them.
func (s *Server) serveURLs(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			refuse(w, http.StatusUnsupportedMediaType, "send the URLs with Content-Type: application/json")
			return
		}
	}
	// The token stops here: the ingest handler has no use for it.
	r.Header.Del("Authorization")
	// One byte over the limit is enough for the handler to answer 413;
	// the rest is never read into memory.
	body, err := io.ReadAll(io.LimitReader(r.Body, urlmsg.MaxPayloadBytes+1))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	ev := apigw.Request(r, body, apigw.Route{Resource: "/urls", Stage: "local", Arrived: s.rt.clock.Now()})
	resp, err := s.rt.ingest.HandleAPI(r.Context(), ev)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.acceptIDs(r.Context(), resp)
	if err := apigw.WriteResponse(w, resp); err != nil {
		s.rt.log.ErrorContext(r.Context(), "answer POST /urls", "error", err)
	}
}

// acceptIDs records the ids an answer names as pending. A failure is
// logged: the URLs are queued all the same, and their ids are found once
// their results are written.
func (s *Server) acceptIDs(ctx context.Context, resp events.APIGatewayProxyResponse) {
	if resp.StatusCode/100 != 2 || resp.IsBase64Encoded {
		return
	}
	var ar ingesthandler.APIResponse
	if err := json.Unmarshal([]byte(resp.Body), &ar); err != nil || len(ar.IDs) == 0 {
		return
	}
	if err := s.results.accept(context.WithoutCancel(ctx), ar.IDs); err != nil {
		s.rt.log.ErrorContext(ctx, "record accepted ids for GET /urls/{id}", "ids", len(ar.IDs), "error", err)
	}
}
