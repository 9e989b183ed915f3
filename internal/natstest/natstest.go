// Package natstest starts a real nats-server for tests that route relay
// sessions across processes.
package natstest

import (
	"bufio"
	"fmt"
	"io"
	"net"
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
	return StartServer(t).URL
}

// Server is a nats-server that a test can stop and start again on the same
// port (an outage of NATS).
type Server struct {
	URL  string
	t    testing.TB
	bin  string
	port int
	cmd  *exec.Cmd
}

// StartServer runs a nats-server on a free loopback port, stopped when the
// test ends; Stop and Start take it away and bring it back on that port.
func StartServer(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nats-server is not installed; CI must run the NATS router test")
		}
		t.Skip("nats-server is not installed; the NATS router needs it for this test")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{t: t, bin: bin, port: port, URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	t.Cleanup(s.Stop)
	s.Start()
	return s
}

// Start runs the server (again) and returns once it says it is ready.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.bin, "-a", "127.0.0.1", "-p", fmt.Sprint(s.port))
	logs, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = cmd
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Server is ready") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, logs) // keep the pipe drained
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		s.t.Fatal("nats-server did not say it was ready")
	}
}

// Stop kills the server (clients see the connection drop) and waits for it
// to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}
