package demosite

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(b)
}

// TestSharedListeners serves five hosts two to a socket: each keeps its
// own address and its own pages, connections are counted per host, and a
// connection to an address the site does not serve gets nothing.
func TestSharedListeners(t *testing.T) {
	s, err := Start(Options{Hosts: 5, FirstIP: 200, HostsPerListener: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hosts := s.Hosts()
	ports := map[string]bool{}
	ips := map[string]bool{}
	for _, h := range hosts {
		ip, port, _ := net.SplitHostPort(h)
		ports[port], ips[ip] = true, true
	}
	if len(hosts) != 5 || len(ips) != 5 || len(ports) != 3 {
		t.Fatalf("hosts %v: want 5 addresses on 3 ports", hosts)
	}
	c := &http.Client{Transport: &http.Transport{}}
	for _, h := range hosts {
		for i := range 3 {
			u := s.URL(h, i)
			if got, want := get(t, c, u), Body(h, "/page/"+strconv.Itoa(i)); got != want {
				t.Errorf("%s: %q, want %q", u, got, want)
			}
		}
	}
	conns := s.Conns()
	for _, h := range hosts {
		if conns[h] != 1 {
			t.Errorf("%s accepted %d connections, want 1 (kept alive)", h, conns[h])
		}
	}
	by := map[string]int{}
	for _, r := range s.Requests() {
		by[r.Host]++
	}
	for _, h := range hosts {
		if by[h] != 3 {
			t.Errorf("%s logged %d requests, want 3", h, by[h])
		}
	}
	// The first host's port answers on every loopback address; one the
	// site does not serve is hung up on.
	_, port, _ := net.SplitHostPort(hosts[0])
	if _, err := c.Get("http://127.0.9.9:" + port + "/page/0"); err == nil {
		t.Errorf("an address the site does not serve answered")
	}
}

// TestTLSResumption serves hosts over HTTPS with the site's CA: a client
// that trusts it gets the pages, the first connection to a host is a full
// handshake and the next, with the client's session cache, a resumed one.
func TestTLSResumption(t *testing.T) {
	for _, per := range []int{1, 2} {
		s, err := Start(Options{Hosts: 2, FirstIP: 210 + 10*per, TLS: true, HostsPerListener: per})
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(s.CAPEM()) {
			t.Fatal("CAPEM holds no certificate")
		}
		c := &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, ClientSessionCache: tls.NewLRUClientSessionCache(8)},
			DisableKeepAlives: true,
		}}
		for _, h := range s.Hosts() {
			u := s.URL(h, 1)
			if !strings.HasPrefix(u, "https://") {
				t.Fatalf("URL %s is not https", u)
			}
			for range 2 {
				if got := get(t, c, u); got != Body(h, "/page/1") {
					t.Errorf("%s: %q", u, got)
				}
			}
		}
		hs, conns := s.Handshakes(), s.Conns()
		for _, h := range s.Hosts() {
			if hs[h] != (Handshakes{Full: 1, Resumed: 1}) || conns[h] != 2 {
				t.Errorf("%d per listener, %s: %+v over %d connections, want 1 full and 1 resumed over 2", per, h, hs[h], conns[h])
			}
		}
		// Without the CA the certificate is refused.
		if _, err := http.Get(s.URL(s.Hosts()[0], 0)); err == nil {
			t.Errorf("a client without the site's CA was served")
		}
		s.Close()
	}
}
