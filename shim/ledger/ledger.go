package ledger

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

// The ledger's tables (spend rows, running totals, holds, leases); the
// receipts' ledger column is the shim gate's (shim/shimsql).
//
//go:embed migrations/*.sql
var migrations embed.FS

func init() { store.RegisterMigrations("shim/ledger", migrations, "migrations") }

// Ledger is the shim gateway's ledger (spend reservations, settlements,
// budgets) and its rate-limit holds; it implements upstream.Ledger and
// upstream.Holds.
//
// An attempt under a budget is served from a lease: a slice of each
// budgeted running total this process took from the store in one write
// (see leaseBook). An attempt without any budget reserves nothing: its
// spend is written when it settles (through the receipt's transaction and
// the spend journal, see journal.go).
type Ledger struct {
	db   *store.DB
	book *leaseBook // nil: every budgeted attempt reserves in the store
}

// Of returns db's spend ledger and holds. Every Ledger of one DB shares
// its leases, its journal and its copy of the holds (one process's part
// of the store, closed with it: store.DB.Part).
func Of(db *store.DB) *Ledger { return &Ledger{db: db, book: bookOf(db)} }

// process is what one process keeps of a store's ledger, made on first use
// and closed with the store: its leases, its journal of deferred
// settlements, and the holds as last read.
type process struct {
	leaseOnce   sync.Once
	leases      *leaseBook // made on first use
	journalOnce sync.Once
	journal     *spendJournal // made on first use
	holds       holdBook
	health      healthBook // the routes' health, as last read
	ratesOnce   sync.Once
	rates       rateBook // this process's slices of the rate windows
}

type processKey struct{}

// processOf is db's process part.
func processOf(db *store.DB) *process {
	return db.Part(processKey{}, func() io.Closer { return &process{} }).(*process)
}

// Close stops the lease book's expiry timer and writes the journal's
// pending settlements (for at most 30 seconds): the store is closing.
func (p *process) Close() error {
	p.holds.watch.Do(func() {}) // no listener starts after this
	p.holds.close()
	if p.leases != nil {
		p.leases.stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.ratesOnce.Do(func() {}) // no rate book is made after this
	p.rates.close(ctx)
	if p.journal != nil {
		p.journal.close(ctx)
	}
	return nil
}

// PerAttempt returns the ledger without leases: every budgeted attempt
// writes its reservation to the store before its call.
func (s *Ledger) PerAttempt() *Ledger { return &Ledger{db: s.db} }

var (
	_ upstream.Ledger = (*Ledger)(nil)
	_ upstream.Holds  = (*Ledger)(nil)
)

// Spend states.
const (
	spendReserved = "reserved"
	spendSettled  = "settled"
	spendReleased = "released"
)

// unbounded is the bound of a scope without a budget.
const unbounded = math.MaxInt64 / 4

// spendTotal is one running total an attempt counts in, and its bound.
type spendTotal struct {
	scope, period string
	limit         int64 // unbounded: no budget
}

// periods are the four running totals an attempt counts in: key day, key
// month, tenant day, tenant month.
func periods(tenant contract.TenantSlot, keyID string, now time.Time, key, ten upstream.Limit) [4]spendTotal {
	now = now.UTC()
	day, month := now.Format("2006-01-02"), now.Format("2006-01")
	bound := func(m upstream.Microdollars) int64 {
		if m <= 0 {
			return unbounded
		}
		return int64(m)
	}
	return [4]spendTotal{
		{"key:" + keyID, day, bound(key.Day)},
		{"key:" + keyID, month, bound(key.Month)},
		{"tenant:" + string(tenant), day, bound(ten.Day)},
		{"tenant:" + string(tenant), month, bound(ten.Month)},
	}
}

// Reserve implements upstream.Ledger. A reservation counts only in the
// totals that have a budget (with none, nothing is written). It is carved
// from this process's leases when they hold enough (no write), else from
// new leases (one write), else — when what remains of a budget is too
// small to lease — reserved per attempt in the store, where each bounded
// total is raised by one conditional upsert that succeeds only while it
// stays within its bound; the first that fails rolls the whole reservation
// back, and before it refuses, this process writes its pending settlements
// and gives back its unused leases of those totals, and tries once more. On Postgres the upsert locks the total's row and re-reads it, and
// on SQLite the transaction holds the write lock, so concurrent
// reservations are serialised per total and never overspend.
func (s *Ledger) Reserve(ctx context.Context, r upstream.Reservation) (upstream.Ticket, error) {
	if r.Amount < 0 || r.ID == "" {
		return upstream.Ticket{}, contract.Invalidf("bad_reservation", "a reservation needs an id and a non-negative amount")
	}
	now := s.db.Now()
	ps := periods(r.Tenant, r.KeyID, now, r.KeyLimit, r.TenantLimit)
	t := upstream.Ticket{Reservation: r, Day: ps[0].period, Month: ps[1].period}
	bounded := false
	for _, p := range ps {
		if p.limit == unbounded {
			continue
		}
		if int64(r.Amount) > p.limit {
			return upstream.Ticket{}, upstream.ErrBudgetExceeded
		}
		bounded = true
	}
	if !bounded {
		return t, nil
	}
	if s.book != nil {
		ok, err := s.book.reserve(ctx, &t, ps, now)
		if err != nil || ok {
			return t, err
		}
	}
	err := s.reserveStored(ctx, r, ps, now)
	if errors.Is(err, upstream.ErrBudgetExceeded) {
		// What this process holds and no longer needs counts against the
		// budget too: give it back and try once more before refusing.
		if freed, rerr := s.freeHeld(ctx, ps); rerr == nil && freed {
			err = s.reserveStored(ctx, r, ps, now)
		}
	}
	if err != nil {
		return upstream.Ticket{}, err
	}
	t.Stored = true
	return t, nil
}

// freeHeld writes and gives back what this process holds in the totals ps
// beyond its attempts in flight, and reports whether there was any: the
// settlements its spend journal has not written yet (until written, each
// counts at its reservation, which its lease holds) and what its leases of
// ps hold unused. Without it, a budget nearly used refuses for as long as
// the journal waits to write ("429 ok ok 429 ok ok" under load).
func (s *Ledger) freeHeld(ctx context.Context, ps [4]spendTotal) (bool, error) {
	j := journalOf(s.db)
	j.mu.Lock()
	pending := j.n > 0
	j.mu.Unlock()
	if pending {
		if err := j.write(ctx); err != nil {
			return false, err
		}
	}
	if s.book == nil {
		return pending, nil
	}
	n, err := s.book.giveBack(ctx, func(k leaseKey, _ *lease) bool { return k.in(ps) }, false)
	return pending || n > 0, err
}

// reserveStored reserves r in the store: its own row (naming this
// process's lease holder, so a sweep that takes the process for dead
// releases it), and its amount in all four totals, each bounded one only
// while it stays within its budget.
func (s *Ledger) reserveStored(ctx context.Context, r upstream.Reservation, ps [4]spendTotal, now time.Time) error {
	amount := int64(r.Amount)
	return s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		for _, p := range ps {
			res, err := tx.Exec(ctx, `INSERT INTO shim_spend_totals (scope, period, amount) VALUES (?, ?, ?)
				ON CONFLICT (scope, period) DO UPDATE SET amount = shim_spend_totals.amount + excluded.amount
				WHERE shim_spend_totals.amount + excluded.amount <= ?`, p.scope, p.period, amount, p.limit)
			if err != nil {
				return fmt.Errorf("store: reserve: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return upstream.ErrBudgetExceeded
			}
		}
		var holder any // NULL: no leases, no holder
		if s.book != nil {
			holder = s.book.holder
		}
		_, err := tx.Exec(ctx, `INSERT INTO shim_spend (id, tenant, key_id, model, day, month, reserved, settled, state, created_at, updated_at, holder)
			VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)`,
			r.ID, string(r.Tenant), r.KeyID, r.Identity, ps[0].period, ps[1].period, amount, spendReserved, store.Micros(now), store.Micros(now), holder)
		if store.IsUniqueViolation(err) {
			return contract.Conflictf("reservation_exists", "reservation %s already exists", r.ID)
		}
		if err != nil {
			return fmt.Errorf("store: reserve: %w", err)
		}
		return nil
	})
}

// Settle implements upstream.Ledger.
func (s *Ledger) Settle(ctx context.Context, t upstream.Ticket, actual upstream.Microdollars) error {
	if actual < 0 {
		return contract.Invalidf("bad_settlement", "a settlement is never negative")
	}
	return s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		return closeTicket(ctx, tx, s.db.Now(), t, spendSettled, int64(actual))
	})
}

// Release implements upstream.Ledger.
func (s *Ledger) Release(ctx context.Context, t upstream.Ticket) error {
	return s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		return closeTicket(ctx, tx, s.db.Now(), t, spendReleased, 0)
	})
}

// closeTicket closes an attempt inside tx: its stored reservation, or —
// when it reserved nothing in the store — by writing its row now and
// moving the totals: a total it carved from a lease still open takes the
// amount out of the lease and adds final minus the amount (the lease held
// it already); any other adds final.
func closeTicket(ctx context.Context, tx *store.Tx, now time.Time, t upstream.Ticket, state string, final int64) error {
	if t.Stored {
		return closeReservation(ctx, tx, now, t.ID, state, final, t.Estimated)
	}
	if t.ID == "" || t.Day == "" || t.Month == "" {
		return contract.Invalidf("bad_reservation", "a ticket needs an id and its periods")
	}
	settled := sql.NullInt64{Int64: final, Valid: state == spendSettled}
	_, err := tx.Exec(ctx, `INSERT INTO shim_spend (id, tenant, key_id, model, day, month, reserved, settled, state, created_at, updated_at, estimated)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, string(t.Tenant), t.KeyID, t.Identity, t.Day, t.Month, int64(t.Amount), settled, state, store.Micros(now), store.Micros(now), flag(t.Estimated && state == spendSettled))
	if store.IsUniqueViolation(err) {
		return contract.Conflictf("reservation_closed", "reservation %s is already closed", t.ID)
	}
	if err != nil {
		return fmt.Errorf("store: %s reservation: %w", state, err)
	}
	return moveTotals(ctx, tx, t, final)
}

// moveTotals moves the totals and leases of an attempt closed without a
// stored reservation (see closeTicket).
func moveTotals(ctx context.Context, tx *store.Tx, t upstream.Ticket, final int64) error {
	var m ledgerMoves
	m.add(t, final)
	return m.write(ctx, tx)
}

// ticketTotals are the four totals of t, in the order of t.Leases.
func ticketTotals(t upstream.Ticket) [4][2]string {
	k, ten := "key:"+t.KeyID, "tenant:"+string(t.Tenant)
	return [4][2]string{{k, t.Day}, {k, t.Month}, {ten, t.Day}, {ten, t.Month}}
}

// flag is a boolean column's value.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}

// closeReservation moves a reserved attempt to state with its final amount
// (an estimate when estimated) and moves the four totals by the
// difference, inside tx.
func closeReservation(ctx context.Context, tx *store.Tx, now time.Time, id, state string, final int64, estimated bool) error {
	var tenant, keyID, day, month, cur string
	var reserved int64
	err := tx.QueryRow(ctx, `SELECT tenant, key_id, day, month, reserved, state FROM shim_spend WHERE id = ?`+tx.Dialect().ForUpdate(), id).
		Scan(&tenant, &keyID, &day, &month, &reserved, &cur)
	if errors.Is(err, sql.ErrNoRows) {
		return contract.NotFoundf("reservation_not_found", "no reservation %s", id)
	}
	if err != nil {
		return fmt.Errorf("store: %s reservation: %w", state, err)
	}
	if cur != spendReserved {
		return contract.Conflictf("reservation_closed", "reservation %s is already %s", id, cur)
	}
	settled := sql.NullInt64{Int64: final, Valid: state == spendSettled}
	if _, err := tx.Exec(ctx, `UPDATE shim_spend SET state = ?, settled = ?, updated_at = ?, estimated = ? WHERE id = ?`,
		state, settled, store.Micros(now), flag(estimated && state == spendSettled), id); err != nil {
		return fmt.Errorf("store: %s reservation: %w", state, err)
	}
	if delta := final - reserved; delta != 0 {
		for _, p := range [][2]string{{"key:" + keyID, day}, {"key:" + keyID, month}, {"tenant:" + tenant, day}, {"tenant:" + tenant, month}} {
			if err := addToTotal(ctx, tx, p[0], p[1], delta); err != nil {
				return fmt.Errorf("store: %s reservation: %w", state, err)
			}
		}
	}
	return nil
}

// closeAttempts closes, inside tx, the reservations a gateway left to its
// caller (gateway.Config.DeferClose). One already closed or unknown is
// skipped: it has nothing left to count.
func closeAttempts(ctx context.Context, tx *store.Tx, now time.Time, attempts []gateway.Attempt) error {
	for _, a := range attempts {
		var err error
		switch a.Closing {
		case gateway.CloseSettle:
			err = closeTicket(ctx, tx, now, a.Ticket, spendSettled, a.Settled)
		case gateway.CloseRelease:
			err = closeTicket(ctx, tx, now, a.Ticket, spendReleased, 0)
		}
		if k := contract.KindOf(err); err != nil && k != contract.KindConflict && k != contract.KindNotFound {
			return err
		}
	}
	return nil
}

// ReleaseStale releases every attempt still reserved that was made before
// cutoff (a process that died mid-call leaves its reservation open) and
// every lease last written before cutoff (its process died holding it),
// writes the settlements receipts still carry a minute after their turn
// began (their process died before its spend journal wrote them), and
// reports how many it released and wrote.
func (s *Ledger) ReleaseStale(ctx context.Context, cutoff time.Time) (int, error) {
	if err := s.sweepRates(ctx, cutoff); err != nil {
		return 0, fmt.Errorf("store: stale rate windows: %w", err)
	}
	if err := s.sweepCache(ctx, s.db.Now()); err != nil {
		return 0, fmt.Errorf("store: expired cache: %w", err)
	}
	n, err := s.releaseReserved(ctx, `created_at < ?`, store.Micros(cutoff))
	if err != nil {
		return n, err
	}
	m, err := s.releaseStaleLeases(ctx, cutoff)
	if err != nil {
		return n + m, err
	}
	k, err := s.recoverJournal(ctx, s.db.Now().Add(-journalStale))
	return n + m + k, err
}

// releaseReserved releases the attempts still reserved where (a condition
// on shim_spend with arg) holds, each in a transaction of its own (one
// settled meanwhile is left alone), and reports how many.
func (s *Ledger) releaseReserved(ctx context.Context, where string, arg any) (int, error) {
	ids, err := store.AppendRows([]string(nil), store.QueryRows(ctx, s.db, "reservation", store.ScanValue[string],
		`SELECT id FROM shim_spend WHERE state = ? AND `+where, spendReserved, arg))
	if err != nil {
		return 0, fmt.Errorf("store: open reservations: %w", err)
	}
	n := 0
	for _, id := range ids {
		err := s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
			return closeReservation(ctx, tx, s.db.Now(), id, spendReleased, 0, false)
		})
		if contract.KindOf(err) == contract.KindConflict {
			continue // settled meanwhile
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// SpendRow is gateway.SpendRow: one key and model identity's spend.
type SpendRow = gateway.SpendRow

// Spend reports a tenant's spend per key and model identity since the given
// time (keyID "": every key of the tenant), ordered by key and model.
func (s *Ledger) Spend(ctx context.Context, tenant contract.TenantSlot, keyID string, since time.Time) ([]SpendRow, error) {
	if err := s.flushJournal(ctx); err != nil {
		return nil, err
	}
	q := `SELECT key_id, model, COUNT(*), SUM(reserved), SUM(COALESCE(settled, 0)),
		SUM(CASE WHEN estimated <> 0 THEN COALESCE(settled, 0) ELSE 0 END),
		SUM(CASE WHEN state = 'reserved' THEN reserved ELSE 0 END)
		FROM shim_spend WHERE tenant = ? AND created_at >= ?`
	args := []any{string(tenant), store.Micros(since)}
	if keyID != "" {
		q += ` AND key_id = ?`
		args = append(args, keyID)
	}
	q += ` GROUP BY key_id, model ORDER BY key_id, model`
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: spend: %w", err)
	}
	defer rows.Close()
	out := []SpendRow{}
	for rows.Next() {
		var r SpendRow
		if err := rows.Scan(&r.KeyID, &r.Model, &r.Attempts, &r.Reserved, &r.Settled, &r.Estimated, &r.Open); err != nil {
			return nil, fmt.Errorf("store: spend: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Total is what a scope ("key:<id>", "tenant:<slot>") has spent and holds
// reserved in a period ("2026-11-30", "2026-11").
func (s *Ledger) Total(ctx context.Context, scope, period string) (int64, error) {
	if err := s.flushJournal(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.QueryRow(ctx, `SELECT amount FROM shim_spend_totals WHERE scope = ? AND period = ?`, scope, period).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: spend total: %w", err)
	}
	return n, nil
}

// addToTotal moves a running total (shim_spend_totals) by delta: a lease's
// grant or return, a settlement's difference from its reservation.
func addToTotal(ctx context.Context, q store.Querier, scope, period string, delta int64) error {
	_, err := q.Exec(ctx, `UPDATE shim_spend_totals SET amount = amount + ? WHERE scope = ? AND period = ?`, delta, scope, period)
	return err
}
