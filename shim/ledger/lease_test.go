package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

func spendTotal(t *testing.T, sp *ledger.Ledger, scope, period string) int64 {
	t.Helper()
	n, err := sp.Total(context.Background(), scope, period)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNoBudgetWritesNothingBeforeTheCall: without a budget a reservation
// writes nothing; the settlement records the attempt and its cost.
func TestNoBudgetWritesNothingBeforeTheCall(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		tk, err := sp.Reserve(ctx, upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: 1000})
		if err != nil || tk.Stored || tk.Leases != [4]string{} {
			t.Fatalf("ticket %+v, %v", tk, err)
		}
		if rows, err := sp.Spend(ctx, "slot-1", "", time.Time{}); err != nil || len(rows) != 0 {
			t.Fatalf("a reservation without budget wrote %+v, %v", rows, err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 0 {
			t.Fatalf("key day total %d before the settlement", n)
		}
		if err := sp.Settle(ctx, tk, 420); err != nil {
			t.Fatal(err)
		}
		if err := sp.Settle(ctx, tk, 420); contract.KindOf(err) != contract.KindConflict {
			t.Fatalf("settling twice: %v", err)
		}
		for _, sc := range [][2]string{{"key:k1", "2026-11-29"}, {"key:k1", "2026-11"}, {"tenant:slot-1", "2026-11-29"}, {"tenant:slot-1", "2026-11"}} {
			if n := spendTotal(t, sp, sc[0], sc[1]); n != 420 {
				t.Errorf("%s %s = %d, want 420", sc[0], sc[1], n)
			}
		}
		rows, err := sp.Spend(ctx, "slot-1", "", time.Time{})
		want := ledger.SpendRow{KeyID: "k1", Model: "openai/gpt-4.1", Attempts: 1, Reserved: 1000, Settled: 420}
		if err != nil || len(rows) != 1 || rows[0] != want {
			t.Fatalf("Spend = %+v, %v; want %+v", rows, err, want)
		}
	})
}

// TestLeaseServesAttemptsAndReturnsOnClose: the first budgeted attempt
// leases a slice of each bounded total in one write; the next ones are
// carved from it; a settlement moves the attempt's part from the lease to
// the spend; ReturnLeases gives back exactly what was not used; a refused
// attempt changes nothing.
func TestLeaseServesAttemptsAndReturnsOnClose(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		const budget, amount = 1_000_000, 1000
		r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: amount, KeyLimit: upstream.Limit{Day: budget}}
		var tickets []upstream.Ticket
		for i := range 5 {
			r.ID = fmt.Sprintf("rct_%d-0", i)
			tk, err := sp.Reserve(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if tk.Stored || tk.Leases[0] == "" || tk.Leases[1]+tk.Leases[2]+tk.Leases[3] != "" {
				t.Fatalf("ticket %+v: want the key day total served from a lease, nothing else reserved", tk)
			}
			tickets = append(tickets, tk)
		}
		// One lease of 16 attempts of the largest amount seen.
		leased := spendTotal(t, sp, "key:k1", "2026-11-29")
		if leased != 16*amount {
			t.Fatalf("key day total = %d after 5 attempts, want one lease of %d", leased, 16*amount)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11"); n != 0 {
			t.Fatalf("the unbounded month total holds %d before any settlement", n)
		}
		if err := sp.Settle(ctx, tickets[0], 300); err != nil {
			t.Fatal(err)
		}
		if err := sp.Release(ctx, tickets[1]); err != nil {
			t.Fatal(err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != leased-amount+300-amount {
			t.Fatalf("key day total = %d after a settlement at 300 and a release, want %d", n, leased-amount+300-amount)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11"); n != 300 {
			t.Fatalf("key month total = %d, want the settled 300", n)
		}
		// Past the budget: refused, nothing changes.
		big := r
		big.ID, big.Amount = "rct_big-0", budget+1
		if _, err := sp.Reserve(ctx, big); !errors.Is(err, upstream.ErrBudgetExceeded) {
			t.Fatalf("past the budget: %v", err)
		}
		returned, err := sp.ReturnLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Unused: the lease less the five attempts carved from it.
		if returned != leased-5*amount {
			t.Fatalf("returned %d, want %d", returned, leased-5*amount)
		}
		// What remains counted: the settlement and three attempts in flight.
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 300+3*amount {
			t.Fatalf("key day total = %d after the return, want %d", n, 300+3*amount)
		}
		for _, tk := range tickets[2:] {
			if err := sp.Settle(ctx, tk, 100); err != nil {
				t.Fatal(err)
			}
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 600 {
			t.Fatalf("key day total = %d once everything settled, want 600", n)
		}
		if returned, err := sp.ReturnLeases(ctx); err != nil || returned != 0 {
			t.Fatalf("second return: %d, %v", returned, err)
		}
	})
}

// TestLeaseRefillsAheadOfTheAttempts: once half of a lease is carved, it
// is topped up in the background, so only the first attempt waits for a
// lease write; every top-up stays within the budget, and near its end the
// attempts still use all of it.
func TestLeaseRefillsAheadOfTheAttempts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		const amount = 1000
		n := 0
		reserve := func(key string, lim upstream.Limit) (upstream.Ticket, error) {
			n++
			tk, err := sp.Reserve(ctx, upstream.Reservation{ID: fmt.Sprintf("rct_%d-0", n), Tenant: "slot-1", KeyID: key,
				Identity: "openai/gpt-4.1", Amount: amount, KeyLimit: lim})
			sp.WaitRefills()
			return tk, err
		}
		// A large budget: 100 attempts, one lease write waited for.
		for range 100 {
			if tk, err := reserve("k1", upstream.Limit{Day: 1_000_000_000}); err != nil || tk.Stored {
				t.Fatalf("%+v, %v", tk, err)
			}
		}
		if w := sp.LeaseWaits(); w != 1 {
			t.Fatalf("%d attempts waited for a lease write, want only the first", w)
		}
		held := spendTotal(t, sp, "key:k1", "2026-11-29")
		if held < 100*amount+8*amount || held > 100*amount+16*amount {
			t.Fatalf("key day total %d after 100 attempts: want them and at least half a lease, at most a whole one", held)
		}
		// A budget of 20 attempts: the top-ups shrink as it runs out and
		// never pass it, and the 20 attempts all fit.
		const budget = 20 * amount
		accepted := 0
		for {
			tk, err := reserve("k2", upstream.Limit{Day: budget})
			if errors.Is(err, upstream.ErrBudgetExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			accepted++
			if total := spendTotal(t, sp, "key:k2", "2026-11-29"); total > budget {
				t.Fatalf("key day total %d passed the budget %d after %d attempts (%+v)", total, budget, accepted, tk)
			}
		}
		if accepted != 20 {
			t.Fatalf("%d attempts fit a budget of 20", accepted)
		}
		if _, err := sp.ReturnLeases(ctx); err != nil {
			t.Fatal(err)
		}
		if total := spendTotal(t, sp, "key:k1", "2026-11-29"); total != 100*amount {
			t.Fatalf("key day total %d once the leases are back, want the 100 attempts in flight", total)
		}
		if total := spendTotal(t, sp, "key:k2", "2026-11-29"); total != budget {
			t.Fatalf("key day total %d once the leases are back, want the 20 attempts in flight", total)
		}
	})
}

// TestLeaseNearTheEndOfABudget: when half of what remains is less than an
// attempt, it reserves in the store on its own; when that is refused while
// this process's own lease holds the difference, the lease goes back and
// the attempt fits.
func TestLeaseNearTheEndOfABudget(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		const budget = 10_000
		day := "2026-11-29"
		n := 0
		reserve := func(amount upstream.Microdollars) (upstream.Ticket, error) {
			n++
			return sp.Reserve(ctx, upstream.Reservation{ID: fmt.Sprintf("rct_%d-0", n), Tenant: "slot-1", KeyID: "k1",
				Identity: "openai/gpt-4.1", Amount: amount, TenantLimit: upstream.Limit{Day: budget}})
		}
		// A lease of half of what remains (less than 16 attempts' worth).
		t1, err := reserve(1000)
		if err != nil || t1.Stored || t1.Leases[2] == "" {
			t.Fatalf("%+v, %v", t1, err)
		}
		if n := spendTotal(t, sp, "tenant:slot-1", day); n != budget/2 {
			t.Fatalf("tenant day total %d, want a lease of half the budget", n)
		}
		// 4500 > 4000 left in the lease, and half of the 5000 unleased is
		// less: reserved in the store on its own.
		t2, err := reserve(4500)
		if err != nil || !t2.Stored {
			t.Fatalf("%+v, %v: want a reservation in the store", t2, err)
		}
		// 1000 still comes from the lease (3000 left in it).
		t3, err := reserve(1000)
		if err != nil || t3.Stored {
			t.Fatalf("%+v, %v", t3, err)
		}
		// 3500: the store has 500 unleased; refused there, the lease's 3000
		// go back and it fits exactly.
		t4, err := reserve(3500)
		if err != nil || !t4.Stored {
			t.Fatalf("%+v, %v: want the lease returned and the reservation stored", t4, err)
		}
		if n := spendTotal(t, sp, "tenant:slot-1", day); n != budget {
			t.Fatalf("tenant day total %d, want the whole budget %d", n, budget)
		}
		if _, err := reserve(1); !errors.Is(err, upstream.ErrBudgetExceeded) {
			t.Fatalf("past the budget: %v", err)
		}
		if returned, err := sp.ReturnLeases(ctx); err != nil || returned != 0 {
			t.Fatalf("returned %d, %v; the lease was used up", returned, err)
		}
		for _, tk := range []upstream.Ticket{t1, t2, t3, t4} {
			if err := sp.Settle(ctx, tk, 100); err != nil {
				t.Fatal(err)
			}
		}
		if n := spendTotal(t, sp, "tenant:slot-1", day); n != 400 {
			t.Fatalf("tenant day total %d once settled, want 400", n)
		}
	})
}

// TestLeaseExpiresAtTheDayBoundary: the day's lease goes back when the day
// ends (the month's stays), an idle lease goes back, and a lease left by
// a process that died is released by the stale sweep — its attempts still
// settle exactly.
func TestLeaseExpiresAtTheDayBoundary(t *testing.T) {
	openTwice(t, func(t *testing.T, db, other *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 23, 59, 50, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		const amount = 1000
		r := upstream.Reservation{ID: "rct_1-0", Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: amount,
			KeyLimit: upstream.Limit{Day: 1_000_000, Month: 10_000_000}}
		t1, err := sp.Reserve(ctx, r)
		if err != nil || t1.Stored || t1.Day != "2026-11-29" {
			t.Fatalf("%+v, %v", t1, err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 16*amount {
			t.Fatalf("day total %d", n)
		}
		now = now.Add(15 * time.Second) // 2026-11-30 00:00:05
		r.ID = "rct_2-0"
		t2, err := sp.Reserve(ctx, r)
		if err != nil || t2.Day != "2026-11-30" {
			t.Fatalf("%+v, %v", t2, err)
		}
		// Yesterday's lease went back: only the attempt in flight remains.
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != amount {
			t.Fatalf("yesterday's total = %d after the day ended, want the %d in flight", n, amount)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-30"); n != 16*amount {
			t.Fatalf("today's total = %d, want a new lease of %d", n, 16*amount)
		}
		if t2.Leases[1] != t1.Leases[1] {
			t.Fatalf("the month's lease changed at a day boundary: %s, %s", t1.Leases[1], t2.Leases[1])
		}
		if err := sp.Settle(ctx, t1, 400); err != nil {
			t.Fatal(err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-29"); n != 400 {
			t.Fatalf("yesterday's total = %d, want 400 settled", n)
		}
		// Idle for a minute: the month's and today's leases go back too.
		now = now.Add(2 * time.Minute)
		sp.ExpireLeases(ctx)
		if n := spendTotal(t, sp, "key:k1", "2026-11"); n != 400+amount {
			t.Fatalf("month total = %d after the idle expiry, want %d", n, 400+amount)
		}
		// A process that dies holding a lease: the sweep releases it once
		// it was not written for the stale age.
		other.Now = db.Now
		osp := ledger.Of(other)
		r.ID = "rct_3-0"
		t3, err := osp.Reserve(ctx, r)
		if err != nil || t3.Stored {
			t.Fatalf("%+v, %v", t3, err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-30"); n != amount+16*amount {
			t.Fatalf("today's total = %d with the other process's lease, want %d", n, 17*amount)
		}
		// (other "dies": its lease is never returned.)
		// (Its two leases, and this process's rows whose attempts are
		// still in flight, all last written before the cutoff.)
		if _, err := sp.ReleaseStale(ctx, now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-30"); n != 0 {
			t.Fatalf("today's total = %d after the sweep, want 0 (every lease released)", n)
		}
		// An attempt carved from a released lease still settles exactly.
		if err := osp.Settle(ctx, t3, 250); err != nil {
			t.Fatal(err)
		}
		if err := sp.Settle(ctx, t2, 150); err != nil {
			t.Fatal(err)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11-30"); n != 400 {
			t.Fatalf("today's total = %d, want the 400 settled", n)
		}
		if n := spendTotal(t, sp, "key:k1", "2026-11"); n != 800 {
			t.Fatalf("month total = %d, want the 800 settled", n)
		}
	})
}

// openTwice opens one database as two stores (two processes), on SQLite
// and on Postgres when it is configured.
func openTwice(t *testing.T, fn func(t *testing.T, a, b *store.DB)) {
	run := func(t *testing.T, dsn string) {
		a, err := store.Open(context.Background(), dsn, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		b, err := store.Open(context.Background(), dsn, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		fn(t, a, b)
	}
	t.Run("sqlite", func(t *testing.T) { run(t, "sqlite:"+filepath.Join(t.TempDir(), "two.db")) })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { run(t, storetest.FreshSchema(t, dsn)) })
	}
}

// TestLeasesTwoGatewaysNeverOverspend: two gateways on two stores of one
// database (two processes) each forward 100 requests at once against one
// small tenant budget. The upstream reports no usage, so every answered
// attempt settles at its reservation and nothing is freed by a
// settlement: the settled spend never passes the budget, the store's
// total is exactly the settled spend once both processes return their
// leases, and once the leases are back the two together accept what
// fits: less than one request's maximum cost is left unspent.
func TestLeasesTwoGatewaysNeverOverspend(t *testing.T) {
	openTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := t.Context()
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
		}))
		defer up.Close()
		price := upstream.Price{Input: 2_000_000, CachedInput: 500_000, Output: 8_000_000, MaxOutputTokens: 1000}
		parsed, err := wire.Parse(wire.ChatCompletions, []byte(`{"model":"gpt-4.1","max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		r := int64(price.MaxCost(int64(len(parsed.Raw)), 50))
		budget := 40*r + r/2 // 40 requests fit
		conf := upstream.Config{
			Routes:  map[string]upstream.Route{"openai": {Kind: upstream.KindOpenAI, BaseURL: up.URL, Models: []string{"gpt-4.1"}}},
			Plans:   map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"gpt-4.1": {{Route: "openai"}}}}},
			Prices:  map[string]upstream.Price{"openai/gpt-4.1": price},
			Budgets: upstream.Budgets{Tenant: upstream.Limit{Day: upstream.Microdollars(budget)}},
		}
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		quiet := slog.New(slog.DiscardHandler)
		spA, spB := ledger.Of(dbA), ledger.Of(dbB)
		gws := []*gateway.Gateway{
			gateway.New(gateway.Config{Upstream: conf, Ledger: spA, Holds: spA, Client: client, Logger: quiet}),
			gateway.New(gateway.Config{Upstream: conf, Ledger: spB, Holds: spB, Client: client, Logger: quiet}),
		}
		who := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_1"}, KeyID: "k1",
			Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"openai/gpt-4.1"}}
		var mu sync.Mutex
		accepted, refused := [2]int64{}, [2]int64{}
		var settled int64
		n := 0
		send := func(p int) (bool, error) {
			mu.Lock()
			n++
			id := fmt.Sprintf("rct_%d_%d", p, n)
			mu.Unlock()
			rec := httptest.NewRecorder()
			res := gws[p].Forward(ctx, gateway.Writer{ResponseWriter: rec}, gateway.Request{Protocol: wire.ChatCompletions, Caller: who,
				Parsed: parsed, Body: parsed.Body(), Header: http.Header{}, ID: id})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case res.Err != nil:
				return false, res.Err
			case res.Refusal == nil && rec.Code == 200:
				if res.Settled != r {
					return false, fmt.Errorf("settled %d, want the reservation %d", res.Settled, r)
				}
				accepted[p]++
				settled += res.Settled
				return true, nil
			case res.Refusal != nil && res.Refusal.Code == upstream.CodeBudgetExceeded:
				refused[p]++
				return false, nil
			}
			return false, fmt.Errorf("unexpected answer %d %+v", rec.Code, res.Refusal)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Go(func() {
				<-start
				if _, err := send(i % 2); err != nil {
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
		day := dbA.Now().UTC().Format("2006-01-02")
		held := spendTotal(t, spA, "tenant:slot-1", day)
		if settled > budget || held > budget {
			t.Fatalf("settled %d, total %d: past the budget %d", settled, held, budget)
		}
		retA, err := spA.ReturnLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		retB, err := spB.ReturnLeases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := spendTotal(t, spA, "tenant:slot-1", day); n != settled || held != settled+retA+retB {
			t.Fatalf("total %d after both returned their leases (%d before, %d and %d returned), want the settled %d", n, held, retA, retB, settled)
		}
		t.Logf("at once: accepted %v, refused %v of %d that fit; %d and %d µ$ left in the leases", accepted, refused, budget/r, retA, retB)
		if accepted[0]+accepted[1] == 0 || refused[0]+refused[1] == 0 {
			t.Fatalf("accepted %v, refused %v: the budget did not bind", accepted, refused)
		}
		// With the leases back, the two take turns until both are refused:
		// whatever the leases kept is accepted now.
		for done := [2]bool{}; !done[0] || !done[1]; {
			for p := range 2 {
				if done[p] {
					continue
				}
				ok, err := send(p)
				if err != nil {
					t.Fatal(err)
				}
				done[p] = !ok
			}
		}
		if settled > budget || budget-settled >= r {
			t.Fatalf("settled %d of a budget of %d with requests of %d: not what fits", settled, budget, r)
		}
		if settled != (budget/r)*r {
			t.Fatalf("settled %d, want %d", settled, (budget/r)*r)
		}
		if _, err := spA.ReturnLeases(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := spB.ReturnLeases(ctx); err != nil {
			t.Fatal(err)
		}
		if n := spendTotal(t, spA, "tenant:slot-1", day); n != settled {
			t.Fatalf("total %d, want the settled %d", n, settled)
		}
	})
}

// TestLeasesOfADeadProcessGoBack: process a leases a slice of a key's small
// day budget, beats, and dies (it never returns its lease); process b,
// which beats on, is refused while a's lease holds the budget. The sweep
// releases nothing while a's beat is recent; once it is older than the
// threshold a's lease goes back and b's attempt fits. b's own lease is
// never taken for dead. If a was only slow and beats again, it drops the
// leases it had in memory and leases anew.
func TestLeasesOfADeadProcessGoBack(t *testing.T) {
	openTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		dbA.Now, dbB.Now = clock, clock
		a, b := ledger.Of(dbA), ledger.Of(dbB)
		const budget, amount = 20_000, 1000
		r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", Amount: amount, KeyLimit: upstream.Limit{Day: budget}}
		for _, l := range []*ledger.Ledger{a, b} {
			if err := l.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		r.ID = "rct_a-0"
		first, err := a.Reserve(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		held := spendTotal(t, a, "key:k1", "2026-11-29")
		if held < amount || held > budget {
			t.Fatalf("a's lease holds %d of a budget of %d", held, budget)
		}
		// b needs more than what a's lease leaves of the budget.
		big := r
		big.ID, big.Amount = "rct_b-0", upstream.Microdollars(budget-held+1)
		if _, err := b.Reserve(ctx, big); !errors.Is(err, upstream.ErrBudgetExceeded) {
			t.Fatalf("b while a's lease holds the budget: %v", err)
		}
		// a dies here. 30 s later: a's beat is recent, nothing is released.
		now = now.Add(30 * time.Second)
		if err := b.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := b.ReleaseDead(ctx, now.Add(-time.Minute)); err != nil || n != 0 {
			t.Fatalf("released %d (%v) while a was recently seen", n, err)
		}
		// 61 s after a's last beat, b's sweep takes a for dead.
		now = now.Add(31 * time.Second)
		if err := b.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := b.ReleaseDead(ctx, now.Add(-time.Minute)); err != nil || n != 1 {
			t.Fatalf("released %d (%v), want a's one lease", n, err)
		}
		if n := spendTotal(t, b, "key:k1", "2026-11-29"); n != 0 {
			t.Fatalf("key day total %d after a's lease went back, want 0", n)
		}
		tk, err := b.Reserve(ctx, big)
		if err != nil {
			t.Fatalf("b once a's lease went back: %v", err)
		}
		if err := b.Settle(ctx, tk, big.Amount); err != nil {
			t.Fatal(err)
		}
		// b beats on; its leases are never taken for dead.
		now = now.Add(2 * time.Minute)
		if err := b.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		before := spendTotal(t, b, "key:k1", "2026-11-29")
		if n, err := b.ReleaseDead(ctx, now.Add(-time.Minute)); err != nil || n != 0 {
			t.Fatalf("released %d (%v) of a live process", n, err)
		}
		if n := spendTotal(t, b, "key:k1", "2026-11-29"); n != before {
			t.Fatalf("key day total %d, was %d: a live process's lease was touched", n, before)
		}
		// a was only slow: its next beat finds itself forgotten, and its next
		// attempt takes a new lease instead of carving from the released one.
		if err := a.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		small := r
		small.ID = "rct_a-1"
		tk, err = a.Reserve(ctx, small)
		if !errors.Is(err, upstream.ErrBudgetExceeded) && (err != nil || tk.Leases[0] == first.Leases[0]) {
			t.Fatalf("a after it was taken for dead: %+v, %v (its released lease was %s)", tk, err, first.Leases[0])
		}
		if got := spendTotal(t, a, "key:k1", "2026-11-29"); got > budget {
			t.Fatalf("key day total %d past the budget of %d", got, budget)
		}
	})
}

// TestStoredReservationsOfADeadProcessGoBack: a budget too tight to lease
// is reserved in the store, in the name of the process that reserved it;
// when that process dies mid-call, the sweep that takes it for dead
// releases the reservation (not six hours later), while a reservation of
// a live process is left as it is.
func TestStoredReservationsOfADeadProcessGoBack(t *testing.T) {
	openTwice(t, func(t *testing.T, dbA, dbB *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		clock := func() time.Time { return now }
		dbA.Now, dbB.Now = clock, clock
		a, b := ledger.Of(dbA), ledger.Of(dbB)
		const budget = 10_000
		r := upstream.Reservation{Tenant: "slot-1", KeyID: "k1", Identity: "openai/gpt-4.1", KeyLimit: upstream.Limit{Day: budget}}
		for _, l := range []*ledger.Ledger{a, b} {
			if err := l.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		state := func(id string) string {
			t.Helper()
			got, err := store.AppendRows([]string(nil), store.QueryRows(ctx, dbB, "state", store.ScanValue[string], `SELECT state FROM shim_spend WHERE id = ?`, id))
			if err != nil || len(got) != 1 {
				t.Fatalf("spend row %s: %v %v", id, got, err)
			}
			return got[0]
		}
		// a reserves most of the budget: too tight to lease, so in the store.
		ra := r
		ra.ID, ra.Amount = "rct_a-0", 6_000
		if _, err := a.Reserve(ctx, ra); err != nil {
			t.Fatal(err)
		}
		if got := state("rct_a-0"); got != "reserved" {
			t.Fatalf("a's reservation of 6,000 of 10,000: spend row %s, want reserved in the store", got)
		}
		rb := r
		rb.ID, rb.Amount = "rct_b-0", 3_000
		if _, err := b.Reserve(ctx, rb); err != nil {
			t.Fatal(err)
		}
		// a dies mid-call; 61 s after its last beat b's sweep takes it for
		// dead and its reservation goes back; b's own stays.
		now = now.Add(61 * time.Second)
		if err := b.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ReleaseDead(ctx, now.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := state("rct_a-0"); got != "released" {
			t.Fatalf("the dead process's stored reservation is %s, want released", got)
		}
		if n := spendTotal(t, b, "key:k1", "2026-11-29"); n > 4_000 || n < 3_000 {
			t.Fatalf("key day total %d after a's reservation went back; b holds 3,000", n)
		}
		ra.ID = "rct_b-1"
		if _, err := b.Reserve(ctx, ra); err != nil {
			t.Fatalf("b reserving what a held: %v", err)
		}
	})
}
