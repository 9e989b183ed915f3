package tradertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// Open makes an empty store for one test, and the audit.Source that reads
// the audit records its transactions append.
type Open func(t *testing.T) (trader.Store, audit.Source)

// Tenants and ids the suite uses.
const (
	T1 contract.TenantSlot = "slot-1"
	T2 contract.TenantSlot = "slot-2"

	Account = "qndd8o9ppop6"
	Market  = "xrpusd"
	Concern = Account + ":" + Market

	// StrategyA is active; B..E are inactive and runnable; X is inactive
	// and not runnable.
	StrategyA = "9cf29124-65a7-4950-ac18-65f938e0239b"
	StrategyB = "0c555fee-e4c8-4543-ae70-c132517017e1"
	StrategyC = "1d5c7a2e-0b7e-4a55-9f0e-5d1d2a3b4c5d"
	StrategyD = "2e6d8b3f-1c8f-4b66-a01f-6e2e3b4c5d6e"
	StrategyE = "3f7e9c40-2d90-4c77-b120-7f3f4c5d6e7f"
	StrategyX = "4a8fad51-3ea1-4d88-8231-804a5d6e7f80"
)

// TestStore runs the conformance suite of trader.Store against stores made by
// open: the Tx contract method by method, tenant isolation, rollback, the
// unique rules, the audit chain, and Service-level tests that a real database
// must pass — 50 concurrent copies of one decision apply exactly once, 50
// concurrent switches on one concern leave one consistent state, a failed
// runtime rolls a decision back, and every attempt has one audit record.
func TestStore(t *testing.T, open Open) {
	t.Run("Strategies", func(t *testing.T) { testStrategies(t, open) })
	t.Run("OneCurrentPerConcern", func(t *testing.T) { testOneCurrent(t, open) })
	t.Run("ConditionalUpdate", func(t *testing.T) { testConditionalUpdate(t, open) })
	t.Run("Concerns", func(t *testing.T) { testConcerns(t, open) })
	t.Run("Decisions", func(t *testing.T) { testDecisions(t, open) })
	t.Run("Attempts", func(t *testing.T) { testAttempts(t, open) })
	t.Run("Instances", func(t *testing.T) { testInstances(t, open) })
	t.Run("TenantIsolation", func(t *testing.T) { testTenantIsolation(t, open) })
	t.Run("Rollback", func(t *testing.T) { testRollback(t, open) })
	t.Run("Audit", func(t *testing.T) { testAudit(t, open) })
	t.Run("ApplyAndReplay", func(t *testing.T) { testApplyAndReplay(t, open) })
	t.Run("FailedRollsBack", func(t *testing.T) { testFailedRollsBack(t, open) })
	t.Run("ConcurrentSameDecision", func(t *testing.T) { testConcurrentSameDecision(t, open) })
	t.Run("ConcurrentSwitches", func(t *testing.T) { testConcurrentSwitches(t, open) })
}

// at is a fixed time with microsecond precision, what stores keep.
var at = time.Date(2026, 4, 16, 20, 15, 0, 123456000, time.UTC)

func strategy(id, name string, status trader.Status, runnable bool) trader.Strategy {
	return trader.Strategy{ID: id, AccountID: Account, MarketSymbol: Market, Name: name, Status: status, Runnable: runnable, RiskMode: "normal", Revision: 1, UpdatedAt: at}
}

// Seed inserts the suite's concern (healthy) and strategies A (active), B..E
// (inactive, runnable) and X (inactive, not runnable) into tenant.
func Seed(t testing.TB, st trader.Store, tenant contract.TenantSlot) {
	t.Helper()
	err := st.InTx(context.Background(), tenant, func(tx trader.Tx) error {
		ctx := context.Background()
		if err := tx.InsertConcern(ctx, trader.Concern{ConcernID: Concern, ExecutionState: trader.Healthy, Revision: 1, UpdatedAt: at}); err != nil {
			return err
		}
		for _, s := range []trader.Strategy{
			strategy(StrategyA, "trend", trader.StatusActive, true),
			strategy(StrategyB, "mean-revert", trader.StatusInactive, true),
			strategy(StrategyC, "breakout", trader.StatusInactive, true),
			strategy(StrategyD, "grid", trader.StatusInactive, true),
			strategy(StrategyE, "carry", trader.StatusInactive, true),
			strategy(StrategyX, "broken", trader.StatusInactive, false),
		} {
			if err := tx.InsertStrategy(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// tx runs fn in a transaction of tenant and fails the test on error.
func tx(t *testing.T, st trader.Store, tenant contract.TenantSlot, fn func(ctx context.Context, tx trader.Tx) error) {
	t.Helper()
	ctx := t.Context()
	if err := st.InTx(ctx, tenant, func(tx trader.Tx) error { return fn(ctx, tx) }); err != nil {
		t.Fatalf("InTx: %v", err)
	}
}

// same compares two values by their JSON encoding (times in UTC compare
// equal whatever their location pointer).
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err1 := json.Marshal(got)
	w, err2 := json.Marshal(want)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: marshal: %v %v", what, err1, err2)
	}
	if !bytes.Equal(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// wantConflict runs fn in its own transaction and checks that it fails with
// ErrConflict and that InTx reports it.
func wantConflict(t *testing.T, st trader.Store, tenant contract.TenantSlot, what string, fn func(ctx context.Context, tx trader.Tx) error) {
	t.Helper()
	var inner error
	err := st.InTx(t.Context(), tenant, func(tx trader.Tx) error {
		inner = fn(t.Context(), tx)
		return inner
	})
	if !errors.Is(inner, trader.ErrConflict) {
		t.Errorf("%s: method error = %v, want ErrConflict", what, inner)
	}
	if !errors.Is(err, trader.ErrConflict) {
		t.Errorf("%s: InTx error = %v, want ErrConflict", what, err)
	}
}

func testStrategies(t *testing.T, open Open) {
	st, _ := open(t)
	Seed(t, st, T1)
	other := trader.Strategy{ID: "5b90be62-4fb2-4e99-9342-915b6e7f8091", AccountID: Account, MarketSymbol: "btcusd", Name: "btc", Status: trader.StatusPaused, Runnable: true, RiskMode: "defensive", Revision: 1, UpdatedAt: at}
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error { return tx.InsertStrategy(ctx, other) })
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		got, ok, err := tx.Strategy(ctx, StrategyA)
		if err != nil || !ok {
			t.Fatalf("Strategy(A) = %v, %v", ok, err)
		}
		same(t, "strategy A", got, strategy(StrategyA, "trend", trader.StatusActive, true))
		got, ok, err = tx.Strategy(ctx, other.ID)
		if err != nil || !ok {
			t.Fatalf("Strategy(other) = %v, %v", ok, err)
		}
		same(t, "strategy other", got, other)
		if _, ok, err := tx.Strategy(ctx, "00000000-0000-4000-8000-000000000000"); ok || err != nil {
			t.Errorf("missing strategy: ok=%v err=%v", ok, err)
		}
		ids := func(f trader.StrategyFilter) []string {
			list, err := tx.Strategies(ctx, f)
			if err != nil {
				t.Fatalf("Strategies(%+v): %v", f, err)
			}
			var out []string
			for _, s := range list {
				out = append(out, s.ID)
			}
			return out
		}
		all := []string{StrategyB, StrategyC, StrategyD, StrategyE, StrategyX, other.ID, StrategyA}
		slices.Sort(all)
		same(t, "all strategies, by id", ids(trader.StrategyFilter{}), all)
		same(t, "by account+market", len(ids(trader.StrategyFilter{AccountID: Account, MarketSymbol: Market})), 6)
		same(t, "by concern", ids(trader.StrategyFilter{ConcernID: Account + ":btcusd"}), []string{other.ID})
		same(t, "by market", ids(trader.StrategyFilter{MarketSymbol: "btcusd"}), []string{other.ID})
		same(t, "by status", ids(trader.StrategyFilter{Status: trader.StatusActive}), []string{StrategyA})
		same(t, "by concern and status", ids(trader.StrategyFilter{ConcernID: Concern, Status: trader.StatusPaused}), []string(nil))
		return nil
	})
	wantConflict(t, st, T1, "insert an existing id", func(ctx context.Context, tx trader.Tx) error {
		return tx.InsertStrategy(ctx, strategy(StrategyB, "again", trader.StatusInactive, true))
	})
}

func testOneCurrent(t *testing.T, open Open) {
	st, _ := open(t)
	Seed(t, st, T1)
	extra := strategy("6ca1cf73-50c3-4faa-a453-a26c7f8091a2", "extra", trader.StatusActive, true)
	wantConflict(t, st, T1, "insert a second active", func(ctx context.Context, tx trader.Tx) error { return tx.InsertStrategy(ctx, extra) })
	extra.Status = trader.StatusPaused
	wantConflict(t, st, T1, "insert a paused next to an active", func(ctx context.Context, tx trader.Tx) error { return tx.InsertStrategy(ctx, extra) })
	b := strategy(StrategyB, "mean-revert", trader.StatusActive, true)
	b.Revision = 2
	wantConflict(t, st, T1, "activate a second", func(ctx context.Context, tx trader.Tx) error { return tx.UpdateStrategy(ctx, b, 1) })
	b.Status = trader.StatusPaused
	wantConflict(t, st, T1, "pause a second", func(ctx context.Context, tx trader.Tx) error { return tx.UpdateStrategy(ctx, b, 1) })

	// Inactive extras, other concerns and other tenants are free.
	extra.Status = trader.StatusInactive
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error { return tx.InsertStrategy(ctx, extra) })
	elsewhere := strategy("7db2d084-61d4-4bbb-b564-b37d8091a2b3", "elsewhere", trader.StatusActive, true)
	elsewhere.MarketSymbol = "ethusd"
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error { return tx.InsertStrategy(ctx, elsewhere) })
	Seed(t, st, T2)

	// A switch inside one transaction: demote first, then promote.
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		a := strategy(StrategyA, "trend", trader.StatusInactive, true)
		a.Revision = 2
		if err := tx.UpdateStrategy(ctx, a, 1); err != nil {
			return err
		}
		b := strategy(StrategyB, "mean-revert", trader.StatusPaused, true)
		b.Revision = 2
		return tx.UpdateStrategy(ctx, b, 1)
	})
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		list, err := tx.Strategies(ctx, trader.StrategyFilter{ConcernID: Concern})
		if err != nil {
			return err
		}
		var current []string
		for _, s := range list {
			if s.Status.Current() {
				current = append(current, s.ID)
			}
		}
		same(t, "current after switch", current, []string{StrategyB})
		return nil
	})
}

func testConditionalUpdate(t *testing.T, open Open) {
	st, _ := open(t)
	Seed(t, st, T1)
	b := strategy(StrategyB, "renamed", trader.StatusInactive, false)
	b.RiskMode, b.Revision, b.UpdatedAt = "reduced", 2, at.Add(time.Second)
	wantConflict(t, st, T1, "stale revision", func(ctx context.Context, tx trader.Tx) error { return tx.UpdateStrategy(ctx, b, 7) })
	missing := b
	missing.ID = "00000000-0000-4000-8000-000000000000"
	wantConflict(t, st, T1, "missing strategy", func(ctx context.Context, tx trader.Tx) error { return tx.UpdateStrategy(ctx, missing, 1) })
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		got, _, err := tx.Strategy(ctx, StrategyB)
		same(t, "unchanged after refused updates", got, strategy(StrategyB, "mean-revert", trader.StatusInactive, true))
		return err
	})
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error { return tx.UpdateStrategy(ctx, b, 1) })
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		got, _, err := tx.Strategy(ctx, StrategyB)
		same(t, "after update", got, b)
		return err
	})
	wantConflict(t, st, T1, "the old revision again", func(ctx context.Context, tx trader.Tx) error { return tx.UpdateStrategy(ctx, b, 1) })
}

func testConcerns(t *testing.T, open Open) {
	st, _ := open(t)
	c1 := trader.Concern{ConcernID: "acct:btcusd", ExecutionState: trader.Healthy, Revision: 1, UpdatedAt: at}
	c2 := trader.Concern{ConcernID: "acct:adausd", ExecutionState: trader.Degraded, Revision: 1, UpdatedAt: at}
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		if err := tx.InsertConcern(ctx, c1); err != nil {
			return err
		}
		return tx.InsertConcern(ctx, c2)
	})
	wantConflict(t, st, T1, "insert an existing concern", func(ctx context.Context, tx trader.Tx) error { return tx.InsertConcern(ctx, c1) })
	next := c1
	next.ExecutionState, next.Revision, next.UpdatedAt = trader.Degraded, 2, at.Add(time.Minute)
	wantConflict(t, st, T1, "stale concern", func(ctx context.Context, tx trader.Tx) error { return tx.UpdateConcern(ctx, next, 5) })
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error { return tx.UpdateConcern(ctx, next, 1) })
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		got, ok, err := tx.Concern(ctx, c1.ConcernID)
		if !ok {
			t.Errorf("concern %s missing", c1.ConcernID)
		}
		same(t, "updated concern", got, next)
		if _, ok, _ := tx.Concern(ctx, "acct:none"); ok {
			t.Error("a missing concern was found")
		}
		locked, ok, err := tx.LockConcern(ctx, c1.ConcernID)
		if err != nil || !ok {
			t.Errorf("LockConcern: ok=%v err=%v", ok, err)
		}
		same(t, "locked concern", locked, next)
		if _, ok, err := tx.LockConcern(ctx, "acct:none"); ok || err != nil {
			t.Errorf("LockConcern of a missing concern: ok=%v err=%v", ok, err)
		}
		list, err2 := tx.Concerns(ctx)
		same(t, "concerns by id", list, []trader.Concern{c2, next})
		return errors.Join(err, err2)
	})
}

func sampleResponse(id string, status trader.Outcome) trader.Response {
	return trader.Response{
		OK: status == trader.Applied, Status: status, DecisionID: id, ConcernID: Concern, Action: trader.ActionSwitch,
		FromStrategyID: StrategyA, ToStrategyID: StrategyB, RiskMode: "normal",
		Validation: trader.Validation{ConcernMatch: true, AccountMatch: true, MarketMatch: true, ExpectedActiveMatch: true, TargetExists: true, TargetRunnable: true},
		Warnings:   []trader.Issue{{Code: "override", Message: "override bypassed: execution_degraded", Bypassed: []string{"execution_degraded"}}},
		Errors:     []trader.Issue{},
		Result:     trader.Result{ModeChange: trader.ModeApplied, Reconciled: true},
		AppliedAt:  contract.Timestamp(at),
	}
}

func testDecisions(t *testing.T, open Open) {
	st, _ := open(t)
	d := trader.Decision{DecisionID: "dec_2026_04_16_001", ConcernID: Concern, Fingerprint: contract.SHA256([]byte("x")), Status: trader.Applied,
		Response: sampleResponse("dec_2026_04_16_001", trader.Applied), AttemptID: "dec_01JD0000000000000000000000", CreatedAt: at}
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		if _, ok, err := tx.LookupDecision(ctx, d.DecisionID); ok || err != nil {
			t.Errorf("lookup before save: ok=%v err=%v", ok, err)
		}
		return tx.SaveDecision(ctx, d)
	})
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		got, ok, err := tx.LookupDecision(ctx, d.DecisionID)
		if !ok {
			t.Error("saved decision not found")
		}
		same(t, "decision round trip", got, d)
		return err
	})
	dup := d
	dup.Fingerprint = contract.SHA256([]byte("y"))
	wantConflict(t, st, T1, "same decision id", func(ctx context.Context, tx trader.Tx) error { return tx.SaveDecision(ctx, dup) })
	// The same id in another tenant is another decision.
	tx(t, st, T2, func(ctx context.Context, tx trader.Tx) error { return tx.SaveDecision(ctx, dup) })
}

func testAttempts(t *testing.T, open Open) {
	st, _ := open(t)
	ident := Caller(T1, "suite").Identity
	mk := func(i int, decision, concern string) trader.Attempt {
		return trader.Attempt{
			ID: fmt.Sprintf("dec_01JD%022d", i), DecisionID: decision, ConcernID: concern, Action: "pause", Status: trader.Rejected,
			Identity: ident, Request: json.RawMessage(`{"a":1}`), RequestSHA256: contract.SHA256([]byte(`{"a":1}`)), RequestBytes: 7,
			Response: sampleResponse(decision, trader.Rejected), ReceivedAt: at, DecidedAt: at.Add(time.Millisecond), AuditID: fmt.Sprintf("evt_%04d", i),
		}
	}
	all := []trader.Attempt{mk(1, "d1", Concern), mk(2, "d2", "acct:btcusd"), mk(3, "d1", Concern), mk(4, "", ""), mk(5, "d3", Concern)}
	all[2].Replay = true
	all[3].Request = nil
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		for _, a := range []int{2, 0, 4, 1, 3} { // insertion order is not the read order
			if err := tx.AddAttempt(ctx, all[a]); err != nil {
				return err
			}
		}
		return nil
	})
	wantConflict(t, st, T1, "same attempt id", func(ctx context.Context, tx trader.Tx) error { return tx.AddAttempt(ctx, all[0]) })
	rev := func(idx ...int) []trader.Attempt {
		var out []trader.Attempt
		for _, i := range idx {
			out = append(out, all[i])
		}
		return out
	}
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		for _, c := range []struct {
			name string
			f    trader.AttemptFilter
			want []trader.Attempt
		}{
			{"all, newest first", trader.AttemptFilter{}, rev(4, 3, 2, 1, 0)},
			{"by concern", trader.AttemptFilter{ConcernID: Concern}, rev(4, 2, 0)},
			{"by decision", trader.AttemptFilter{DecisionID: "d1"}, rev(2, 0)},
			{"limit", trader.AttemptFilter{Limit: 2}, rev(4, 3)},
			{"concern and limit", trader.AttemptFilter{ConcernID: Concern, Limit: 1}, rev(4)},
			{"none", trader.AttemptFilter{DecisionID: "nope"}, nil},
		} {
			got, err := tx.Attempts(ctx, c.f)
			if err != nil {
				return err
			}
			same(t, "attempts "+c.name, got, c.want)
		}
		return nil
	})
}

func testInstances(t *testing.T, open Open) {
	st, _ := open(t)
	in := trader.Instance{StrategyID: StrategyA, Desired: trader.StatusActive, Actual: trader.StatusPaused, RiskMode: "normal", UpdatedAt: at}
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		if _, ok, err := tx.Instance(ctx, StrategyA); ok || err != nil {
			t.Errorf("instance before put: ok=%v err=%v", ok, err)
		}
		return tx.PutInstance(ctx, in)
	})
	in.Actual, in.RiskMode, in.UpdatedAt = trader.StatusActive, "defensive", at.Add(time.Second)
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error { return tx.PutInstance(ctx, in) })
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		got, ok, err := tx.Instance(ctx, StrategyA)
		if !ok {
			t.Error("instance missing")
		}
		same(t, "instance replaced", got, in)
		return err
	})
}

func testTenantIsolation(t *testing.T, open Open) {
	st, src := open(t)
	Seed(t, st, T1)
	svc := newService(t, st, trader.Options{})
	resp := apply(t, svc, T1, switchTo("iso-1", StrategyB, StrategyA))
	if resp.Status != trader.Applied {
		t.Fatalf("apply in T1: %s %v", resp.Status, resp.Errors)
	}
	tx(t, st, T2, func(ctx context.Context, tx trader.Tx) error {
		if _, ok, _ := tx.Strategy(ctx, StrategyA); ok {
			t.Error("T2 sees T1's strategy")
		}
		if list, _ := tx.Strategies(ctx, trader.StrategyFilter{}); len(list) != 0 {
			t.Errorf("T2 lists %d strategies of T1", len(list))
		}
		if _, ok, _ := tx.Concern(ctx, Concern); ok {
			t.Error("T2 sees T1's concern")
		}
		if list, _ := tx.Concerns(ctx); len(list) != 0 {
			t.Errorf("T2 lists %d concerns of T1", len(list))
		}
		if _, ok, _ := tx.LookupDecision(ctx, "iso-1"); ok {
			t.Error("T2 sees T1's decision")
		}
		if list, _ := tx.Attempts(ctx, trader.AttemptFilter{}); len(list) != 0 {
			t.Errorf("T2 lists %d attempts of T1", len(list))
		}
		if _, ok, _ := tx.Instance(ctx, StrategyB); ok {
			t.Error("T2 sees T1's instance")
		}
		return nil
	})
	// T2 applies the same decision id on its own state: not a replay.
	Seed(t, st, T2)
	resp = apply(t, svc, T2, switchTo("iso-1", StrategyB, StrategyA))
	if resp.Status != trader.Applied || resp.Replay() {
		t.Errorf("T2's own decision iso-1: %s replay=%v %v", resp.Status, resp.Replay(), resp.Errors)
	}
	if n := countAudit(t, src, T1); n != 1 {
		t.Errorf("T1 has %d audit records, want 1", n)
	}
	if n := countAudit(t, src, T2); n != 1 {
		t.Errorf("T2 has %d audit records, want 1", n)
	}
}

func testRollback(t *testing.T, open Open) {
	st, src := open(t)
	Seed(t, st, T1)
	boom := errors.New("boom")
	caller := Caller(T1, "suite")
	err := st.InTx(t.Context(), T1, func(tx trader.Tx) error {
		ctx := t.Context()
		a := strategy(StrategyA, "trend", trader.StatusPaused, true)
		a.Revision = 2
		if err := tx.UpdateStrategy(ctx, a, 1); err != nil {
			return err
		}
		if err := tx.InsertStrategy(ctx, strategy("6ca1cf73-50c3-4faa-a453-a26c7f8091a2", "new", trader.StatusInactive, true)); err != nil {
			return err
		}
		if err := tx.InsertConcern(ctx, trader.Concern{ConcernID: "a:b", ExecutionState: trader.Healthy, Revision: 1, UpdatedAt: at}); err != nil {
			return err
		}
		if err := tx.SaveDecision(ctx, trader.Decision{DecisionID: "rb", ConcernID: Concern, Fingerprint: contract.SHA256(nil), Status: trader.Applied, Response: sampleResponse("rb", trader.Applied), AttemptID: "dec_x", CreatedAt: at}); err != nil {
			return err
		}
		if err := tx.AddAttempt(ctx, trader.Attempt{ID: "dec_rollback", DecisionID: "rb", Status: trader.Applied, Identity: caller.Identity, Response: sampleResponse("rb", trader.Applied), ReceivedAt: at, DecidedAt: at}); err != nil {
			return err
		}
		if err := tx.PutInstance(ctx, trader.Instance{StrategyID: StrategyA, Desired: trader.StatusPaused, Actual: trader.StatusPaused, RiskMode: "normal", UpdatedAt: at}); err != nil {
			return err
		}
		if _, err := tx.AppendAudit(ctx, entry(caller, "rollback")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v, want the error fn returned", err)
	}
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		got, _, _ := tx.Strategy(ctx, StrategyA)
		same(t, "strategy A after rollback", got, strategy(StrategyA, "trend", trader.StatusActive, true))
		if _, ok, _ := tx.Strategy(ctx, "6ca1cf73-50c3-4faa-a453-a26c7f8091a2"); ok {
			t.Error("rolled-back strategy insert is visible")
		}
		if _, ok, _ := tx.Concern(ctx, "a:b"); ok {
			t.Error("rolled-back concern is visible")
		}
		if _, ok, _ := tx.LookupDecision(ctx, "rb"); ok {
			t.Error("rolled-back decision is visible")
		}
		if list, _ := tx.Attempts(ctx, trader.AttemptFilter{}); len(list) != 0 {
			t.Error("rolled-back attempt is visible")
		}
		if _, ok, _ := tx.Instance(ctx, StrategyA); ok {
			t.Error("rolled-back instance is visible")
		}
		return nil
	})
	if n := countAudit(t, src, T1); n != 0 {
		t.Errorf("%d audit records after rollback, want 0", n)
	}
	// The chain continues cleanly after a rolled-back append.
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		_, err := tx.AppendAudit(ctx, entry(caller, "after"))
		return err
	})
	verify(t, src)
}

func entry(c contract.Caller, reason string) audit.Entry {
	return audit.Entry{
		Outcome: contract.AuditOutcome{At: contract.Timestamp(at), Identity: c.Identity, Action: "trader.test", Resource: "trader/test", Outcome: contract.OutcomeAllow, Reason: reason},
		Payload: map[string]string{"reason": reason},
	}
}

func testAudit(t *testing.T, open Open) {
	st, src := open(t)
	c1, c2 := Caller(T1, "suite"), Caller(T2, "suite")
	var recs []audit.Record
	for i := range 3 {
		tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
			r, err := tx.AppendAudit(ctx, entry(c1, fmt.Sprint(i)))
			recs = append(recs, r)
			return err
		})
	}
	tx(t, st, T2, func(ctx context.Context, tx trader.Tx) error {
		_, err := tx.AppendAudit(ctx, entry(c2, "t2"))
		return err
	})
	for i, r := range recs {
		if r.Seq != int64(i+1) || r.ID == "" || !contract.ValidSHA256(r.Hash) {
			t.Errorf("record %d: seq=%d id=%q hash=%q", i, r.Seq, r.ID, r.Hash)
		}
	}
	if n := countAudit(t, src, T1); n != 3 {
		t.Errorf("T1 has %d records, want 3", n)
	}
	if n := countAudit(t, src, T2); n != 1 {
		t.Errorf("T2 has %d records, want 1", n)
	}
	verify(t, src)
}

func countAudit(t *testing.T, src audit.Source, tenant contract.TenantSlot) int {
	t.Helper()
	n := 0
	if err := src.Scan(t.Context(), tenant, func(audit.Row) error { n++; return nil }); err != nil {
		t.Fatalf("audit scan: %v", err)
	}
	return n
}

func auditActions(t *testing.T, src audit.Source, tenant contract.TenantSlot) map[string]int {
	t.Helper()
	m := map[string]int{}
	if err := src.Scan(t.Context(), tenant, func(r audit.Row) error { m[r.Action]++; return nil }); err != nil {
		t.Fatalf("audit scan: %v", err)
	}
	return m
}

func verify(t *testing.T, src audit.Source) {
	t.Helper()
	rep, err := audit.Verify(t.Context(), src, nil)
	if err != nil {
		t.Fatalf("audit verify: %v", err)
	}
	if rep.Break != nil {
		t.Errorf("audit chain broken: %v", rep.Break)
	}
}

func newService(t testing.TB, st trader.Store, o trader.Options) *trader.Service {
	t.Helper()
	svc, err := trader.New(st, o)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// Request builds a request body.
func Request(fields map[string]any) []byte {
	b, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	return b
}

// switchTo is a switch decision of the suite's concern.
func switchTo(id, target, expected string) []byte {
	m := map[string]any{
		"decision_id": id, "concern_id": Concern, "account_id": Account, "market_symbol": Market,
		"action": "switch", "target_strategy_id": target, "reason": "suite", "confidence": 0.9,
	}
	if expected != "" {
		m["expected_active_strategy_id"] = expected
	}
	return Request(m)
}

func apply(t testing.TB, svc *trader.Service, tenant contract.TenantSlot, body []byte) trader.Response {
	t.Helper()
	resp, err := svc.Apply(context.Background(), Caller(tenant, "hermes"), body)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return resp
}

func current(t *testing.T, st trader.Store, tenant contract.TenantSlot) []trader.Strategy {
	t.Helper()
	var out []trader.Strategy
	tx(t, st, tenant, func(ctx context.Context, tx trader.Tx) error {
		list, err := tx.Strategies(ctx, trader.StrategyFilter{ConcernID: Concern})
		for _, s := range list {
			if s.Status.Current() {
				out = append(out, s)
			}
		}
		return err
	})
	return out
}

func testApplyAndReplay(t *testing.T, open Open) {
	st, src := open(t)
	Seed(t, st, T1)
	svc := newService(t, st, trader.Options{})
	first := apply(t, svc, T1, switchTo("dec-1", StrategyB, StrategyA))
	if first.Status != trader.Applied || !first.Result.Reconciled || first.Replay() {
		t.Fatalf("switch: %+v", first)
	}
	again := apply(t, svc, T1, switchTo("dec-1", StrategyB, StrategyA))
	if again.Status != trader.Applied || !again.Replay() {
		t.Errorf("replay: status %s replay %v errors %v", again.Status, again.Replay(), again.Errors)
	}
	conflict := apply(t, svc, T1, switchTo("dec-1", StrategyC, StrategyA))
	if conflict.Status != trader.Rejected || !slices.Equal(conflict.ErrorCodes(), []string{trader.CodeDecisionIDConflict}) {
		t.Errorf("same id, other payload: %s %v", conflict.Status, conflict.ErrorCodes())
	}
	cur := current(t, st, T1)
	if len(cur) != 1 || cur[0].ID != StrategyB || cur[0].Revision != 2 {
		t.Errorf("current after switch and replay: %+v", cur)
	}
	var inB trader.Instance
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		var ok bool
		var err error
		inB, ok, err = tx.Instance(ctx, StrategyB)
		if !ok {
			t.Error("no runtime instance for the new strategy")
		}
		return err
	})
	if inB.Desired != trader.StatusActive || inB.Actual != trader.StatusActive {
		t.Errorf("instance of B: %+v", inB)
	}
	view, err := svc.Decision(t.Context(), T1, "dec-1")
	if err != nil {
		t.Fatal(err)
	}
	if view.Decision == nil || view.Decision.Status != trader.Applied || len(view.Attempts) != 3 {
		t.Errorf("decision view: %+v, %d attempts", view.Decision, len(view.Attempts))
	}
	if n := countAudit(t, src, T1); n != 3 {
		t.Errorf("%d audit records for 3 attempts", n)
	}
	verify(t, src)
}

func testFailedRollsBack(t *testing.T, open Open) {
	st, src := open(t)
	Seed(t, st, T1)
	calls := 0
	broken := trader.RuntimeFunc(func(ctx context.Context, tx trader.Tx, s trader.Strategy) (bool, error) {
		calls++
		if calls == 2 { // the first strategy (the old one) already went through
			return false, errors.New("instance did not start")
		}
		return trader.StoreRuntime{}.Reconcile(ctx, tx, s)
	})
	svc := newService(t, st, trader.Options{Runtime: broken})
	resp := apply(t, svc, T1, switchTo("dec-f", StrategyB, StrategyA))
	if resp.Status != trader.Failed || resp.OK || !slices.Contains(resp.ErrorCodes(), trader.CodeRuntimeFailed) || resp.Result.ModeChange != trader.ModeRolledBack {
		t.Fatalf("failed runtime: %+v", resp)
	}
	cur := current(t, st, T1)
	if len(cur) != 1 || cur[0].ID != StrategyA || cur[0].Revision != 1 {
		t.Errorf("after a failed switch: %+v", cur)
	}
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		if _, ok, _ := tx.Instance(ctx, StrategyA); ok {
			t.Error("the rolled-back reconcile of A left an instance")
		}
		if _, ok, _ := tx.LookupDecision(ctx, "dec-f"); ok {
			t.Error("a failed decision was stored")
		}
		return nil
	})
	// The same id may be retried, and now applies.
	ok := newService(t, st, trader.Options{})
	resp = apply(t, ok, T1, switchTo("dec-f", StrategyB, StrategyA))
	if resp.Status != trader.Applied || resp.Replay() {
		t.Errorf("retry of a failed decision: %s replay=%v %v", resp.Status, resp.Replay(), resp.Errors)
	}
	hist, err := ok.History(t.Context(), T1, Concern, 0)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []trader.Outcome
	for _, a := range hist {
		statuses = append(statuses, a.Status)
	}
	same(t, "history, newest first", statuses, []trader.Outcome{trader.Applied, trader.Failed})
	if n := countAudit(t, src, T1); n != 2 {
		t.Errorf("%d audit records for 2 attempts", n)
	}
	verify(t, src)
}

const goroutines = 50

func testConcurrentSameDecision(t *testing.T, open Open) {
	st, src := open(t)
	Seed(t, st, T1)
	svc := newService(t, st, trader.Options{})
	body := switchTo("dec-same", StrategyB, StrategyA)
	resps := make([]trader.Response, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range goroutines {
		wg.Go(func() {
			<-start
			resps[i], errs[i] = svc.Apply(context.Background(), Caller(T1, "hermes"), body)
		})
	}
	close(start)
	wg.Wait()
	fresh, replays := 0, 0
	for i, r := range resps {
		switch {
		case errs[i] != nil:
			t.Errorf("goroutine %d: %v", i, errs[i])
		case r.Status == trader.Applied && r.Replay():
			replays++
		case r.Status == trader.Applied:
			fresh++
		default:
			t.Errorf("goroutine %d: %s %v", i, r.Status, r.Errors)
		}
	}
	if fresh != 1 || replays != goroutines-1 {
		t.Errorf("%d applied and %d replays, want 1 and %d", fresh, replays, goroutines-1)
	}
	cur := current(t, st, T1)
	if len(cur) != 1 || cur[0].ID != StrategyB || cur[0].Revision != 2 {
		t.Errorf("current: %+v", cur)
	}
	hist, err := svc.History(t.Context(), T1, Concern, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != goroutines {
		t.Errorf("%d attempts recorded, want %d", len(hist), goroutines)
	}
	if got := auditActions(t, src, T1); got[trader.AuditApply] != goroutines || len(got) != 1 {
		t.Errorf("audit actions %v, want %d %s", got, goroutines, trader.AuditApply)
	}
	verify(t, src)
}

func testConcurrentSwitches(t *testing.T, open Open) {
	st, src := open(t)
	Seed(t, st, T1)
	svc := newService(t, st, trader.Options{})
	targets := []string{StrategyA, StrategyB, StrategyC, StrategyD, StrategyE}
	resps := make([]trader.Response, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range goroutines {
		wg.Go(func() {
			<-start
			resps[i], errs[i] = svc.Apply(context.Background(), Caller(T1, "hermes"), switchTo(fmt.Sprintf("dec-storm-%02d", i), targets[i%len(targets)], ""))
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for i, r := range resps {
		switch {
		case errs[i] != nil:
			t.Errorf("goroutine %d: %v", i, errs[i])
		case r.Status == trader.Applied && !r.Replay():
			applied++
		case r.Status == trader.Noop:
		default:
			t.Errorf("goroutine %d: %s %v", i, r.Status, r.Errors)
		}
	}
	cur := current(t, st, T1)
	if len(cur) != 1 || cur[0].Status != trader.StatusActive {
		t.Fatalf("current strategies after the storm: %+v", cur)
	}
	// Replaying the applied switches in commit (attempt id) order must lead
	// from A to the final strategy, each starting where the last ended.
	hist, err := svc.History(t.Context(), T1, Concern, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != goroutines {
		t.Errorf("%d attempts recorded, want %d", len(hist), goroutines)
	}
	slices.Reverse(hist) // oldest first
	at, chain := StrategyA, 0
	for _, a := range hist {
		r := a.Response
		switch r.Status {
		case trader.Applied:
			if r.FromStrategyID != at {
				t.Errorf("attempt %s switched from %s, but %s was current", a.ID, r.FromStrategyID, at)
			}
			at = r.ToStrategyID
			chain++
		case trader.Noop:
			if r.ToStrategyID != at {
				t.Errorf("attempt %s was a noop to %s, but %s was current", a.ID, r.ToStrategyID, at)
			}
		}
	}
	if at != cur[0].ID {
		t.Errorf("the applied chain ends at %s, the store at %s", at, cur[0].ID)
	}
	if chain != applied {
		t.Errorf("%d applied in history, %d answered applied", chain, applied)
	}
	// Each applied switch rewrote two rows once each.
	var revs int64
	tx(t, st, T1, func(ctx context.Context, tx trader.Tx) error {
		list, err := tx.Strategies(ctx, trader.StrategyFilter{ConcernID: Concern})
		for _, s := range list {
			revs += int64(s.Revision) - 1
		}
		return err
	})
	if revs != int64(2*applied) {
		t.Errorf("revisions advanced %d times for %d applied switches", revs, applied)
	}
	if got := auditActions(t, src, T1); got[trader.AuditApply] != goroutines || len(got) != 1 {
		t.Errorf("audit actions %v, want %d %s", got, goroutines, trader.AuditApply)
	}
	verify(t, src)
}
