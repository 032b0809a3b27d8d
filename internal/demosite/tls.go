package demosite

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// siteTLS is a site's test CA and each host's server configuration: a
// certificate for the host's IP address (its only SAN) and a handshake
// counter. The hosts share one leaf key and one session ticket key, so a
// client's ticket from one connection resumes on the next.
type siteTLS struct {
	caPEM   []byte
	configs map[string]*tls.Config // by IP
	count   func(host string, resumed bool)
}

// newSiteTLS generates the CA (ECDSA P-256, valid for a day) and a
// certificate per IP; count is called once per completed handshake.
func newSiteTLS(ips []string, count func(host string, resumed bool)) (*siteTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("demo site: CA key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "urldownloader demo site test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("demo site: CA certificate: %w", err)
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("demo site: host key: %w", err)
	}
	var ticketKey [32]byte
	if _, err := rand.Read(ticketKey[:]); err != nil {
		return nil, err
	}
	t := &siteTLS{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), configs: map[string]*tls.Config{}}
	for i, ip := range ips {
		leaf := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i) + 2),
			Subject:      pkix.Name{CommonName: ip},
			IPAddresses:  []net.IP{net.ParseIP(ip)},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &leafKey.PublicKey, caKey)
		if err != nil {
			return nil, fmt.Errorf("demo site: certificate for %s: %w", ip, err)
		}
		cfg := &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: leafKey}},
			NextProtos:   []string{"http/1.1"},
			MinVersion:   tls.VersionTLS12,
		}
		cfg.SetSessionTicketKeys([][32]byte{ticketKey})
		t.configs[ip] = cfg
	}
	// The counter needs the host (ip:port), known once listening: each
	// listener's configurations get it then (listenerConfig).
	t.count = count
	return t, nil
}

// listenerConfig is the TLS configuration of a listener serving hosts
// (ip:port): a shared listener picks each handshake's host by the
// connection's local address.
func (t *siteTLS) listenerConfig(hosts []string) (*tls.Config, error) {
	byHost := map[string]*tls.Config{}
	for _, h := range hosts {
		ip, _, err := net.SplitHostPort(h)
		if err != nil {
			return nil, err
		}
		base, ok := t.configs[ip]
		if !ok {
			return nil, fmt.Errorf("demo site: no certificate for %s", h)
		}
		cfg := base.Clone()
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			t.count(h, cs.DidResume)
			return nil
		}
		byHost[h] = cfg
	}
	if len(hosts) == 1 {
		return byHost[hosts[0]], nil
	}
	return &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cfg, ok := byHost[hello.Conn.LocalAddr().String()]
			if !ok {
				return nil, fmt.Errorf("demo site: no host at %s", hello.Conn.LocalAddr())
			}
			return cfg, nil
		},
	}, nil
}
