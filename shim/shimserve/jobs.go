package shimserve

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
)

// checkRoutes is serve's startup check of the gateway's routes: each
// upstream is asked for its models with the route's credential, a refused
// credential is logged as an error and the route shown unhealthy in
// /metrics (caduceus_shim_route_healthy 0), an unreachable one warned of.
func checkRoutes(ctx context.Context, h registry.Host, gw *gateway.Gateway) {
	for _, c := range gw.CheckRoutes(ctx) {
		switch {
		case c.Err != nil && ctx.Err() == nil:
			h.Log.Warn("shim route unreachable at startup", "route", c.Route, "err", c.Err)
		case c.Refused:
			h.Log.Error("shim route unhealthy: the upstream refused its credential", "route", c.Route, "status", c.Status)
		case c.Err == nil:
			h.Log.Info("shim route checked", "route", c.Route, "status", c.Status)
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
func ledgerJob(ctx context.Context, h registry.Host, every time.Duration) {
	db := h.DB
	sweepLedger(ctx, h, every)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if n, err := ledger.Of(db).ReturnLeases(rctx); err != nil {
		h.Log.Warn("shim: budget leases not returned; the stale sweep releases them", "err", err)
	} else if n > 0 {
		h.Log.Info("shim: budget leases returned", "microdollars", n)
	}
}

// sweepLedger beats and sweeps every interval until ctx ends: the leases of
// processes not heard from for deadAfterSweeps intervals are released
// (kill -9, a lost machine), reservations left for longer than
// staleReservation too, and the settlements dead processes left in their
// receipts are written.
func sweepLedger(ctx context.Context, h registry.Host, every time.Duration) {
	db := h.DB
	t := time.NewTicker(every)
	defer t.Stop()
	l := ledger.Of(db.Background())
	for {
		if err := l.Beat(ctx); err != nil && ctx.Err() == nil {
			h.Log.Warn("shim: ledger beat not written", "err", err)
		}
		if n, err := l.ReleaseDead(ctx, db.Now().Add(-deadAfterSweeps*every)); err != nil && ctx.Err() == nil {
			h.Log.Warn("shim: leases of dead processes not released", "err", err)
		} else if n > 0 {
			h.Log.Info("shim: released the budget leases of a process not heard from", "count", n, "silent_for", deadAfterSweeps*every)
		}
		n, err := l.ReleaseStale(ctx, time.Now().Add(-staleReservation))
		switch {
		case err != nil && ctx.Err() == nil:
			h.Log.Warn("shim: stale ledger not swept", "err", err)
		case n > 0:
			h.Log.Info("shim: swept the stale ledger (reservations and leases released, settlements written)", "count", n, "older_than", staleReservation)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
