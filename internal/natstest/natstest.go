// Package natstest starts a real nats-server for tests that route relay
// sessions across processes.
package natstest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Start runs a nats-server on a port of its choosing on loopback for the
// test, stopped when the test ends, and returns its URL once the server
// says it is ready. Without nats-server on PATH it skips the test, except
// under CI (CI set), where it fails: CI must run what needs NATS.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nats-server is not installed; CI must run the NATS router test")
		}
		t.Skip("nats-server is not installed; the NATS router needs it for this test")
	}
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", "-1") // -1: a random free port
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The server logs the address it listens on, then that it is ready.
	ready := make(chan string, 1)
	go func() {
		addr := ""
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			line := sc.Text()
			if _, a, ok := strings.Cut(line, "Listening for client connections on "); ok {
				addr = strings.TrimSpace(a)
			}
			if strings.Contains(line, "Server is ready") {
				ready <- addr
				break
			}
		}
		_, _ = io.Copy(io.Discard, logs) // keep the pipe drained
		close(ready)
	}()
	select {
	case addr, ok := <-ready:
		if !ok || addr == "" {
			t.Fatal("nats-server exited before it was ready")
		}
		return "nats://" + addr
	case <-time.After(10 * time.Second):
		t.Fatal("nats-server did not say it was ready")
		return ""
	}
}
