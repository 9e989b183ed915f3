package ledger_test

import (
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestTightBudgetAttemptHoldsNothingInLeases: when one budget has too
// little left to lease, the attempt reserves in the store, and what it had
// carved from the leases of its other totals goes back to them: it is
// counted once, and what the leases give back is exactly what no attempt
// took.
func TestTightBudgetAttemptHoldsNothingInLeases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		const amount = 1000
		r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: amount,
			KeyLimit: upstream.Limit{Day: 1_000_000}, TenantLimit: upstream.Limit{Day: 3 * amount}}
		// The first attempt leases 16 attempts of the key's day and half
		// of what the tenant's day has left (1500).
		r.ID = "rct_1-0"
		first, err := sp.Reserve(ctx, r)
		if err != nil || first.Stored || first.Leases[0] == "" || first.Leases[2] == "" {
			t.Fatalf("first: %+v, %v; want both day totals served from leases", first, err)
		}
		// The second finds the key's lease full and the tenant's short,
		// with too little left to lease (half of 1500 is below 1000).
		r.ID = "rct_2-0"
		second, err := sp.Reserve(ctx, r)
		if err != nil || !second.Stored || second.Leases != [4]string{} {
			t.Fatalf("second: %+v, %v; want it reserved in the store, holding nothing in a lease", second, err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 16*amount+amount {
			t.Fatalf("key day total %d, want the lease and the stored attempt %d", n, 16*amount+amount)
		}
		returned, err := sp.ReturnLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Unused: the key's lease less the first attempt, the tenant's less
		// the first attempt.
		if want := int64(16*amount - amount + 1500 - amount); returned != want {
			t.Fatalf("returned %d, want %d", returned, want)
		}
		for scope, want := range map[string]int64{"key:k1": 2 * amount, "tenant:slot-1": 2 * amount} {
			if n := spendTotal(t, sp, scope, "2026-11-29"); n != want {
				t.Errorf("%s day total %d after the return, want the two attempts in flight %d", scope, n, want)
			}
		}
	})
}
