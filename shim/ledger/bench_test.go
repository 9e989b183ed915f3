package ledger_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// BenchmarkSpendLedger measures the ledger's parts on SQLite, one at a
// time: a reservation (carved from a lease, one write per 16; and in the
// store per attempt), its settlement, and the hold check an attempt makes.
func BenchmarkSpendLedger(b *testing.B) {
	db := storetest.OpenSQLite(b)
	sp := ledger.Of(db)
	ctx := b.Context()
	r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: upstream.MaxMicrodollars}}
	n := 0
	b.Run("reserve", func(b *testing.B) {
		for b.Loop() {
			n++
			r.ID = fmt.Sprintf("r%d", n)
			if _, err := sp.Reserve(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	per := sp.PerAttempt()
	b.Run("reserve-per-attempt", func(b *testing.B) {
		for b.Loop() {
			n++
			r.ID = fmt.Sprintf("r%d", n)
			if _, err := per.Reserve(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("settle", func(b *testing.B) {
		ids := make([]upstream.Ticket, 0, b.N)
		for range b.N {
			n++
			r.ID = fmt.Sprintf("r%d", n)
			t, err := sp.Reserve(ctx, r)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, t)
		}
		b.ResetTimer()
		for i := range b.N {
			if err := sp.Settle(ctx, ids[i], 500); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("held-until", func(b *testing.B) {
		for b.Loop() {
			if _, err := sp.HeldUntil(ctx, "openai/gpt-4.1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// keepNothing is a ledger and holds that keep nothing: the baseline of
// BenchmarkShimForwardLedger.
type keepNothing struct{}

func (keepNothing) Reserve(_ context.Context, r upstream.Reservation) (upstream.Ticket, error) {
	return upstream.Ticket{Reservation: r}, nil
}
func (keepNothing) Settle(context.Context, upstream.Ticket, upstream.Microdollars) error { return nil }
func (keepNothing) Release(context.Context, upstream.Ticket) error                       { return nil }
func (keepNothing) Hold(context.Context, string, time.Time) error                        { return nil }
func (keepNothing) HeldUntil(context.Context, string) (time.Time, error)                 { return time.Time{}, nil }

// BenchmarkShimForwardLedger sends one chat request through the whole shim
// to a local fake provider, on SQLite (receipt and audit record committed
// per request, the settlement recorded in the receipt for the spend
// journal) and, when the tests have a Postgres server, on Postgres: through
// the gateway with the store's ledger and holds — without a budget, with
// budgets served from leases, with budgets reserved per attempt in the
// store — or ("holds-only") a ledger that keeps nothing and the store's
// holds, each paired with the same gateway whose ledger and holds keep
// nothing (see runPaired). added-p50-µs is what the ledger (and the hold
// check) add to the median request.
func BenchmarkShimForwardLedger(b *testing.B) {
	f := newForwardBench(b)
	handler := func(conf upstream.Config, newLedger func(*store.DB) upstream.Ledger, holds func(*store.DB) upstream.Holds) func(*store.DB) http.Handler {
		return func(db *store.DB) http.Handler {
			l := newLedger(db)
			// The store's ledger settles through the receipt's transaction; one
			// that keeps nothing has nothing to settle there.
			_, keeps := l.(*ledger.Ledger)
			gw := gateway.New(gateway.Config{Upstream: conf, Ledger: l, Holds: holds(db), Client: f.client, DeferClose: keeps})
			return shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Turns: shimsql.New(db), Client: f.client, Gateway: gw}).Handler(wire.ChatCompletions)
		}
	}
	base := handler(f.budgeted, nothing, nothingHeld)
	for _, tc := range []struct {
		name   string
		conf   upstream.Config
		ledger func(*store.DB) upstream.Ledger
		holds  func(*store.DB) upstream.Holds
	}{
		{"holds-only", f.budgeted, nothing, storeHolds},
		{"no-budget", f.conf, storeLedger, storeHolds},
		{"budget-leased", f.budgeted, storeLedger, storeHolds},
		{"budget-per-attempt", f.budgeted, func(db *store.DB) upstream.Ledger { return ledger.Of(db).PerAttempt() }, storeHolds},
	} {
		f.runPaired(b, tc.name, storetest.OpenSQLite, base, handler(tc.conf, tc.ledger, tc.holds))
	}
	// On Postgres (when the tests have one) the two cases an operator
	// chooses between; each store is a schema of its own.
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		open := func(tb testing.TB) *store.DB { return storetest.OpenPostgres(tb, dsn) }
		f.runPaired(b, "postgres/no-budget", open, base, handler(f.conf, storeLedger, storeHolds))
		f.runPaired(b, "postgres/budget-leased", open, base, handler(f.budgeted, storeLedger, storeHolds))
	}
}

func nothing(*store.DB) upstream.Ledger        { return keepNothing{} }
func nothingHeld(*store.DB) upstream.Holds     { return keepNothing{} }
func storeLedger(db *store.DB) upstream.Ledger { return ledger.Of(db) }
func storeHolds(db *store.DB) upstream.Holds   { return ledger.Of(db) }
