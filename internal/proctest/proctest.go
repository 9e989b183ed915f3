// Package proctest waits, for the tests, for processes they did not start
// (so cannot wait(2) for) to exit: a Postgres server's backends, a
// process reparented to init. The kernel makes a pidfd readable when its
// process exits.
package proctest

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// sysPidfdOpen is pidfd_open(2)'s number, the same on every Linux
// architecture (syscall predates it).
const sysPidfdOpen = 434

// AwaitExit waits until the process pid has exited (a zombie not reaped
// yet counts), for at most limit, and reports whether it did. A pid no
// process has is taken for one that exited and was reaped.
func AwaitExit(pid int, limit time.Duration) (bool, error) {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ESRCH {
		return true, nil
	}
	if errno != 0 {
		return false, fmt.Errorf("pidfd_open %d: %w", pid, errno)
	}
	defer syscall.Close(int(fd))
	deadline := time.Now().Add(limit)
	for {
		var r syscall.FdSet
		r.Bits[fd/64] |= 1 << (fd % 64)
		tv := syscall.NsecToTimeval(max(0, time.Until(deadline)).Nanoseconds())
		n, err := syscall.Select(int(fd)+1, &r, nil, nil, &tv)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return false, fmt.Errorf("select on the pidfd of %d: %w", pid, err)
		}
		return n > 0, nil
	}
}
