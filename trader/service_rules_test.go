package trader_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

// conflicting makes the first n decision lookups lose to a concurrent
// writer (ErrConflict) and counts every lookup.
func conflicting(mem *tradertest.Memory, n int, calls *int) {
	mem.Fail = func(op string) error {
		if op != "LookupDecision" {
			return nil
		}
		*calls++
		if *calls <= n {
			return trader.ErrConflict
		}
		return nil
	}
}

// TestApplyRetriesAConflictUpToMaxTries: a decision whose transaction loses
// to a concurrent writer is run again, by default (MaxTries zero) up to 100
// times, so a few conflicts end applied; with MaxTries n it is run exactly n
// times and then answers failed concurrent_update.
func TestApplyRetriesAConflictUpToMaxTries(t *testing.T) {
	e := newEnv(t, trader.Options{})
	calls := 0
	conflicting(e.mem, 5, &calls)
	if r := e.apply(t, body(nil)); r.Status != trader.Applied || calls != 6 {
		t.Errorf("default tries, 5 conflicts: %s %v after %d runs; want applied after 6", r.Status, r.ErrorCodes(), calls)
	}

	for _, max := range []int{1, 2, 3} {
		e := newEnv(t, trader.Options{MaxTries: max})
		calls := 0
		conflicting(e.mem, 1000, &calls)
		r := e.apply(t, body(nil))
		if r.Status != trader.Failed || !slices.Equal(r.ErrorCodes(), []string{trader.CodeConcurrentUpdate}) || calls != max {
			t.Errorf("MaxTries %d, always conflicting: %s %v after %d runs; want failed concurrent_update after %d", max, r.Status, r.ErrorCodes(), calls, max)
		}
	}
}

// TestWithoutALoggerFailuresGoToTheDefaultLogger: a Service made without
// Options.Logger logs a failed decision to slog.Default().
func TestWithoutALoggerFailuresGoToTheDefaultLogger(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	mem := tradertest.NewMemory()
	tradertest.Seed(t, mem, t1)
	svc, err := trader.New(mem, trader.Options{MaxTries: 1})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	conflicting(mem, 1, &calls)
	r, err := svc.Apply(context.Background(), hermes, body(nil))
	if err != nil || r.Status != trader.Failed {
		t.Fatalf("Apply: %s, %v; want failed", r.Status, err)
	}
	if !strings.Contains(buf.String(), "trader: decision failed") {
		t.Errorf("default logger got %q, want the failure", buf.String())
	}
}

// TestTheDefaultRuntimeStampsInstancesWithTheServiceClock: the default
// runtime (StoreRuntime) records an instance's time from Options.Now, not
// the wall clock.
func TestTheDefaultRuntimeStampsInstancesWithTheServiceClock(t *testing.T) {
	e := newEnv(t, trader.Options{}) // its clock is at 2026-04-16
	if r := e.apply(t, body(nil)); r.Status != trader.Applied {
		t.Fatalf("apply: %s %v", r.Status, r.ErrorCodes())
	}
	err := e.mem.InTx(context.Background(), t1, func(tx trader.Tx) error {
		in, ok, err := tx.Instance(context.Background(), sB)
		day := time.Date(2026, 4, 16, 0, 0, 0, 0, time.UTC)
		if !ok || in.UpdatedAt.Before(day) || !in.UpdatedAt.Before(day.AddDate(0, 0, 1)) {
			t.Errorf("instance of %s: %+v; want it stamped on the service clock's day", sB, in)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestListStrategiesByConcern: a concern_id filter lists that concern's
// strategies only.
func TestListStrategiesByConcern(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, trader.Options{})
	if _, err := e.svc.PutStrategy(ctx, operator, newStrategy(), 0); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{concern: 6, "acct9:ethusd": 1, "acct9:btcusd": 0} {
		list, err := e.svc.ListStrategies(ctx, t1, trader.StrategyFilter{ConcernID: id})
		if err != nil || len(list) != want {
			t.Errorf("concern %s: %d strategies, %v; want %d", id, len(list), err, want)
		}
		for _, s := range list {
			if s.ConcernID() != id {
				t.Errorf("concern %s listed %s of %s", id, s.ID, s.ConcernID())
			}
		}
	}
}
