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
	extra   string   // more server options (a standby's cluster_name)

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
	s := newServer(t)
	if out, err := s.run(s.initdb, "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.Start()
	return s
}

// newServer finds the binaries, makes the temporary directory (removed,
// with the server stopped, when the test ends) and, as root, the prefix
// that runs the binaries as the postgres user.
func newServer(t testing.TB) *Server {
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
	return s
}

// NewStandby makes a streaming standby of primary (pg_basebackup -R from
// it) in a temporary directory of its own, starts it on a free port of
// 127.0.0.1 with cluster_name (its application_name on the primary) name,
// and returns once the primary streams to it. With synchronous the
// primary then names it in synchronous_standby_names (ALTER SYSTEM and a
// reload: with synchronous_commit = on, a commit on the primary returns
// once the standby has flushed it) and NewStandby returns once the
// primary reports it sync. The standby is stopped and its directory
// removed when the test ends, as a Start's is. It needs pg_basebackup and
// psql as well.
func NewStandby(primary *Server, name string, synchronous bool) *Server {
	t := primary.t
	t.Helper()
	s := newServer(t)
	basebackup := find("pg_basebackup")
	if basebackup == "" || find("psql") == "" {
		t.Fatalf("pgtest: pg_basebackup and psql are needed to make a standby")
	}
	if out, err := s.run(basebackup, "-D", s.data, "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	s.port = freePort(t)
	s.extra = " -c cluster_name=" + name
	s.Start()
	if synchronous {
		primary.SQL("ALTER SYSTEM SET synchronous_standby_names = '" + name + "'")
		primary.SQL("SELECT pg_reload_conf()")
	}
	want := "async"
	if synchronous {
		want = "sync"
	}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		got := primary.SQL("SELECT sync_state FROM pg_stat_replication WHERE application_name = '" + name + "' AND state = 'streaming'")
		if got == want {
			return s
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("pgtest: standby %s is not streaming %s 60 s after it started (primary says %q)\n%s", name, want, got, tail(s.Log(), 4000))
		}
	}
}

// Promote promotes a standby to a primary (pg_ctl promote) and returns
// once it takes writes.
func (s *Server) Promote() {
	s.t.Helper()
	if out, err := s.run(s.pgctl, "promote", "-w", "-t", "60", "-D", s.data); err != nil {
		s.t.Fatalf("pgtest: pg_ctl promote: %v\n%s\n%s", err, out, tail(s.Log(), 4000))
	}
}

// SQL runs one statement on the server's postgres database with psql over
// its socket and returns its output, unaligned and without headers,
// trimmed.
func (s *Server) SQL(query string) string {
	s.t.Helper()
	out, err := s.run(find("psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", s.dir, "-p", strconv.Itoa(s.port), "-U", "postgres", "-d", "postgres", "-c", query)
	if err != nil {
		s.t.Fatalf("pgtest: psql %q: %v\n%s", query, err, out)
	}
	return strings.TrimSpace(out)
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
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200%s", s.port, s.dir, s.extra)
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
