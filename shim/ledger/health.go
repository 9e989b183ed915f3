package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

var _ upstream.RouteHealth = (*Ledger)(nil)

// The routes' health (shim_route_health) is read as the holds are: from
// this process's copy, read again when it is HoldRefresh old (on Postgres,
// HoldRefreshListening while the holds' listener is up: a change is
// announced on the holds' channel, and the listener drops both copies). A
// change this process makes is in its copy at once. So a route another
// process found unhealthy is skipped here at most 250 ms later (on
// Postgres, a notification's round trip), and a request costs no read of
// the store.

// healthBook is a DB's copy of shim_route_health.
type healthBook struct {
	mu        sync.Mutex
	runs      map[string]healthRun // nil: read again
	read      time.Time
	listening bool
}

// healthRun is a route's run of failures.
type healthRun struct {
	failures int64
	until    time.Time // zero: the run has not made it unhealthy
}

// heard drops the copy (a change was announced) and says whether the
// listener is up.
func (b *healthBook) heard(listening bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if listening {
		b.runs = nil
	}
	b.listening = listening
}

// run is route's run, from the copy (read again when stale); the caller
// holds b.mu.
func (s *Ledger) run(ctx context.Context, b *healthBook, route string) (healthRun, error) {
	now := s.db.Now()
	refresh := HoldRefresh
	if b.listening {
		refresh = HoldRefreshListening
	}
	if b.runs == nil || now.Sub(b.read) >= refresh || now.Before(b.read) {
		runs, err := s.readHealth(ctx)
		if err != nil {
			return healthRun{}, err
		}
		b.runs, b.read = runs, now
	}
	return b.runs[route], nil
}

// healthOf is db's copy, its listener started on Postgres.
func (s *Ledger) healthOf() *healthBook {
	p := processOf(s.db)
	if s.db.Dialect() == store.Postgres {
		p.holds.watch.Do(func() { p.holds.listen(s.db, p.health.heard) })
	}
	return &p.health
}

// UnhealthyUntil implements upstream.RouteHealth from this process's copy.
func (s *Ledger) UnhealthyUntil(ctx context.Context, route string) (time.Time, error) {
	b := s.healthOf()
	b.mu.Lock()
	defer b.mu.Unlock()
	r, err := s.run(ctx, b, route)
	return r.until, err
}

// RouteFailed implements upstream.RouteHealth: one upsert that counts the
// failure and, once the run reaches threshold, sets until; on Postgres the
// change is announced to the other processes.
func (s *Ledger) RouteFailed(ctx context.Context, route string, threshold int, until time.Time) error {
	first := int64(0)
	if threshold <= 1 {
		first = store.Micros(until)
	}
	var r healthRun
	var at int64
	err := s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO shim_route_health (route, failures, unhealthy_until) VALUES (?, 1, ?)
			ON CONFLICT (route) DO UPDATE SET failures = shim_route_health.failures + 1,
			unhealthy_until = CASE WHEN shim_route_health.failures + 1 >= ? THEN ? ELSE shim_route_health.unhealthy_until END
			RETURNING failures, unhealthy_until`, route, first, int64(threshold), store.Micros(until)).Scan(&r.failures, &at); err != nil {
			return fmt.Errorf("store: route health: %w", err)
		}
		return s.announce(ctx, tx, route)
	})
	if err != nil {
		return err
	}
	if at != 0 {
		r.until = store.FromMicros(at)
	}
	b := s.healthOf()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runs != nil {
		b.runs[route] = r
	}
	return nil
}

// RouteAnswered implements upstream.RouteHealth: when the copy knows of a
// run of route's, its row is deleted (and on Postgres the change
// announced); otherwise nothing is written.
func (s *Ledger) RouteAnswered(ctx context.Context, route string) error {
	b := s.healthOf()
	b.mu.Lock()
	r, err := s.run(ctx, b, route)
	b.mu.Unlock()
	if err != nil || r.failures == 0 {
		return err
	}
	err = s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM shim_route_health WHERE route = ?`, route); err != nil {
			return fmt.Errorf("store: route health: %w", err)
		}
		return s.announce(ctx, tx, route)
	})
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runs != nil {
		delete(b.runs, route)
	}
	return nil
}

// announce tells the other processes, on Postgres, that route's health
// changed (at tx's commit).
func (s *Ledger) announce(ctx context.Context, tx *store.Tx, route string) error {
	if s.db.Dialect() != store.Postgres {
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify(?, ?)`, holdsChannel, "route:"+route); err != nil {
		return fmt.Errorf("store: route health: notify: %w", err)
	}
	return nil
}

// readHealth reads every route's run.
func (s *Ledger) readHealth(ctx context.Context) (map[string]healthRun, error) {
	type row struct {
		route    string
		failures int64
		until    int64
	}
	rows := store.QueryRows(ctx, s.db, "route health", func(r store.Scanner) (h row, err error) {
		err = r.Scan(&h.route, &h.failures, &h.until)
		return h, err
	}, `SELECT route, failures, unhealthy_until FROM shim_route_health`)
	runs := map[string]healthRun{}
	err := store.EachRow(rows, func(h row) error {
		r := healthRun{failures: h.failures}
		if h.until != 0 {
			r.until = store.FromMicros(h.until)
		}
		runs[h.route] = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return runs, nil
}
