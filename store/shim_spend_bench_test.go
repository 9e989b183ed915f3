package store_test

import (
	"fmt"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// BenchmarkSpendLedger measures the ledger's parts on SQLite, one at a
// time: a reservation (carved from a lease, one write per 16; and in the
// store per attempt), its settlement, and the hold check an attempt makes.
func BenchmarkSpendLedger(b *testing.B) {
	db := storetest.OpenSQLite(b)
	sp := db.ShimSpend()
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
