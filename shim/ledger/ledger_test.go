package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

func TestSpendReserveSettleRelease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 23, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		// Reservations in the store, one per attempt (the ledger's path
		// when a budget has too little left to lease).
		sp := ledger.Of(db).PerAttempt()
		r := upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000,
			KeyLimit: upstream.Limit{Month: upstream.MaxMicrodollars}}
		t1, err := sp.Reserve(ctx, r)
		if err != nil || !t1.Stored {
			t.Fatal(t1, err)
		}
		if _, err := sp.Reserve(ctx, r); contract.KindOf(err) != contract.KindConflict {
			t.Fatalf("second reserve with one id: %v", err)
		}
		r2 := r
		r2.ID, r2.Amount = "rct_2-0", 500
		t2, err := sp.Reserve(ctx, r2)
		if err != nil {
			t.Fatal(err)
		}
		total := func(scope, period string) int64 {
			t.Helper()
			n, err := sp.Total(ctx, scope, period)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := total("key:k1", "2026-11-29"); n != 1500 {
			t.Fatalf("key day total = %d, want 1500", n)
		}
		if err := sp.Settle(ctx, t1, 420); err != nil {
			t.Fatal(err)
		}
		if err := sp.Release(ctx, t2); err != nil {
			t.Fatal(err)
		}
		for _, sc := range [][2]string{{"key:k1", "2026-11-29"}, {"key:k1", "2026-11"}, {"tenant:slot-1", "2026-11-29"}, {"tenant:slot-1", "2026-11"}} {
			if n := total(sc[0], sc[1]); n != 420 {
				t.Errorf("%s %s = %d after settle and release, want 420", sc[0], sc[1], n)
			}
		}
		if err := sp.Settle(ctx, t1, 1); contract.KindOf(err) != contract.KindConflict {
			t.Errorf("settling twice: %v", err)
		}
		if err := sp.Release(ctx, t1); contract.KindOf(err) != contract.KindConflict {
			t.Errorf("releasing a settled reservation: %v", err)
		}
		if err := sp.Settle(ctx, upstream.Ticket{Reservation: upstream.Reservation{ID: "nope"}, Stored: true}, 1); contract.KindOf(err) != contract.KindNotFound {
			t.Errorf("settling an unknown reservation: %v", err)
		}
		// An attempt left open (its process died) is released by the sweep.
		r3 := r
		r3.ID, r3.Amount = "rct_3-0", 99
		if _, err := sp.Reserve(ctx, r3); err != nil {
			t.Fatal(err)
		}
		if n, err := sp.ReleaseStale(ctx, now.Add(time.Second)); err != nil || n != 1 {
			t.Fatalf("ReleaseStale = %d, %v", n, err)
		}
		rows, err := sp.Spend(ctx, "slot-1", "", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		want := ledger.SpendRow{KeyID: "k1", Model: "openai/gpt-4.1", Attempts: 3, Reserved: 1599, Settled: 420, Open: 0}
		if len(rows) != 1 || rows[0] != want {
			t.Fatalf("Spend = %+v, want %+v", rows, want)
		}
		if rows, _ := sp.Spend(ctx, "slot-2", "", time.Time{}); len(rows) != 0 {
			t.Errorf("another tenant sees %+v", rows)
		}
		// The day rolls over at midnight UTC; the month does not.
		now = now.Add(2 * time.Hour)
		lim := upstream.Limit{Day: 100, Month: 515}
		r4 := upstream.Reservation{ID: "rct_4-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 90, KeyLimit: lim}
		if _, err := sp.Reserve(ctx, r4); err != nil {
			t.Fatalf("a new day's first reservation: %v", err)
		}
		r5 := r4
		r5.ID, r5.Amount = "rct_5-0", 11
		if _, err := sp.Reserve(ctx, r5); !errors.Is(err, upstream.ErrBudgetExceeded) {
			t.Fatalf("past the day budget: %v", err)
		}
		r5.Amount = 10
		if _, err := sp.Reserve(ctx, r5); !errors.Is(err, upstream.ErrBudgetExceeded) {
			// The month holds 420 + 90 already: 10 more passes 515.
			t.Fatalf("past the month budget: %v", err)
		}
		if n := total("key:k1", "2026-11-30"); n != 90 {
			t.Errorf("a refused reservation changed the totals: %d", n)
		}
	})
}

// TestSpendConcurrentReservationsNeverOverspend: 100 reservations in the
// store at once against one budget accept exactly as many as fit, on each
// backend.
func TestSpendConcurrentReservationsNeverOverspend(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		sp := ledger.Of(db).PerAttempt()
		const n, amount, budget = 100, 7, 250 // 35 fit (245), the 36th would make 252
		var accepted, refused atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				// Half on the tenant's budget through different keys, half on
				// one key: both bounds are shared totals.
				_, err := sp.Reserve(ctx, upstream.Reservation{ID: fmt.Sprintf("rct_c%d", i), Tenant: "slot-1", KeyID: fmt.Sprintf("k%d", i%4),
					Identity: "anthropic/claude-sonnet-4-5", Amount: amount, TenantLimit: upstream.Limit{Day: budget}})
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.Is(err, upstream.ErrBudgetExceeded):
					refused.Add(1)
				default:
					errs <- err
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if accepted.Load() != budget/amount || refused.Load() != n-budget/amount {
			t.Fatalf("accepted %d, refused %d; want exactly %d accepted", accepted.Load(), refused.Load(), budget/amount)
		}
		day := db.Now().UTC().Format("2006-01-02")
		if total, err := sp.Total(ctx, "tenant:slot-1", day); err != nil || total != budget/amount*amount {
			t.Fatalf("tenant total = %d, %v; want %d", total, err, budget/amount*amount)
		}
		rows, err := sp.Spend(ctx, "slot-1", "", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, r := range rows {
			sum += r.Reserved
		}
		if sum > budget || sum != accepted.Load()*amount {
			t.Fatalf("reserved %d against a budget of %d", sum, budget)
		}
	})
}

func TestHoldsOnlyGrowAndExpire(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		h := ledger.Of(db)
		if u, err := h.HeldUntil(ctx, "openai/gpt-4.1"); err != nil || !u.IsZero() {
			t.Fatalf("fresh identity held until %v, %v", u, err)
		}
		if err := h.Hold(ctx, "openai/gpt-4.1", now.Add(30*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := h.Hold(ctx, "openai/gpt-4.1", now.Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		if u, _ := h.HeldUntil(ctx, "openai/gpt-4.1"); !u.Equal(now.Add(30 * time.Second)) {
			t.Fatalf("a shorter hold shortened it: %v", u)
		}
		if u, _ := h.HeldUntil(ctx, "azure/gpt-4.1"); !u.IsZero() {
			t.Fatalf("another identity is held: %v", u)
		}
		now = now.Add(31 * time.Second)
		if u, _ := h.HeldUntil(ctx, "openai/gpt-4.1"); !u.IsZero() {
			t.Fatalf("an expired hold still holds: %v", u)
		}
	})
}

// TestHoldSeenByAnotherProcess: a hold placed by another process (this test
// binary run again, with its own connection pool) is seen here, though this
// process had read the holds just before: on Postgres through the holds
// notification, long before the listening copy's refresh
// (ledger.HoldRefreshListening) would have read it.
func TestHoldSeenByAnotherProcess(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("needs " + storetest.EnvPostgres)
	}
	schema := storetest.FreshSchema(t, dsn)
	db, err := store.Open(t.Context(), schema, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	until := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	l := ledger.Of(db)
	awaitHoldsListening(t, l, func() { // the first read starts the listener
		if got, err := l.HeldUntil(t.Context(), "openai/gpt-4.1"); err != nil || !got.IsZero() {
			t.Fatalf("held before the child ran: %v %v", got, err)
		}
	})
	// The copy is read now, and while listening it is not read again for
	// HoldRefreshListening.
	if got, err := l.HeldUntil(t.Context(), "openai/gpt-4.1"); err != nil || !got.IsZero() {
		t.Fatalf("held before the child ran: %v %v", got, err)
	}
	read := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CADUCEUS_HOLD_CHILD_DSN="+schema, fmt.Sprintf("CADUCEUS_HOLD_CHILD_UNTIL=%d", until.UnixMicro()))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	placed := time.Now()
	// Read again only when the listener hears a notification: the copy,
	// read at read, is not read again for HoldRefreshListening otherwise.
	for {
		heard := l.HoldsHeard()
		got, err := l.HeldUntil(t.Context(), "openai/gpt-4.1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Equal(until) {
			break
		}
		if !got.IsZero() {
			t.Fatalf("held until %v, want %v (the child's hold)", got, until)
		}
		select {
		case <-heard:
		case <-time.After(ledger.HoldRefreshListening / 2):
			t.Fatalf("the child's hold unseen %v after it was placed (%v after the copy was read): no notification reached this process",
				time.Since(placed), time.Since(read))
		}
	}
	t.Logf("the child's hold seen %v after the child exited", time.Since(placed))
}

// awaitHoldsListening waits until l's holds listener (Postgres) is up,
// woken by the listener itself; probe reads the holds or the routes'
// health, which starts it.
func awaitHoldsListening(t *testing.T, l *ledger.Ledger, probe func()) {
	t.Helper()
	for {
		heard := l.HoldsHeard()
		probe()
		if l.HoldsListening() {
			return
		}
		select {
		case <-heard:
		case <-time.After(30 * time.Second):
			t.Fatal("the holds listener did not start in 30 s")
		}
	}
}

// TestHoldChildProcess is the other process of TestHoldSeenByAnotherProcess.
func TestHoldChildProcess(t *testing.T) {
	dsn := os.Getenv("CADUCEUS_HOLD_CHILD_DSN")
	if dsn == "" {
		t.Skip("run by TestHoldSeenByAnotherProcess")
	}
	var us int64
	fmt.Sscan(os.Getenv("CADUCEUS_HOLD_CHILD_UNTIL"), &us)
	db, err := store.Open(context.Background(), dsn, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := ledger.Of(db).Hold(context.Background(), "openai/gpt-4.1", time.UnixMicro(us)); err != nil {
		t.Fatal(err)
	}
}

func TestKeyGrants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		svc := auth.NewService(db.Keys(), nil, 0)
		_, key, err := svc.Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeRoute},
			Grants: []string{"openai/gpt-4.1", "anthropic/claude-sonnet-4-5", "openai/gpt-4.1"}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.Keys().Key(ctx, key.ID)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Grants) != "[anthropic/claude-sonnet-4-5 openai/gpt-4.1]" {
			t.Fatalf("grants = %v", got.Grants)
		}
		if _, _, err := svc.Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"openai/*-mini"}}); contract.KindOf(err) != contract.KindInvalid {
			t.Fatalf("a wildcard inside a grant: %v", err)
		}
		// Tenant grants reach every key of the tenant, no other tenant's.
		if err := db.Keys().SetTenantGrants(ctx, "slot-1", []string{"openai/gpt-4.1-mini"}); err != nil {
			t.Fatal(err)
		}
		_, other, err := svc.Create(ctx, auth.Spec{Tenant: "slot-2", Scopes: []contract.Scope{contract.ScopeRoute}})
		if err != nil {
			t.Fatal(err)
		}
		got, _ = db.Keys().Key(ctx, key.ID)
		if fmt.Sprint(got.Grants) != "[anthropic/claude-sonnet-4-5 openai/gpt-4.1 openai/gpt-4.1-mini]" {
			t.Fatalf("grants with the tenant's = %v", got.Grants)
		}
		if got, _ := db.Keys().Key(ctx, other.ID); len(got.Grants) != 0 {
			t.Fatalf("slot-2 holds slot-1's grants: %v", got.Grants)
		}
		keys, err := db.Keys().ListKeys(ctx)
		if err != nil || len(keys) != 2 || len(keys[0].Grants) != 3 {
			t.Fatalf("ListKeys = %+v, %v", keys, err)
		}
		if c := auth.CallerOf(got); !c.Granted("openai/gpt-4.1-mini") || c.Granted("openai/gpt-4o") {
			t.Errorf("caller grants = %v", c.Grants)
		}
	})
}
