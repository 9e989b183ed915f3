// Package pgtest runs a private Postgres server for a test: initdb and
// pg_ctl into a temporary directory, on a free loopback port with trust
// authentication, so a test may stop, start and kill the server without
// touching any other. Only tests use it.
package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a private Postgres server. Its methods fail the test they
// were started by when pg_ctl fails.
type Server struct {
	t       testing.TB
	dir     string // the temporary directory: data/, the socket and the log
	data    string
	logFile string
	port    int
	initdb  string
	pgctl   string
	asUser  []string // the command prefix that runs a binary as the postgres user ("" when not root)

	mu      sync.Mutex
	running bool
}

// Start initialises a cluster in a temporary directory and starts it on a
// free port of 127.0.0.1. The server is stopped and its directory removed
// when the test ends, failed or not. Without initdb and pg_ctl (on PATH,
// in /usr/local/bin or /usr/lib/postgresql/*/bin) the test fails, naming
// them. Run as root, the server runs as the postgres OS user (Postgres
// refuses to run as root).
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, initdb: find("initdb"), pgctl: find("pg_ctl")}
	if s.initdb == "" || s.pgctl == "" {
		t.Fatalf("pgtest: initdb and pg_ctl are needed to run a private Postgres (found initdb %q, pg_ctl %q): install the Postgres server (apt-get install postgresql)", s.initdb, s.pgctl)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s.dir, s.data, s.logFile = dir, filepath.Join(dir, "data"), filepath.Join(dir, "postgres.log")
	t.Cleanup(s.cleanup)
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("pgtest: running as root, a postgres OS user is needed to run the server: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Fatalf("pgtest: running as root, runuser is needed to run the server as postgres: %v", err)
		}
		s.asUser = []string{runuser, "-u", "postgres", "--"}
	}
	if out, err := s.run(s.initdb, "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.Start()
	return s
}

// DSN is the URL of the server's postgres database.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Port is the port the server listens on.
func (s *Server) Port() int { return s.port }

// Start starts the server (again) on the same data directory and port
// and returns once it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", s.port, s.dir)
	if out, err := s.run(s.pgctl, "start", "-w", "-t", "60", "-D", s.data, "-l", s.logFile, "-o", opts); err != nil {
		s.t.Fatalf("pgtest: pg_ctl start: %v\n%s\n%s", err, out, s.Log())
	}
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
}

// Stop stops the server (pg_ctl stop -m fast: open sessions are ended
// with 57P01 admin_shutdown) and returns once it has stopped.
func (s *Server) Stop() {
	s.t.Helper()
	if out, err := s.run(s.pgctl, "stop", "-w", "-t", "60", "-m", "fast", "-D", s.data); err != nil {
		s.t.Fatalf("pgtest: pg_ctl stop: %v\n%s", err, out)
	}
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
}

// Kill ends the postmaster with SIGKILL, as a crash would, and returns
// once it and its backends (which end when they see it gone) have exited.
// Start starts it again (crash recovery).
func (s *Server) Kill() {
	s.t.Helper()
	pid, err := s.pid()
	if err != nil {
		s.t.Fatalf("pgtest: kill: %v", err)
	}
	children := childrenOf(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		s.t.Fatalf("pgtest: kill %d: %v", pid, err)
	}
	for _, p := range append(children, pid) {
		for start := time.Now(); syscall.Kill(p, 0) == nil; time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 30*time.Second {
				s.t.Fatalf("pgtest: process %d of the killed server still runs after 30 s", p)
			}
		}
	}
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
}

// Log is what the server has logged so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logFile)
	return string(b)
}

// pid is the postmaster's process id, from postmaster.pid.
func (s *Server) pid() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.data, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(line))
}

// cleanup stops the server, failed test or not (immediately: nothing it
// holds is kept), and removes its directory; a failed test gets the
// server's log.
func (s *Server) cleanup() {
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	if running {
		if out, err := s.run(s.pgctl, "stop", "-w", "-t", "30", "-m", "immediate", "-D", s.data); err != nil {
			s.t.Logf("pgtest: pg_ctl stop: %v\n%s", err, out)
			if pid, err := s.pid(); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if s.t.Failed() {
		if log := s.Log(); log != "" {
			s.t.Logf("pgtest: the private Postgres logged:\n%s", tail(log, 4000))
		}
	}
	if err := os.RemoveAll(s.dir); err != nil {
		s.t.Errorf("pgtest: remove %s: %v", s.dir, err)
	}
}

// run runs a Postgres binary, as the postgres user when the test runs as
// root, and returns its combined output.
func (s *Server) run(bin string, args ...string) (string, error) {
	argv := append(append(append([]string(nil), s.asUser...), bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after
		// its closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == pid {
			if child, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
				out = append(out, child)
			}
		}
	}
	return out
}

// find is the path of a Postgres binary, or "".
func find(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	cands := []string{filepath.Join("/usr/local/bin", name)}
	more, _ := filepath.Glob(filepath.Join("/usr/lib/postgresql", "*", "bin", name))
	for i := len(more) - 1; i >= 0; i-- { // the newest version first
		cands = append(cands, more[i])
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return c
		}
	}
	return ""
}

// freePort is a loopback port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
