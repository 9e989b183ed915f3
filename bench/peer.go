package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The environment a peer's command is started with.
const (
	// EnvPeerUpstream is the fake upstream's base URL, serving
	// /v1/chat/completions.
	EnvPeerUpstream = "CADUCEUS_BENCH_UPSTREAM"
	// EnvPeerPort is the loopback port the peer is to listen on.
	EnvPeerPort = "CADUCEUS_BENCH_PORT"
	// EnvPeerHeaders names a file the peer may write, before it answers,
	// with headers every request to it must carry, "Name: value" a line
	// (a key it made itself, say): the bench reads it while it waits for
	// the peer and sends them beside the --peer-header ones.
	EnvPeerHeaders = "CADUCEUS_BENCH_HEADERS"
)

// PeerSpec is a peer: another proxy, started as a command of its own, that
// the bench loads beside its own targets.
type PeerSpec struct {
	Name    string // its target name in the report
	Command string // run through sh -c
	// Header is sent with every request to it, the readiness check's
	// too; StartPeer replaces $CADUCEUS_BENCH_UPSTREAM (or
	// ${CADUCEUS_BENCH_UPSTREAM}) in its values with the upstream's URL.
	Header http.Header
	// Model, when set, is the model the peer's requests ask for instead of
	// the bench's (ChatBodyFor): for a peer that names models its own way.
	Model string
}

// Body is the request the peer is loaded with: ChatBody, or with Model
// set ChatBodyFor(Model).
func (s PeerSpec) Body() []byte {
	if s.Model == "" {
		return ChatBody
	}
	return ChatBodyFor(s.Model)
}

// ParsePeer reads NAME=COMMAND (the first "=" separates them); both must be
// non-empty.
func ParsePeer(s string) (PeerSpec, error) {
	name, command, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return PeerSpec{}, fmt.Errorf("peer %q: want NAME=COMMAND", s)
	case strings.TrimSpace(name) == "":
		return PeerSpec{}, fmt.Errorf("peer %q: the name before \"=\" is empty", s)
	case strings.TrimSpace(command) == "":
		return PeerSpec{}, fmt.Errorf("peer %q: the command after \"=\" is empty", s)
	}
	return PeerSpec{Name: name, Command: command}, nil
}

// ParsePeerHeader reads NAME=Header: value, a header for peer NAME: the
// first "=" ends the peer's name and the first ":" after it the header's
// name, a token (RFC 9110); the value, spaces around it trimmed, has no
// CR, LF or NUL. Content-Type, Content-Length and Host are the bench's own.
func ParsePeerHeader(s string) (peer, key, value string, err error) {
	peer, h, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", "", fmt.Errorf("peer header %q: want NAME=Header: value", s)
	}
	if strings.TrimSpace(peer) == "" {
		return "", "", "", fmt.Errorf("peer header %q: the peer's name before \"=\" is empty", s)
	}
	key, value, ok = strings.Cut(h, ":")
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	switch {
	case !ok:
		return "", "", "", fmt.Errorf("peer header %q: no \":\" after the peer's name: want NAME=Header: value", s)
	case key == "":
		return "", "", "", fmt.Errorf("peer header %q: the header's name before \":\" is empty", s)
	case !isToken(key):
		return "", "", "", fmt.Errorf("peer header %q: the header's name %q is not a token", s, key)
	case strings.ContainsAny(value, "\r\n\x00"):
		return "", "", "", fmt.Errorf("peer header %q: the value holds a CR, LF or NUL", s)
	}
	switch http.CanonicalHeaderKey(key) {
	case "Content-Type", "Content-Length", "Host":
		return "", "", "", fmt.Errorf("peer header %q: the bench sets %s itself", s, http.CanonicalHeaderKey(key))
	}
	return peer, key, value, nil
}

// ParsePeerModel reads NAME=MODEL, the model peer NAME is asked for: the
// first "=" ends the peer's name; the model is not empty and has no
// leading or trailing space.
func ParsePeerModel(s string) (peer, model string, err error) {
	peer, model, ok := strings.Cut(s, "=")
	switch {
	case !ok:
		return "", "", fmt.Errorf("peer model %q: want NAME=MODEL", s)
	case strings.TrimSpace(peer) == "":
		return "", "", fmt.Errorf("peer model %q: the peer's name before \"=\" is empty", s)
	case model == "":
		return "", "", fmt.Errorf("peer model %q: the model after \"=\" is empty", s)
	case strings.TrimSpace(model) != model:
		return "", "", fmt.Errorf("peer model %q: the model has spaces around it", s)
	}
	return peer, model, nil
}

// isToken reports whether s is an HTTP token: a header name (RFC 9110
// section 5.6.2).
func isToken(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// expandUpstream replaces $CADUCEUS_BENCH_UPSTREAM (not followed by
// another letter, digit or "_") and ${CADUCEUS_BENCH_UPSTREAM} in s with
// upstream; nothing else.
func expandUpstream(s, upstream string) string {
	s = strings.ReplaceAll(s, "${"+EnvPeerUpstream+"}", upstream)
	const ref = "$" + EnvPeerUpstream
	var b strings.Builder
	for {
		i := strings.Index(s, ref)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(ref)
		if end < len(s) && (s[end] == '_' || 'a' <= s[end] && s[end] <= 'z' || 'A' <= s[end] && s[end] <= 'Z' || '0' <= s[end] && s[end] <= '9') {
			b.WriteString(s[:end]) // another variable's name
		} else {
			b.WriteString(s[:i])
			b.WriteString(upstream)
		}
		s = s[end:]
	}
}

// Peer is a started peer: a process group led by sh -c COMMAND.
type Peer struct {
	Name string
	URL  string // http://127.0.0.1:PORT
	// Header is the spec's, its values expanded, and those the peer wrote
	// to its headers file (EnvPeerHeaders): what its load sends.
	Header http.Header
	// Body is the request body its readiness check sent: what its load
	// sends.
	Body []byte
	// Grace is how long Close waits after SIGTERM before SIGKILL.
	Grace time.Duration

	cmd     *exec.Cmd
	pid     int
	out     *os.File // the command's stdout and stderr
	headers string   // the file the peer may write its headers to
	exited  chan struct{}
	err     error // cmd.Wait's, once exited is closed
}

// StartPeer starts spec's command with EnvPeerUpstream set to upstream and
// EnvPeerPort to a free loopback port, in a process group of its own, and
// waits up to wait until a POST of body (spec.Body(), for the bench), with
// the spec's Header, to its /v1/chat/completions answers 2xx. A command
// that exits first, or does not answer in time, is an error naming the peer
// with the end of its output, and its process group is killed.
func StartPeer(ctx context.Context, spec PeerSpec, upstream string, body []byte, wait time.Duration) (*Peer, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", spec.Name, err)
	}
	out, err := os.CreateTemp("", "caduceus-bench-peer-*.log")
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", spec.Name, err)
	}
	headers := out.Name() + ".headers"
	cmd := exec.Command("sh", "-c", spec.Command)
	cmd.Env = append(os.Environ(), EnvPeerUpstream+"="+upstream, EnvPeerPort+"="+strconv.Itoa(port), EnvPeerHeaders+"="+headers)
	cmd.Stdout, cmd.Stderr = out, out
	// A process group of its own, so Close reaches every process the
	// command starts; and a SIGTERM if this process dies without Close.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		out.Close()
		os.Remove(out.Name())
		return nil, fmt.Errorf("peer %s: %w", spec.Name, err)
	}
	header := make(http.Header, len(spec.Header))
	for k, vs := range spec.Header {
		for _, v := range vs {
			header[k] = append(header[k], expandUpstream(v, upstream))
		}
	}
	p := &Peer{Name: spec.Name, URL: "http://127.0.0.1:" + strconv.Itoa(port), Header: header, Body: body, Grace: 3 * time.Second,
		cmd: cmd, pid: cmd.Process.Pid, out: out, headers: headers, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	if err := p.waitReady(ctx, body, wait); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// waitReady polls the peer with body and its Header until it answers 2xx,
// it exits, wait passes or ctx ends.
func (p *Peer) waitReady(ctx context.Context, body []byte, wait time.Duration) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(wait)
	last := "no answer yet"
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("peer %s exited before answering (%v); its output ends:\n%s", p.Name, p.err, p.tail())
		default:
		}
		if ctx.Err() != nil {
			return fmt.Errorf("peer %s: %w", p.Name, ctx.Err())
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("peer %s did not answer a POST /v1/chat/completions with 2xx within %s (last: %s); its output ends:\n%s", p.Name, wait, last, p.tail())
		}
		if err := p.readHeaders(); err != nil {
			return err
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, p.URL+"/v1/chat/completions", bytes.NewReader(body))
		for k, vs := range p.Header {
			req.Header[k] = vs
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				cancel()
				return nil
			}
			last = fmt.Sprintf("status %d: %s", resp.StatusCode, strings.TrimSpace(string(msg)))
		} else {
			last = err.Error()
		}
		cancel()
		select {
		case <-time.After(100 * time.Millisecond):
		case <-p.exited:
		case <-ctx.Done():
		}
	}
}

// tail is the end of the peer's output (stdout and stderr).
func (p *Peer) tail() string {
	const n = 2048
	b, err := os.ReadFile(p.out.Name())
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	if s := strings.TrimRight(string(b), "\n"); s != "" {
		return s
	}
	return "(nothing)"
}

// Pid is the process id of the peer's process group leader (sh, or what it
// execs).
func (p *Peer) Pid() int { return p.pid }

// CPU is the user and system CPU time so far of the peer's processes: those
// in its process group or descended from its leader, with the children they
// have reaped.
func (p *Peer) CPU() (time.Duration, error) {
	return groupCPU(p.pid)
}

// Close ends the peer: SIGTERM to its process group, then SIGKILL after
// Grace if any of the group is left, and removes its output file.
func (p *Peer) Close() {
	defer func() { p.out.Close(); os.Remove(p.out.Name()); os.Remove(p.headers) }()
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	deadline := time.Now().Add(p.Grace)
	for time.Now().Before(deadline) {
		if p.gone() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// gone reports whether the leader has been reaped and no process of its
// group is left but zombies (which their parent, or init, reaps).
func (p *Peer) gone() bool {
	select {
	case <-p.exited:
	default:
		return false
	}
	if errors.Is(syscall.Kill(-p.pid, 0), syscall.ESRCH) {
		return true
	}
	stats, err := allProcStats()
	if err != nil {
		return false
	}
	for _, st := range stats {
		if st.pgrp == p.pid && st.state != "Z" {
			return false
		}
	}
	return true
}

// freePort is a loopback TCP port free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// procStat is what the bench reads of /proc/PID/stat.
type procStat struct {
	pid, ppid, pgrp int
	comm, state     string
	cpu             time.Duration // utime + stime
	children        time.Duration // cutime + cstime: reaped children's
}

// readProcStat reads one /proc/PID/stat file.
func readProcStat(file string) (procStat, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open || close+2 > len(s) {
		return procStat{}, false
	}
	fields := strings.Fields(s[close+2:]) // from field 3, state
	if len(fields) < 15 {
		return procStat{}, false
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	num := func(i int) int64 { n, _ := strconv.ParseInt(fields[i], 10, 64); return n }
	pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
	// ppid, pgrp, utime, stime, cutime and cstime are stat fields 4, 5 and
	// 14-17, here 1, 2 and 11-14.
	return procStat{
		pid: pid, ppid: int(num(1)), pgrp: int(num(2)), comm: s[open+1 : close], state: fields[0],
		cpu:      time.Duration(num(11)+num(12)) * tick,
		children: time.Duration(num(13)+num(14)) * tick,
	}, true
}

// allProcStats reads every process's stat.
func allProcStats() ([]procStat, error) {
	files, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	stats := make([]procStat, 0, len(files))
	for _, f := range files {
		if st, ok := readProcStat(f); ok {
			stats = append(stats, st)
		}
	}
	return stats, nil
}

// groupCPU is the CPU time so far of the processes in process group pgid
// or descended from process pgid, with their reaped children's.
func groupCPU(pgid int) (time.Duration, error) {
	stats, err := allProcStats()
	if err != nil {
		return 0, err
	}
	parent := make(map[int]int, len(stats))
	for _, st := range stats {
		parent[st.pid] = st.ppid
	}
	descends := func(pid int) bool {
		for range 64 { // bounded: a pid cycle cannot hold us
			if pid == pgid {
				return true
			}
			pp, ok := parent[pid]
			if !ok || pp <= 1 {
				return false
			}
			pid = pp
		}
		return false
	}
	var total time.Duration
	found := false
	for _, st := range stats {
		if st.pgrp == pgid || descends(st.pid) {
			total += st.cpu + st.children
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("no process of group %d in /proc", pgid)
	}
	return total, nil
}

// readHeaders adds to p.Header the headers the peer wrote to its headers
// file (EnvPeerHeaders), if it wrote one: "Name: value" a line.
func (p *Peer) readHeaders() error {
	b, err := os.ReadFile(p.headers)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("peer %s: its headers file: %w", p.Name, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue // an empty line, or the file just created
		}
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return fmt.Errorf("peer %s: its headers file holds %q: want Name: value lines", p.Name, line)
		}
		p.Header.Set(name, value)
	}
	return nil
}
