//go:build unix

package fetch

import (
	"net"
	"syscall"
)

// idleConnAlive reports whether an idle connection may carry a request:
// its host has neither closed it nor sent anything on it since its last
// answer. It peeks without waiting, so it costs one system call.
func idleConnAlive(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return true // not a socket (a test's network): nothing to peek at
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: nothing to read, still open. No error: 0 bytes (the
		// host closed it) or bytes nobody asked for.
		alive = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && alive
}
