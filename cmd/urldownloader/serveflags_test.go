package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// TestServeOptions: a listen address other machines can reach needs a
// token, from --token or the environment, and the refusal names both.
func TestServeOptions(t *testing.T) {
	t.Setenv(TokenEnv, "")
	_, err := serveOptions("0.0.0.0:8080")
	if err == nil || !strings.Contains(err.Error(), "--token") || !strings.Contains(err.Error(), TokenEnv) {
		t.Errorf("0.0.0.0 without a token: %v, want a refusal naming --token and %s", err, TokenEnv)
	}
	if _, err := serveOptions("127.0.0.1:8080"); err != nil {
		t.Errorf("loopback without a token: %v", err)
	}
	t.Setenv(TokenEnv, "from-env")
	opts, err := serveOptions("0.0.0.0:8080")
	if err != nil || opts.Token != "from-env" {
		t.Errorf("token from the environment: %+v %v", opts, err)
	}
	if _, err := serveOptions("no-port"); err == nil || errors.Is(err, localmode.ErrTokenRequired) {
		t.Errorf("address without a port: %v, want the address refused", err)
	}

	var h hostList
	for _, v := range []string{"a.lan,b.lan", " c.lan:8443 ", ","} {
		h.Set(v)
	}
	if got := h.String(); got != "a.lan,b.lan,c.lan:8443" {
		t.Errorf("--allowed-host a.lan,b.lan --allowed-host c.lan:8443: %q", got)
	}
}
