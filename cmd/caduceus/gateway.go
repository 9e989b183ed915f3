package main

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/store"
)

// gateway builds the shim's governed upstream path from shim.routes,
// shim.plans, shim.prices and shim.budgets (nil when no route is
// configured): each route's key from its key_env, the ledger and holds on
// the store every process shares.
func (a *app) gateway(db *store.DB) *gateway.Gateway {
	c := a.cfg.Shim.Gateway
	if !c.Enabled() {
		return nil
	}
	keys := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		r := c.Routes[name]
		if r.KeyEnv == "" {
			continue
		}
		if k := a.getenv(r.KeyEnv); k != "" {
			keys[name] = k
		}
	}
	// The shim records turns with shimsql.New(db), whose transaction settles the
	// reservations too: one commit fewer per request.
	timeout, _ := a.cfg.Shim.attemptTimeout() // checked at startup
	return gateway.New(gateway.Config{Upstream: c, Keys: keys, Ledger: ledger.Of(db), Holds: ledger.Of(db), Rates: ledger.Of(db), Cache: ledger.Of(db), Logger: a.log,
		DeferClose: true, HeaderTimeout: timeout, OnRouteHealth: server.RouteHealth, OnAttempt: server.UpstreamAttempt})
}

// logGateway states the gateway's routes and plans at startup, warning for
// a route whose key variable is empty.
func (a *app) logGateway() {
	c := a.cfg.Shim.Gateway
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		r := c.Routes[name]
		if cs, ok := provider.For(r.Kind).(provider.CredentialSource); ok {
			if from, err := cs.Credential(r, a.getenv); err != nil {
				a.log.Warn("shim route has no credential: its requests will be refused upstream", "route", name, "kind", r.Kind, "err", err)
			} else {
				a.log.Info("shim route", "route", name, "kind", r.Kind, "provider", r.ProviderOf(), "models", r.Models, "key", "from "+from)
			}
			continue
		}
		switch {
		case r.KeyEnv == "":
			a.log.Warn("shim route has no key_env: requests go upstream without authorization", "route", name, "url", r.BaseURL)
		case a.getenv(r.KeyEnv) == "":
			a.log.Warn("shim route key is empty: requests go upstream without authorization", "route", name, "url", r.BaseURL, "set", r.KeyEnv)
		default:
			a.log.Info("shim route", "route", name, "kind", r.Kind, "provider", r.ProviderOf(), "url", r.BaseURL, "models", r.Models, "key", "from "+r.KeyEnv)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Plans)) {
		a.log.Info("shim plan", "plan", name, "failover", c.Plans[name].Failover, "models", slices.Sorted(maps.Keys(c.Plans[name].Models)))
	}
}

// checkRoutes is serve's startup check of the gateway's routes: each
// upstream is asked for its models with the route's credential, a refused
// credential is logged as an error and the route shown unhealthy in
// /metrics (caduceus_shim_route_healthy 0), an unreachable one warned of.
func (a *app) checkRoutes(ctx context.Context, gw *gateway.Gateway) {
	for _, c := range gw.CheckRoutes(ctx) {
		switch {
		case c.Err != nil && ctx.Err() == nil:
			a.log.Warn("shim route unreachable at startup", "route", c.Route, "err", c.Err)
		case c.Refused:
			a.log.Error("shim route unhealthy: the upstream refused its credential", "route", c.Route, "status", c.Status)
		case c.Err == nil:
			a.log.Info("shim route checked", "route", c.Route, "status", c.Status)
		}
	}
}

// staleReservation is how old a reservation still open must be before the
// sweep releases it: its process died mid-call (a live stream that long is
// not expected), and it would otherwise count against its budgets forever.
const staleReservation = 6 * time.Hour

// deadAfterSweeps: a process whose beat is this many sweep intervals old
// is dead, and the sweep gives its budget leases back.
const deadAfterSweeps = 6

// ledgerJob is the shim gateway's background work: every shim.ledger_sweep
// this process beats (says it is alive) and sweeps the ledger, until ctx
// ends; then the budget slices it leased and did not use go back to the
// store for the other processes.
func (a *app) ledgerJob(ctx context.Context, db *store.DB) {
	every, _ := a.cfg.Shim.ledgerSweep() // checked at start
	a.sweepLedger(ctx, db, every)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if n, err := ledger.Of(db).ReturnLeases(rctx); err != nil {
		a.log.Warn("shim: budget leases not returned; the stale sweep releases them", "err", err)
	} else if n > 0 {
		a.log.Info("shim: budget leases returned", "microdollars", n)
	}
}

// sweepLedger beats and sweeps every interval until ctx ends: the leases of
// processes not heard from for deadAfterSweeps intervals are released
// (kill -9, a lost machine), reservations left for longer than
// staleReservation too, and the settlements dead processes left in their
// receipts are written.
func (a *app) sweepLedger(ctx context.Context, db *store.DB, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	l := ledger.Of(db.Background())
	for {
		if err := l.Beat(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("shim: ledger beat not written", "err", err)
		}
		if n, err := l.ReleaseDead(ctx, db.Now().Add(-deadAfterSweeps*every)); err != nil && ctx.Err() == nil {
			a.log.Warn("shim: leases of dead processes not released", "err", err)
		} else if n > 0 {
			a.log.Info("shim: released the budget leases of a process not heard from", "count", n, "silent_for", deadAfterSweeps*every)
		}
		n, err := l.ReleaseStale(ctx, time.Now().Add(-staleReservation))
		switch {
		case err != nil && ctx.Err() == nil:
			a.log.Warn("shim: stale ledger not swept", "err", err)
		case n > 0:
			a.log.Info("shim: swept the stale ledger (reservations and leases released, settlements written)", "count", n, "older_than", staleReservation)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
