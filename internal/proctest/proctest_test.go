package proctest

import (
	"os/exec"
	"testing"
	"time"
)

// TestAwaitExit: a process still running is not taken for exited; once
// it is killed, AwaitExit returns true (a zombie not yet reaped by its
// parent, here the test, counts); a pid no process has is exited.
func TestAwaitExit(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if exited, err := AwaitExit(pid, 0); err != nil || exited {
		t.Fatalf("a running process: exited %v, %v", exited, err)
	}
	cmd.Process.Kill()
	if exited, err := AwaitExit(pid, 30*time.Second); err != nil || !exited {
		t.Fatalf("a killed process, not reaped: exited %v, %v", exited, err)
	}
	cmd.Wait()
	if exited, err := AwaitExit(pid, 0); err != nil || !exited {
		t.Fatalf("a reaped process: exited %v, %v", exited, err)
	}
}
