//go:build js

package runtimebench_test

import (
	"syscall/js"
	"time"
)

// cpuTime is the CPU the process (Node) has spent: process.cpuUsage().
func cpuTime() time.Duration {
	u := js.Global().Get("process").Call("cpuUsage")
	return time.Duration(u.Get("user").Float()+u.Get("system").Float()) * time.Microsecond
}
