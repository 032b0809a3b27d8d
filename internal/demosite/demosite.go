// Package demosite serves a small website on several loopback addresses
// (127.0.0.2, 127.0.0.3, ...: every 127/8 address is loopback on Linux, so
// each is a distinct host without DNS), and records every request with the
// server's own timestamps, so tests and benchmarks can check politeness from
// the site's side. StartHostile serves the misbehaving hosts of the real web
// beside it (refusing, hanging, dripping, resetting, bad robots.txt,
// redirect loops, a name that does not resolve), each with the ending a
// correct downloader gives its URLs.
package demosite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options shape a site.
type Options struct {
	// Hosts is how many loopback hosts to serve; they get 127.0.0.(FirstIP+i).
	Hosts int
	// FirstIP is the last octet of the first host (default 2).
	FirstIP int
	// Latency is added to every response (a small fixed server time).
	Latency time.Duration
	// Robots, when set, is served as /robots.txt on every host; otherwise
	// robots.txt is 404 (allow everything).
	Robots string
	// Handler, when set, serves every path except /robots.txt instead of the
	// default pages (tests use it for special routes).
	Handler http.Handler
	// Listen, when set, opens each host's listener on ip instead of a
	// loopback socket: tests on a virtual clock pass an in-memory
	// network's (fetchtest.Network.Listen).
	Listen func(ip string) (net.Listener, error)
}

// Request is one request as the server saw it.
type Request struct {
	Host  string    `json:"host"`
	Path  string    `json:"path"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Site is a running demo site.
type Site struct {
	opts    Options
	hosts   []string
	servers []*http.Server

	mu       sync.Mutex
	requests []Request
}

// Start serves the site until Close.
func Start(opts Options) (*Site, error) {
	if opts.Hosts < 1 {
		opts.Hosts = 1
	}
	if opts.FirstIP == 0 {
		opts.FirstIP = 2
	}
	if opts.FirstIP < 2 || opts.FirstIP-2+opts.Hosts > 250*250 {
		return nil, fmt.Errorf("demo site: %d hosts do not fit in 127.0.0.0/8 from .%d", opts.Hosts, opts.FirstIP)
	}
	s := &Site{opts: opts}
	for i := 0; i < opts.Hosts; i++ {
		// Last octets stay in 2..251 so no host is a .0, .1 or .255.
		n := opts.FirstIP - 2 + i
		ip := fmt.Sprintf("127.0.%d.%d", n/250, n%250+2)
		listen := opts.Listen
		if listen == nil {
			listen = func(ip string) (net.Listener, error) { return net.Listen("tcp", ip+":0") }
		}
		ln, err := listen(ip)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("demo site: listen on %s: %w", ip, err)
		}
		host := ln.Addr().String()
		srv := &http.Server{Handler: s.handler(host), ReadHeaderTimeout: 10 * time.Second}
		s.hosts = append(s.hosts, host)
		s.servers = append(s.servers, srv)
		go func() { _ = srv.Serve(ln) }()
	}
	return s, nil
}

// Hosts returns the served host:port names.
func (s *Site) Hosts() []string { return append([]string(nil), s.hosts...) }

// URL returns the URL of page i on host h.
func (s *Site) URL(h string, i int) string { return fmt.Sprintf("http://%s/page/%d", h, i) }

// URLs returns pages 0..perHost-1 of every host.
func (s *Site) URLs(perHost int) []string {
	var out []string
	for _, h := range s.hosts {
		for i := 0; i < perHost; i++ {
			out = append(out, s.URL(h, i))
		}
	}
	return out
}

// Body is the body the default handler serves for host and path, so a test
// can check that a result carries the right page.
func Body(host, path string) string {
	return fmt.Sprintf("demo page %s%s\n", host, path)
}

func (s *Site) handler(host string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() {
			s.mu.Lock()
			s.requests = append(s.requests, Request{Host: host, Path: r.URL.Path, Start: start, End: time.Now()})
			s.mu.Unlock()
		}()
		if s.opts.Latency > 0 {
			time.Sleep(s.opts.Latency)
		}
		if r.URL.Path == "/robots.txt" {
			if s.opts.Robots == "" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(s.opts.Robots))
			return
		}
		if s.opts.Handler != nil {
			s.opts.Handler.ServeHTTP(w, r)
			return
		}
		if serveLarge(w, r) || serveText(w, r) {
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/page/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(Body(host, r.URL.Path)))
	})
}

// Requests returns every request seen so far, in arrival order per host.
func (s *Site) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]Request(nil), s.requests...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Gap is the smallest spacing seen on one host: from the end of one
// response to the start of the next request (the politeness rule).
type Gap struct {
	Host     string
	Min      time.Duration
	Requests int
}

// Gaps returns, per host with at least two requests, the smallest gap
// between a response's end and the next request's start.
func Gaps(reqs []Request) map[string]Gap {
	by := map[string][]Request{}
	for _, r := range reqs {
		by[r.Host] = append(by[r.Host], r)
	}
	out := map[string]Gap{}
	for h, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Start.Before(rs[j].Start) })
		g := Gap{Host: h, Requests: len(rs), Min: -1}
		for i := 1; i < len(rs); i++ {
			d := rs[i].Start.Sub(rs[i-1].End)
			if g.Min < 0 || d < g.Min {
				g.Min = d
			}
		}
		if len(rs) > 1 {
			out[h] = g
		}
	}
	return out
}

// MinGap is the smallest gap over all hosts (-1 when no host had two
// requests).
func MinGap(reqs []Request) (time.Duration, string) {
	min, host := time.Duration(-1), ""
	for h, g := range Gaps(reqs) {
		if min < 0 || g.Min < min {
			min, host = g.Min, h
		}
	}
	return min, host
}

// Close stops every host.
func (s *Site) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range s.servers {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = srv.Close()
		}
	}
}

// PageIndex parses the page number of a default page path ("/page/7").
func PageIndex(path string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(path, "/page/"))
	return n, err == nil && strings.HasPrefix(path, "/page/")
}

// SkewedURLs is the skewed, shuffled workload of the reference design's
// integration test: the first few hosts get many pages, the rest one or
// two, all shuffled reproducibly from seed.
func (s *Site) SkewedURLs(many int, seed uint64) []string {
	var out []string
	for i, h := range s.hosts {
		n := 1 + i%2
		switch {
		case i < 3:
			n = many
		case i < 10:
			n = max(many/4, 1)
		}
		for p := 0; p < n; p++ {
			out = append(out, s.URL(h, p))
		}
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
