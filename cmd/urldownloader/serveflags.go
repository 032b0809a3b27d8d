package main

// Serve mode's flags: what a --listen server lets in (serve.go in package
// standalone holds the checks).

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/urldownloader/urldownloader/shared/runtime/localmode"
)

// TokenEnv names the environment variable that gives serve mode its
// bearer token (kept off the command line, which other users can read).
const TokenEnv = "URLDOWNLOADER_TOKEN"

// hostList is a repeatable flag of comma-separated names.
type hostList []string

func (h *hostList) String() string { return strings.Join(*h, ",") }
func (h *hostList) Set(v string) error {
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			*h = append(*h, n)
		}
	}
	return nil
}

var (
	allowedHostsFlag hostList
	tokenFlag        = flag.String("token", "", "local backend, with --listen: bearer token every request but GET /healthz must carry (Authorization: Bearer <token>); required when --listen is not a loopback address (default $"+TokenEnv+")")
)

func init() {
	flag.Var(&allowedHostsFlag, "allowed-host", "local backend, with --listen: a further name (or name:port) the Host header may carry, repeatable or comma-separated; the listen address's own names are always allowed")
}

// serveOptions are the server's options from the flags and the
// environment, refused as localmode.Listen would refuse them, with a
// message that names the flags.
func serveOptions(listen string) (localmode.ServeOptions, error) {
	opts := localmode.ServeOptions{Addr: listen, AllowedHosts: allowedHostsFlag, Token: strings.TrimSpace(*tokenFlag)}
	if opts.Token == "" {
		opts.Token = strings.TrimSpace(os.Getenv(TokenEnv))
	}
	err := localmode.CheckServeOptions(opts)
	if errors.Is(err, localmode.ErrTokenRequired) {
		return opts, fmt.Errorf("--listen %s is not a loopback address, so other machines can reach it: give a token with --token or %s (requests then need Authorization: Bearer <token>), or listen on 127.0.0.1", listen, TokenEnv)
	}
	return opts, err
}
