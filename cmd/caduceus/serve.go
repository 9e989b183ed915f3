package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/internal/gcfloor"
)

// bootstrapTenant owns the admin key made on first start.
const bootstrapTenant contract.TenantSlot = "slot-1"

func (a *app) serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Caduceus server",
		Long: `Run the HTTP server: management API under /v1, the MCP endpoint at /mcp,
/healthz, /readyz, /metrics and the operator console at /console
(caduceus console prints a login link). With no flags it runs on SQLite in ./.caduceus
and listens on 127.0.0.1:7600. On first start, when no admin key exists, it
creates one for slot-1 and prints it once.`,
		Example: `  caduceus serve
  caduceus serve --addr 127.0.0.1:0 --data /tmp/cad
  caduceus serve --store postgres://postgres@127.0.0.1:5432/test?sslmode=disable`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.serve(cmd.Context()) },
	}
	cmd.Flags().StringVar(&a.cfg.Addr, "addr", "", "listen address (default 127.0.0.1:7600; env CADUCEUS_ADDR)")
	cmd.Flags().StringSliceVar(&a.cfg.Gates, "gates", nil, "gates to run: trader,executor,shim,relay (default all; env CADUCEUS_GATES)")
	a.addSectionFlags(cmd)
	cmd.Flags().StringVar(&a.auditFlags.CheckpointFile, "audit-checkpoint-file", "", "write a signed audit checkpoint to this file every interval (env CADUCEUS_AUDIT_CHECKPOINT_FILE)")
	cmd.Flags().StringVar(&a.auditFlags.CheckpointURL, "audit-checkpoint-url", "", "POST a signed audit checkpoint to this URL every interval (env CADUCEUS_AUDIT_CHECKPOINT_URL)")
	cmd.Flags().StringVar(&a.auditFlags.CheckpointInterval, "audit-checkpoint-interval", "", "how often to write the checkpoint (default 5m; env CADUCEUS_AUDIT_CHECKPOINT_INTERVAL)")
	cmd.Flags().DurationVar(&a.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM or SIGINT, how long requests and streams in flight may take to finish before their connections are closed")
	cmd.Flags().StringVar(&a.otlpEndpoint, "otlp-endpoint", "", "export OpenTelemetry traces over OTLP/HTTP to this collector base URL (http://HOST:4318; spans go to /v1/traces); default "+envOTLPEndpoint+", unset: no tracing")
	cmd.Flags().StringSliceVar(&a.originFlags, "mcp-allowed-origin", nil, "a browser Origin /mcp accepts; repeatable (default none; env CADUCEUS_MCP_ALLOWED_ORIGINS)")
	return cmd
}

func (a *app) serve(ctx context.Context) error {
	if err := a.checkServeConfig(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The collector waits for a 32 MiB heap goal while little is live
	// (internal/gcfloor); GOGC and GOMEMLIMIT still rule.
	defer gcfloor.Start(0, a.getenv("GOGC")).Stop()
	// Tracing ends last, once requests, jobs and the store have: its
	// flush exports the spans still buffered (telemetry.go).
	endTracing, err := a.startTracing(ctx)
	if err != nil {
		return err
	}
	defer endTracing()

	db, err := a.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	keys := auth.NewService(db.Keys(), nil, auth.DefaultCacheTTL)
	if err := a.bootstrapAdmin(ctx, keys); err != nil {
		return err
	}
	// The background work: the core's (revocations made by other processes
	// reach this one's key cache at once; the audit checkpoints) and the
	// gates'. It runs until the server has stopped, and the store closes
	// only after it has all returned.
	jobs, stopJobs := context.WithCancel(context.WithoutCancel(ctx))
	var core sync.WaitGroup
	defer func() { stopJobs(); core.Wait() }()
	core.Go(func() { keys.Watch(jobs) })
	signer, err := a.signingKey(true)
	if err != nil {
		return err
	}
	core.Go(func() { a.checkpointer(jobs, db.Audit(), signer) })

	// SIGHUP reloads the config (reload.go); caught from here on, so it
	// never ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	first, err := a.build(ctx, db, keys, signer, nil)
	if err != nil {
		return err
	}
	first.start(jobs)
	h := &swapHandler{}
	h.cur.Store(first)
	r := &reloader{a: a, ctx: ctx, jobs: jobs, db: db, keys: keys, signer: signer, h: h}
	// At the end: the generations' jobs end and what they hold closes,
	// after the requests (and before the core's jobs and the store).
	defer func() {
		stopJobs()
		r.retiring.Wait()
		h.cur.Load().stop()
	}()

	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return err
	}
	hs := httpServer(h)
	a.logStartup(db, ln.Addr().String())
	if a.cfg.LogFormat != "json" { // a JSON log is all JSON: its "listening" record has the address
		fmt.Fprintf(a.stderr, "caduceus: listening on http://%s\n", ln.Addr())
	}
	removePid, err := a.writePidFile()
	if err != nil {
		ln.Close()
		return err
	}
	defer removePid()

	// http.Server.Shutdown does not wait for WebSockets: close them.
	hs.RegisterOnShutdown(func() { h.cur.Load().closeSockets() })
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
wait:
	for {
		select {
		case err := <-errc:
			return err
		case <-hup:
			r.reload()
		case <-ctx.Done():
			break wait
		}
	}
	a.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.shutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// What is still in flight past the bound is cut; each answer that
		// left was committed before it did.
		a.log.Warn("shutting down: requests still in flight after the shutdown timeout; closing their connections", "timeout", a.shutdownTimeout)
		hs.Close()
		err = nil
	}
	// The requests have finished: the background work ends, and the
	// deferred waits hold the store open until it has.
	stopJobs()
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// bootstrapAdmin creates the first admin key when there is none and prints
// it once on stdout.
func (a *app) bootstrapAdmin(ctx context.Context, keys *auth.Service) error {
	ok, err := keys.HasActiveAdmin(ctx)
	if err != nil || ok {
		return err
	}
	token, key, err := keys.Create(ctx, auth.Spec{Tenant: bootstrapTenant, Scopes: contract.Scopes})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "caduceus: no admin key existed; created key %s for %s with every scope. It is shown once:\n%s\n", key.ID, key.Tenant, token)
	return nil
}
