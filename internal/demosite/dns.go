package demosite

// A DNS server on loopback for sites whose hosts are names (VHosts): it
// answers every A question with one address and every
// AAAA question with none, and counts what it is asked, so a run measures
// the fetcher's lookups through its real resolver path (the DNS cache's
// stub resolver, over UDP) instead of a fixed table.

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// dnsTTL is the answers' TTL: longer than any run, so a cache that keeps
// answers asks once a name.
const dnsTTL = 3600

// DNSServer is a running DNS server.
type DNSServer struct {
	srv     *dns.Server
	addr    string
	answer  func(name string) netip.Addr
	queries atomic.Int64
	mu      sync.Mutex
	names   map[string]bool
}

// StartDNS serves DNS on 127.0.0.1, a port of its own, over UDP, every
// name resolving to answer, until Close.
func StartDNS(answer netip.Addr) (*DNSServer, error) {
	return StartDNSBy(func(string) netip.Addr { return answer })
}

// StartDNSBy is StartDNS with each name's address given by answer (a
// VHosts' AddrOf); the name comes without its trailing dot.
func StartDNSBy(answer func(name string) netip.Addr) (*DNSServer, error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("dns server: %w", err)
	}
	s := &DNSServer{addr: pc.LocalAddr().String(), answer: answer, names: map[string]bool{}}
	started := make(chan struct{})
	s.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(s.serve), NotifyStartedFunc: func() { close(started) }}
	failed := make(chan error, 1)
	go func() { failed <- s.srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-failed:
		return nil, fmt.Errorf("dns server: %w", err)
	case <-time.After(10 * time.Second):
		_ = s.srv.Shutdown()
		return nil, fmt.Errorf("dns server: did not start in 10 s")
	}
	return s, nil
}

func (s *DNSServer) serve(w dns.ResponseWriter, req *dns.Msg) {
	s.queries.Add(1)
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	for _, q := range req.Question {
		s.mu.Lock()
		s.names[strings.ToLower(q.Name)] = true
		s.mu.Unlock()
		if a := s.answer(strings.TrimSuffix(q.Name, ".")); q.Qtype == dns.TypeA && a.Is4() {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: dnsTTL},
				A:   net.IP(a.AsSlice()),
			})
		}
	}
	_ = w.WriteMsg(m)
}

// Addr is the server's "ip:port".
func (s *DNSServer) Addr() string { return s.addr }

// Queries is the messages answered (a lookup asks A and AAAA: two).
func (s *DNSServer) Queries() int64 { return s.queries.Load() }

// Names is the distinct names asked.
func (s *DNSServer) Names() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.names)
}

// Close stops the server.
func (s *DNSServer) Close() { _ = s.srv.Shutdown() }
