package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/store"
)

// A reload (SIGHUP, or caduceus reload) re-reads the config file, layers
// the environment and the flags over it as at the start, checks it as
// serve checks it at the start, and builds every enabled gate and the
// server on it anew: a generation. The listener's handler then points at
// the new generation; requests that started on the old one finish on it,
// and only then do its gates' jobs end and what it holds close. The store,
// the keys, the audit log and its checkpointer, and the listener are the
// process's and stay. A config that fails is refused whole: the
// generation in force stays, and the log says why in one line.

// Files serve keeps in its data directory for caduceus reload.
const (
	pidFile    = "caduceus.pid"    // the pid of the serve holding it (locked while it runs)
	reloadFile = "caduceus.reload" // the outcome of its last reload
)

// generation is one configuration in force: the gates built on it, the
// server serving them, their jobs, and the requests that started on it.
type generation struct {
	a        *app // the app whose cfg this generation was built from
	gates    []gate.Gate
	closeAll func()
	srv      *server.Server
	handler  http.Handler

	stopJobs context.CancelFunc
	waitJobs func()

	n        atomic.Int64 // requests in flight on it (and ones backing out)
	retired  atomic.Bool  // no request starts on it any more
	idleOnce sync.Once
	idle     chan struct{} // closed once retired with no request in flight
}

// build makes the generation of a's configuration over the process's
// store, keys and signer; prev is the server it replaces (nil at start),
// whose metrics carry over.
func (a *app) build(ctx context.Context, db *store.DB, keys *auth.Service, signer ed25519.PrivateKey, prev *server.Server) (*generation, error) {
	gates, closeAll, err := a.gates(ctx, db)
	if err != nil {
		return nil, err
	}
	cfg := a.serverConfig(db, keys, signer, gates)
	cfg.Previous = prev
	g := &generation{a: a, gates: gates, closeAll: closeAll, idle: make(chan struct{})}
	con, err := a.consoleHandler(ctx, db, cfg.Trails, gate.Pages(gates), signer)
	if err != nil {
		closeAll()
		return nil, err
	}
	cfg.Console = con
	g.srv = server.New(cfg)
	g.handler = g.srv.Logged() // one request log line each (server/requestlog.go)
	return g, nil
}

// start runs the generation's gate jobs under jobs.
func (g *generation) start(jobs context.Context) {
	ctx, cancel := context.WithCancel(jobs)
	g.stopJobs = cancel
	g.waitJobs = gate.Start(ctx, g.a.log, g.gates)
}

// enter counts a request starting on g; false once g is retired. It
// counts before it looks, and retire marks before it looks, so a request
// either is counted before retire's look or sees the mark and backs out.
func (g *generation) enter() bool {
	g.n.Add(1)
	if g.retired.Load() {
		g.leave()
		return false
	}
	return true
}

func (g *generation) leave() {
	if g.n.Add(-1) == 0 && g.retired.Load() {
		g.idleOnce.Do(func() { close(g.idle) })
	}
}

// closeSockets closes the gates' WebSockets (http.Server.Shutdown does
// not wait for them, and they are not counted as requests in flight).
func (g *generation) closeSockets() {
	for _, gt := range g.gates {
		if s, ok := gt.(registry.SocketCloser); ok {
			s.CloseSockets()
		}
	}
}

// retire waits for the requests that started on g, then closes the relay's
// sockets (its gateways reconnect, to the new generation), ends g's jobs and
// closes what its gates hold.
func (g *generation) retire() {
	g.retired.Store(true)
	if g.n.Load() == 0 {
		g.idleOnce.Do(func() { close(g.idle) })
	}
	<-g.idle
	g.stop()
}

// stop ends g's jobs, waits for them and closes what its gates hold.
func (g *generation) stop() {
	g.closeSockets()
	g.stopJobs()
	g.waitJobs()
	g.closeAll()
}

// swapHandler is the listener's handler: the generation in force, swapped
// whole by a reload.
type swapHandler struct {
	cur atomic.Pointer[generation]
}

func (h *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// A WebSocket lives as long as its gateway stays: not waited for
		// by a reload, which closes it once the old generation's other
		// requests are done; the gateway reconnects.
		h.cur.Load().handler.ServeHTTP(w, r)
		return
	}
	for {
		g := h.cur.Load()
		if g.enter() {
			defer g.leave()
			g.handler.ServeHTTP(w, r)
			return
		}
	}
}

// reloader is serve's reload: it holds what the generations share.
type reloader struct {
	a      *app // the app serve started with
	ctx    context.Context
	jobs   context.Context
	db     *store.DB
	keys   *auth.Service
	signer ed25519.PrivateKey
	h      *swapHandler
	// retiring are the old generations still finishing their requests.
	retiring sync.WaitGroup
	seq      int
}

// fixedSettings are the settings a reload does not change: the listener,
// the store, the process's logger and audit checkpoints, the gates list.
// A re-read file that changes one is logged, and the running value stays.
func fixedSettings(c *config) map[string]any {
	return map[string]any{
		"addr": &c.Addr, "data": &c.Data, "store": &c.Store, "gates": &c.Gates,
		"log_level": &c.LogLevel, "log_format": &c.LogFormat, "nats": &c.NATS, "audit": &c.Audit,
	}
}

// reload re-reads the configuration and, when it passes, swaps the
// generation in force for one built on it.
func (r *reloader) reload() {
	file := r.a.configFileName()
	g, err := r.next(file)
	r.seq++
	if err != nil {
		msg := userMessage(err)
		if e, ok := errors.AsType[*exitError](err); ok {
			msg = userMessage(e.err)
		}
		msg = strings.Join(strings.Fields(msg), " ") // one line (YAML's errors have several)
		r.a.log.Error("reload refused: the config in force is unchanged", "config", file, "err", msg)
		r.status("refused: " + msg)
		return
	}
	g.start(r.jobs)
	old := r.h.cur.Swap(g)
	r.retiring.Go(old.retire)
	r.a.log.Info("config reloaded", "config", file, "gates", g.a.servedGates())
	registry.DescribeAll(g.a.host(r.db), g.a.sections(), g.a.cfg.Gates)
	r.status("reloaded " + file)
}

// next builds the generation of the re-read configuration.
func (r *reloader) next(file string) (*generation, error) {
	if file == "" {
		return nil, errors.New("serve was started without a config file (--config, CADUCEUS_CONFIG): there is nothing to re-read")
	}
	cfg, err := r.a.layerConfig()
	if err != nil {
		return nil, err
	}
	cur := r.h.cur.Load()
	// What a reload does not change stays as it runs.
	running, next := fixedSettings(&cur.a.cfg), fixedSettings(&cfg)
	var kept []string
	for _, name := range []string{"addr", "data", "store", "gates", "log_level", "log_format", "nats", "audit"} {
		was := reflect.ValueOf(running[name]).Elem()
		now := reflect.ValueOf(next[name]).Elem()
		if !reflect.DeepEqual(was.Interface(), now.Interface()) {
			kept = append(kept, name)
			now.Set(was)
		}
	}
	if len(kept) > 0 {
		r.a.log.Warn("reload: these settings change only at a restart; the running values stay", "settings", strings.Join(kept, ","))
	}
	na := *r.a
	na.cfg = cfg
	na.locks = nil
	if err := na.checkServeConfig(); err != nil {
		return nil, err
	}
	return na.build(r.ctx, r.db, r.keys, r.signer, cur.srv)
}

// status writes the outcome of the last reload where caduceus reload reads
// it: "PID SEQ outcome", renamed into place.
func (r *reloader) status(outcome string) {
	line := fmt.Sprintf("%d %d %s\n", os.Getpid(), r.seq, outcome)
	path := filepath.Join(r.a.cfg.Data, reloadFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(line), 0o600); err == nil {
		err = os.Rename(tmp, path)
		if err != nil {
			r.a.log.Warn("reload: outcome not written", "file", path, "err", err)
		}
	}
}

// writePidFile records serve's pid in the data directory for caduceus
// reload, under an exclusive lock held while serve runs (so a pid file
// left by a serve that died is told apart from a live one); the returned
// func removes it. When another serve holds it, this one is not reachable
// by caduceus reload (a warning says so), only by its signal.
func (a *app) writePidFile() (remove func(), err error) {
	if err := os.MkdirAll(a.cfg.Data, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(a.cfg.Data, pidFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		a.log.Warn("another serve holds the data directory's pid file: caduceus reload reaches that one; reload this one with kill -HUP", "file", path, "pid", os.Getpid())
		return func() {}, nil
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		os.Remove(path)
		f.Close()
	}, nil
}

func (a *app) reloadCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Make the running serve re-read its config file (as SIGHUP does) and print the outcome",
		Long: `Signal the serve running on the data directory (the pid it wrote to
DATA/caduceus.pid) with SIGHUP, wait for it to reload, and print the outcome.
The serve re-reads its config file and layers its environment and flags over
it, as at its start: shim routes, plans, prices, budgets and governance, the
relay's gateways and platforms, the executor's settings. A config that fails
its checks is refused whole (exit 1 with the reason; the serve's config in force
is unchanged). The listen address, the store, the data directory, the gates
list, the log settings, nats and the audit checkpoints change only at a
restart.`,
		Example: `  caduceus reload --data /var/lib/caduceus`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.reload(cmd.Context(), timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for the serve's outcome")
	return cmd
}

// reload signals the serve of the data directory and waits for the outcome
// of its reload.
func (a *app) reload(ctx context.Context, timeout time.Duration) error {
	pidPath := filepath.Join(a.cfg.Data, pidFile)
	f, err := os.Open(pidPath)
	if err != nil {
		return &exitError{1, fmt.Errorf("no serve is running on the data directory %s (no %s; pass the serve's --data)", a.cfg.Data, pidPath)}
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		return &exitError{1, fmt.Errorf("no serve is running on the data directory %s (%s was left by one that did not stop cleanly)", a.cfg.Data, pidPath)}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return &exitError{1, fmt.Errorf("%s: %v", pidPath, err)}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return &exitError{1, fmt.Errorf("%s does not hold a pid", pidPath)}
	}
	statusPath := filepath.Join(a.cfg.Data, reloadFile)
	before, _ := os.ReadFile(statusPath)
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return &exitError{1, fmt.Errorf("serve pid %d (%s): %v", pid, pidPath, err)}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		now, _ := os.ReadFile(statusPath)
		if len(now) > 0 && string(now) != string(before) {
			fields := strings.SplitN(strings.TrimSpace(string(now)), " ", 3)
			if len(fields) == 3 && fields[0] == strconv.Itoa(pid) {
				if msg, refused := strings.CutPrefix(fields[2], "refused: "); refused {
					return &exitError{1, fmt.Errorf("reload refused: %s; the config in force is unchanged", msg)}
				}
				fmt.Fprintf(a.stdout, "caduceus: serve pid %d %s\n", pid, fields[2])
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return &exitError{1, fmt.Errorf("serve pid %d did not report a reload within %s (see its log)", pid, timeout)}
		case <-t.C:
		}
	}
}

// serverConfig is the server configuration of serve over db: the core's
// services and the routes and tools of gates.
func (a *app) serverConfig(db *store.DB, keys *auth.Service, signer ed25519.PrivateKey, gates []gate.Gate) server.Config {
	ver, _ := buildInfo()
	cfg := server.Config{
		Auth:    keys,
		Audit:   db.Audit(),
		Records: db.Audit(),
		Store:   db,
		Logger:  a.log,
		Version: ver,
		Routes:  gate.Routes(gates),
		Tools:   gate.Tools(gates),
		// A store that cannot be reached is a 503, not a 500.
		Unavailable: store.IsUnavailable,

		AuditSigner:       signer,
		AuditSource:       db.Audit(),
		MCPAllowedOrigins: a.cfg.MCPAllowedOrigins,
		EdgeSecret:        a.edgeSecret(),
	}
	var trusted ed25519.PublicKey
	if signer != nil {
		trusted = signer.Public().(ed25519.PublicKey)
	}
	cfg.Trails = a.trails(db, a.cfg.Audit.CheckpointFile, trusted)
	return cfg
}

// httpServer is serve's http.Server around h.
func httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
}
