package ledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestLeaseServesWhatItHoldsExactly states the carving rule's two edges:
// an attempt whose amount is exactly what its lease has free is served
// from it without a lease write; a lease last written LeaseMaxAge ago is
// not carved from any more (the stale sweep may take a lease unwritten for
// long), so the attempt waits for a new lease write — a microsecond
// earlier it would not.
func TestLeaseServesWhatItHoldsExactly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		now := start
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1_000_000}}
		reserve := func(id string, amount upstream.Microdollars) upstream.Ticket {
			t.Helper()
			r.ID, r.Amount = id, amount
			tk, err := sp.Reserve(ctx, r)
			if err != nil || tk.Stored || tk.Leases[0] == "" {
				t.Fatalf("%s: %+v, %v; want served from a lease", id, tk, err)
			}
			return tk
		}
		reserve("rct_1-0", 1000) // the first lease: 16 attempts of 1000
		if w := sp.LeaseWaits(); w != 1 {
			t.Fatalf("lease writes waited for after the first attempt: %d, want 1", w)
		}
		reserve("rct_2-0", 15000) // exactly what the lease has free
		if w := sp.LeaseWaits(); w != 1 {
			t.Fatalf("an attempt of exactly the lease's free amount waited for a lease write (%d writes)", w)
		}
		sp.WaitRefills()
		if _, err := sp.ReturnLeases(ctx); err != nil {
			t.Fatal(err)
		}

		// A fresh lease, written at start+1m; carved until LeaseMaxAge
		// after that, exclusive.
		now = start.Add(time.Minute)
		reserve("rct_3-0", 1000)
		waits := sp.LeaseWaits()
		now = start.Add(time.Minute + ledger.LeaseMaxAge - time.Microsecond)
		reserve("rct_4-0", 1000)
		if w := sp.LeaseWaits(); w != waits {
			t.Fatalf("a lease younger than LeaseMaxAge was not carved from (%d writes, want %d)", w, waits)
		}
		now = start.Add(time.Minute + ledger.LeaseMaxAge)
		reserve("rct_5-0", 1000)
		if w := sp.LeaseWaits(); w != waits+1 {
			t.Fatalf("a lease exactly LeaseMaxAge old was carved from (%d writes, want %d)", w, waits+1)
		}
	})
}

// TestLeaseGrantOfExactlyTheAttemptLeases states the grant rule's edge: a
// lease never takes more than half of what remains of a budget, and a
// half that is exactly the attempt's amount is still granted (the attempt
// is served from a lease, not refused nor stored); a half below it is
// tight, and the attempt reserves in the store.
func TestLeaseGrantOfExactlyTheAttemptLeases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		r := upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 2000}}
		tk, err := sp.Reserve(ctx, r)
		if err != nil || tk.Stored || tk.Leases[0] == "" {
			t.Fatalf("half the budget is exactly the amount: %+v, %v; want served from a lease", tk, err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 1000 {
			t.Fatalf("the lease took %d of a budget of 2000, want exactly half, 1000", n)
		}
		r2 := r
		r2.ID, r2.KeyID, r2.KeyLimit = "rct_2-0", "k2", upstream.Limit{Day: 1999}
		tk, err = sp.Reserve(ctx, r2)
		if err != nil || !tk.Stored || tk.Leases != [4]string{} {
			t.Fatalf("half the budget below the amount: %+v, %v; want a stored reservation", tk, err)
		}
	})
}

// TestTightBudgetIsNotLeasedAgainForTightFor states the tight rule: once a
// budget had too little left to lease, its attempts reserve in the store
// without trying a lease write for TightFor; from then on they try again.
func TestTightBudgetIsNotLeasedAgainForTightFor(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		now := start
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1000}}
		for i, at := range []time.Time{start, start.Add(ledger.TightFor - time.Microsecond), start.Add(ledger.TightFor)} {
			now = at
			r.ID = "rct_" + string(rune('1'+i)) + "-0"
			tk, err := sp.Reserve(ctx, r)
			if err != nil || !tk.Stored {
				t.Fatalf("attempt %d: %+v, %v; want a stored reservation", i, tk, err)
			}
			if err := sp.Release(ctx, tk); err != nil {
				t.Fatal(err)
			}
			want := []int64{1, 1, 2}[i]
			if w := sp.LeaseWaits(); w != want {
				t.Fatalf("attempt %d, %v after the tight one: %d lease writes tried, want %d", i, at.Sub(start), w, want)
			}
		}
	})
}

// TestBudgetNearlyUsedGivesBackOnlyTheAttemptsLeases states the rule
// before a refusal for a budget: the process gives back its unused leases
// of that attempt's totals (so an attempt that fits once they are back is
// served, reaching the budget exactly) — never a lease of another key's
// total.
func TestBudgetNearlyUsedGivesBackOnlyTheAttemptsLeases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		other := upstream.Reservation{ID: "rct_o-0", Tenant: "slot-1", KeyID: "k2", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1_000_000}}
		if tk, err := sp.Reserve(ctx, other); err != nil || tk.Leases[0] == "" {
			t.Fatalf("k2: %+v, %v", tk, err)
		}
		held := spendTotal(t, sp, "key:k2", "2026-11-29")
		if held != 16*1000 {
			t.Fatalf("k2's lease holds %d, want 16000", held)
		}
		// k1: a budget of 4000; the first attempt leases half of it.
		r := upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 4000}}
		if tk, err := sp.Reserve(ctx, r); err != nil || tk.Leases[0] == "" {
			t.Fatalf("k1's first attempt: %+v, %v", tk, err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 2000 {
			t.Fatalf("k1's lease took %d, want half the budget, 2000", n)
		}
		// 3000 more fits only once the lease's unused 1000 is back: then
		// the total is exactly the budget.
		r.ID, r.Amount = "rct_2-0", 3000
		tk, err := sp.Reserve(ctx, r)
		if err != nil || !tk.Stored {
			t.Fatalf("k1's second attempt: %+v, %v; want stored once the lease gave back", tk, err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 4000 {
			t.Fatalf("k1's day total %d, want exactly its budget, 4000", n)
		}
		if n := spendTotal(t, sp, "key:k2", "2026-11-29"); n != held {
			t.Fatalf("k1's attempt gave back k2's lease: k2's day total %d, want %d", n, held)
		}
		r.ID, r.Amount = "rct_3-0", 1
		if _, err := sp.Reserve(ctx, r); !errors.Is(err, upstream.ErrBudgetExceeded) {
			t.Fatalf("past k1's budget by one: %v", err)
		}
	})
}

// TestLeaseTopsUpBelowHalf states the refill rule's edge: a lease is topped
// up in the background once it holds less than half of what it was last
// granted — with exactly half left it is not, one attempt more and it is.
func TestLeaseTopsUpBelowHalf(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1_000_000}}
		for i := range 9 {
			r.ID = "rct_" + string(rune('a'+i)) + "-0"
			if tk, err := sp.Reserve(ctx, r); err != nil || tk.Leases[0] == "" {
				t.Fatalf("attempt %d: %+v, %v", i+1, tk, err)
			}
			sp.WaitRefills()
			total := spendTotal(t, sp, "key:k1", "2026-11-29")
			switch {
			case i < 8 && total != 16*1000:
				t.Fatalf("after %d attempts of a lease of 16 (%d left): total %d, want the one lease, 16000", i+1, 16-i-1, total)
			case i == 8 && total <= 16*1000:
				t.Fatalf("after 9 attempts (7 of 16 left) the lease was not topped up: total %d", total)
			}
		}
	})
}

// TestNewDayGivesBackLeasesIdleForLeaseIdle states the expiry rule at a
// day's change: the leases of the month still in use stay, one idle for
// exactly LeaseIdle goes back (so the next attempt waits for a new lease
// write).
func TestNewDayGivesBackLeasesIdleForLeaseIdle(t *testing.T) {
	for _, c := range []struct {
		idle  time.Duration
		waits int64 // lease writes waited for by the two attempts
	}{{ledger.LeaseIdle - time.Microsecond, 1}, {ledger.LeaseIdle, 2}} {
		storetest.Each(t, func(t *testing.T, db *store.DB) {
			ctx := t.Context()
			midnight := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
			now := midnight.Add(-c.idle)
			db.Now = func() time.Time { return now }
			sp := ledger.Of(db)
			r := upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Month: 1_000_000}}
			if tk, err := sp.Reserve(ctx, r); err != nil || tk.Leases[1] == "" {
				t.Fatalf("the day before: %+v, %v", tk, err)
			}
			now = midnight
			r.ID = "rct_2-0"
			if tk, err := sp.Reserve(ctx, r); err != nil || tk.Leases[1] == "" {
				t.Fatalf("the new day: %+v, %v", tk, err)
			}
			if w := sp.LeaseWaits(); w != c.waits {
				t.Fatalf("month lease idle %v at the day's change: %d lease writes waited for, want %d", c.idle, w, c.waits)
			}
		})
	}
}

// TestRefillsResumeAfterReturnLeases states that ReturnLeases quiets the
// refills only while it gives back: afterwards a new lease is topped up in
// the background again, so a long run of attempts waits for one lease
// write only.
func TestRefillsResumeAfterReturnLeases(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1_000_000_000}}
		run := func(from int) {
			t.Helper()
			for i := range 40 {
				r.ID = "rct_" + string(rune('A'+from)) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "-0"
				if tk, err := sp.Reserve(ctx, r); err != nil || tk.Leases[0] == "" {
					t.Fatalf("%s: %+v, %v", r.ID, tk, err)
				}
				sp.WaitRefills()
			}
		}
		run(0)
		if w := sp.LeaseWaits(); w != 1 {
			t.Fatalf("40 attempts waited for %d lease writes, want 1", w)
		}
		if _, err := sp.ReturnLeases(ctx); err != nil {
			t.Fatal(err)
		}
		run(1)
		if w := sp.LeaseWaits(); w != 2 {
			t.Fatalf("after ReturnLeases and 40 more attempts: %d lease writes waited for in all, want 2 (the new lease the only one more)", w)
		}
	})
}

// TestReservationEdges states Reserve's refusals at their edges: a
// negative amount is refused as bad_reservation, zero is accepted; an
// attempt of exactly a budget fits it (reserved in the store: half of the
// budget is too little to lease it), one microdollar more is refused
// before anything is written.
func TestReservationEdges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		r := upstream.Reservation{ID: "rct_neg-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: -1, KeyLimit: upstream.Limit{Day: 5000}}
		if _, err := sp.Reserve(ctx, r); contract.KindOf(err) != contract.KindInvalid || !strings.Contains(err.Error(), "bad_reservation") {
			t.Fatalf("a negative amount: %v, want invalid bad_reservation", err)
		}
		r.ID, r.Amount = "rct_zero-0", 0
		if _, err := sp.Reserve(ctx, r); err != nil {
			t.Fatalf("an amount of zero: %v", err)
		}
		r.ID, r.KeyID, r.Amount = "rct_over-0", "k2", 5001
		if _, err := sp.Reserve(ctx, r); !errors.Is(err, upstream.ErrBudgetExceeded) {
			t.Fatalf("one past the budget: %v", err)
		}
		if n := spendTotal(t, sp, "key:k2", "2026-11-29"); n != 0 {
			t.Fatalf("a refused attempt wrote %d", n)
		}
		r.ID, r.Amount = "rct_exact-0", 5000
		tk, err := sp.Reserve(ctx, r)
		if err != nil || !tk.Stored {
			t.Fatalf("exactly the budget: %+v, %v; want a stored reservation", tk, err)
		}
		if n := spendTotal(t, sp, "key:k2", "2026-11-29"); n != 5000 {
			t.Fatalf("key day total %d, want exactly the budget", n)
		}
	})
}

// TestSettlementEdges states Settle's rules: a negative settlement is
// refused as bad_settlement, zero is accepted; the spend counts a
// settlement the gateway estimated as estimated — whether its reservation
// was stored or leased — and a release or a measured settlement never.
func TestSettlementEdges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		reserve := func(id, key string, lim upstream.Limit) upstream.Ticket {
			t.Helper()
			tk, err := sp.Reserve(ctx, upstream.Reservation{ID: id, Tenant: "slot-1", KeyID: key, Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: lim})
			if err != nil {
				t.Fatal(err)
			}
			return tk
		}
		stored := upstream.Limit{Day: 1999} // half of it is too little to lease 1000
		leased := upstream.Limit{Day: 1_000_000}
		tk := reserve("rct_neg-0", "k1", stored)
		if err := sp.Settle(ctx, tk, -1); contract.KindOf(err) != contract.KindInvalid || !strings.Contains(err.Error(), "bad_settlement") {
			t.Fatalf("a negative settlement: %v, want invalid bad_settlement", err)
		}
		if err := sp.Settle(ctx, tk, 0); err != nil {
			t.Fatalf("a settlement of zero: %v", err)
		}
		for key, lim := range map[string]upstream.Limit{"ks": stored, "kl": leased} {
			est := reserve("rct_"+key+"_est-0", key, lim)
			if est.Stored != (key == "ks") {
				t.Fatalf("%s: stored %v", key, est.Stored)
			}
			est.Estimated = true
			must(t, sp.Settle(ctx, est, 420))
			measured := reserve("rct_"+key+"_m-0", key, lim)
			must(t, sp.Settle(ctx, measured, 300))
			rel := reserve("rct_"+key+"_rel-0", key, lim)
			rel.Estimated = true
			must(t, sp.Release(ctx, rel))
			rows, err := sp.Spend(ctx, "slot-1", "", time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.KeyID == key && (r.Settled != 720 || r.Estimated != 420) {
					t.Errorf("%s: settled %d, estimated %d; want 720, of it 420 estimated", key, r.Settled, r.Estimated)
				}
			}
		}
	})
}

// TestRefusedGiveBackKeepsTheLeases states giveBack's failure rule: when
// the store refuses the write that returns the leases, nothing is lost —
// the leases stay this process's with what they hold unused, so the next
// attempt is still served from them without a lease write, and a later
// ReturnLeases gives it all back. (A SQLite trigger refuses the write.)
func TestRefusedGiveBackKeepsTheLeases(t *testing.T) {
	db := storetest.OpenSQLite(t)
	ctx := t.Context()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	db.Now = func() time.Time { return now }
	sp := ledger.Of(db)
	r := upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000, KeyLimit: upstream.Limit{Day: 1_000_000}}
	if tk, err := sp.Reserve(ctx, r); err != nil || tk.Leases[0] == "" {
		t.Fatalf("%+v, %v; want served from a lease", tk, err)
	}
	must(t, func() error {
		_, err := db.Exec(ctx, `CREATE TRIGGER refuse_return BEFORE UPDATE ON shim_spend_leases BEGIN SELECT RAISE(ABORT, 'refused'); END`)
		return err
	}())
	if n, err := sp.ReturnLeases(ctx); err == nil || n != 0 {
		t.Fatalf("a refused give-back: %d returned, %v; want an error and nothing returned", n, err)
	}
	must(t, func() error {
		_, err := db.Exec(ctx, `DROP TRIGGER refuse_return`)
		return err
	}())
	waits := sp.LeaseWaits()
	r.ID = "rct_2-0"
	if tk, err := sp.Reserve(ctx, r); err != nil || tk.Leases[0] == "" {
		t.Fatalf("after the refused give-back: %+v, %v; want served from the kept lease", tk, err)
	}
	if w := sp.LeaseWaits(); w != waits {
		t.Fatalf("after the refused give-back the attempt waited for a lease write (%d, want %d): the lease was lost", w, waits)
	}
	sp.WaitRefills()
	n, err := sp.ReturnLeases(ctx)
	if err != nil || n != 14*1000 {
		t.Fatalf("the give-back after the refused one: %d, %v; want the 14000 the lease holds unused", n, err)
	}
	if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 2*1000 {
		t.Fatalf("key day total %d, want the two attempts' 2000", n)
	}
}
