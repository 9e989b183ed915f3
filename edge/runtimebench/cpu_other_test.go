//go:build !js

package runtimebench_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU the process has spent, on all its threads
// (getrusage).
func cpuTime() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		panic(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
