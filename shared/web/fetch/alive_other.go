//go:build !unix

package fetch

import "net"

// idleConnAlive cannot peek here: a connection the host closed while idle
// fails the request sent on it, which the caller retries like any other
// connection failure.
func idleConnAlive(net.Conn) bool { return true }
