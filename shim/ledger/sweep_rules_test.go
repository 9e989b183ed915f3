package ledger_test

import (
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestStaleSweepCountsEverythingItDid states what ReleaseStale reports:
// the sum of the reservations it released, the leases it released and the
// settlements it wrote — here one, one and three, left by a process that
// died — and a second sweep finds nothing left to do.
func TestStaleSweepCountsEverythingItDid(t *testing.T) {
	openTwice(t, func(t *testing.T, dead, live *store.DB) {
		ctx := t.Context()
		spDead := ledger.Of(dead)
		spDead.HoldJournal()
		s := newJournalShim(t, dead, 20, upstream.Budgets{Tenant: upstream.Limit{Day: 1_000_000_000}})
		for range 3 {
			if code := s.send(ctx); code != 200 {
				t.Fatalf("status %d", code)
			}
		}
		// A reservation stored one by one (half its budget is too little
		// to lease it), never closed.
		tk, err := spDead.Reserve(ctx, upstream.Reservation{ID: "rct_s-0", Tenant: "slot-2", KeyID: "k9", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1999}})
		if err != nil || !tk.Stored {
			t.Fatalf("%+v, %v; want a stored reservation", tk, err)
		}
		spDead.DropJournal() // killed
		if n := count(t, live, `SELECT COUNT(*) FROM shim_spend_leases WHERE state = 'open'`); n != 1 {
			t.Fatalf("the dead process holds %d leases, want 1", n)
		}
		live.Now = func() time.Time { return time.Now().Add(2 * time.Minute) }
		sp := ledger.Of(live)
		n, err := sp.ReleaseStale(ctx, time.Now().Add(time.Minute))
		if err != nil || n != 1+1+3 {
			t.Fatalf("ReleaseStale = %d, %v; want 5: 1 reservation and 1 lease released, 3 settlements written", n, err)
		}
		if n, err := sp.ReleaseStale(ctx, time.Now().Add(time.Minute)); err != nil || n != 0 {
			t.Fatalf("a second sweep = %d, %v; want nothing left", n, err)
		}
	})
}

// TestTurnCommitSkipsOnlyClosedOrUnknownAttempts states the commit's rule
// for the closes it makes itself: an attempt already closed, or one the
// store does not know, has nothing left to count and is skipped; any other
// failure (a ticket without its periods) fails the commit.
func TestTurnCommitSkipsOnlyClosedOrUnknownAttempts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		tk, err := sp.Reserve(ctx, upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1999}})
		if err != nil || !tk.Stored {
			t.Fatalf("%+v, %v; want a stored reservation", tk, err)
		}
		must(t, sp.Settle(ctx, tk, 500))
		unknown := tk
		unknown.ID = "rct_none-0"
		noPeriods := upstream.Ticket{Reservation: upstream.Reservation{ID: "rct_2-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000}}
		commit := func(t upstream.Ticket) error {
			c := ledger.CloseTurn([]gateway.Attempt{{Closing: gateway.CloseSettle, Settled: 500, Ticket: t}}, now)
			return db.InTx(ctx, func(tx *store.Tx) error { return c.Commit(ctx, tx) })
		}
		if err := commit(tk); err != nil {
			t.Errorf("an attempt already settled: %v; want skipped", err)
		}
		if err := commit(unknown); err != nil {
			t.Errorf("an attempt the store does not know: %v; want skipped", err)
		}
		if err := commit(noPeriods); contract.KindOf(err) != contract.KindInvalid {
			t.Errorf("a ticket without its periods: %v; want the commit to fail as invalid", err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 500 {
			t.Errorf("key day total %d, want the one settlement, 500", n)
		}
	})
}
