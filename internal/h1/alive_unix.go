//go:build unix

package h1

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection may still be used: the server
// has neither closed it nor sent anything on it since its last answer. It
// peeks without blocking (one recvfrom): net/http learns the same from the
// reading goroutine each of its connections keeps.
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	live := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// EAGAIN: open and quiet. No error: closed (0 bytes) or the
		// server spoke out of turn. Any other error: the socket failed.
		live = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && live
}
