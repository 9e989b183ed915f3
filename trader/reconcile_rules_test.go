package trader_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

// reconciles is a Runtime that notes the strategies it was asked to
// reconcile, and fails with fail when that is set.
type reconciles struct {
	ids  []string
	fail error
}

func (r *reconciles) runtime() trader.Runtime {
	return trader.RuntimeFunc(func(_ context.Context, _ trader.Tx, s trader.Strategy) (bool, error) {
		r.ids = append(r.ids, s.ID)
		return r.fail == nil, r.fail
	})
}

// TestPutStrategyReconcilesOnlyAChangeOfStatusOrRiskMode: a put reconciles
// the runtime when it creates a strategy, changes its status or changes its
// risk mode, and not when it changes only what the runtime does not run on
// (its name).
func TestPutStrategyReconcilesOnlyAChangeOfStatusOrRiskMode(t *testing.T) {
	ctx := context.Background()
	rt := &reconciles{}
	e := newEnv(t, trader.Options{Runtime: rt.runtime()})
	st := newStrategy()
	for i, c := range []struct {
		name      string
		edit      func(*trader.Strategy)
		reconcile bool
	}{
		{"create", func(*trader.Strategy) {}, true},
		{"rename", func(s *trader.Strategy) { s.Name = "eth trend v2" }, false},
		{"pause", func(s *trader.Strategy) { s.Status = trader.StatusPaused }, true},
		{"risk mode", func(s *trader.Strategy) { s.RiskMode = "defensive" }, true},
		{"runnable", func(s *trader.Strategy) { s.Runnable = false }, false},
	} {
		c.edit(&st)
		rt.ids = nil
		if _, err := e.svc.PutStrategy(ctx, operator, st, contract.Revision(i)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := slices.Equal(rt.ids, []string{sNew}); got != c.reconcile {
			t.Errorf("%s: reconciled %v, want reconciled %v", c.name, rt.ids, c.reconcile)
		}
	}
}

// TestImportReconcilesOnlyAChangeOfStatusOrRiskMode: an import reconciles
// each strategy it creates or whose status or risk mode it changes; one it
// only renames is updated (next revision) but not reconciled.
func TestImportReconcilesOnlyAChangeOfStatusOrRiskMode(t *testing.T) {
	ctx := context.Background()
	rt := &reconciles{}
	e := newEnv(t, trader.Options{Runtime: rt.runtime()})
	line := func(id, name, status, risk string) string {
		return "  - {id: " + id + ", account_id: " + tradertest.Account + ", market_symbol: " + tradertest.Market + ", name: " + name + ", status: " + status + ", runnable: true, risk_mode: " + risk + "}\n"
	}
	file := "strategies:\n" +
		line(sA, "trend", "paused", "normal") + // status
		line(sB, "mean-revert", "inactive", "defensive") + // risk mode
		line(sC, "breakout renamed", "inactive", "normal") + // only renamed
		line(sNew, "new one", "inactive", "normal") // created
	before := e.strategy(t, sC)
	res, err := e.svc.Import(ctx, operator, []byte(file), trader.FormatYAML)
	if err != nil || res != (trader.ImportResult{StrategiesUpdated: 3, StrategiesCreated: 1}) {
		t.Fatalf("import: %+v, %v", res, err)
	}
	slices.Sort(rt.ids)
	want := []string{sA, sB, sNew}
	slices.Sort(want)
	if !slices.Equal(rt.ids, want) {
		t.Errorf("reconciled %v, want %v (not the renamed %s)", rt.ids, want, sC)
	}
	if got := e.strategy(t, sC); got.Name != "breakout renamed" || got.Revision != before.Revision+1 {
		t.Errorf("renamed strategy %+v; want the new name at revision %d", got, before.Revision+1)
	}
}

// TestImportWhoseRuntimeFailsChangesNothing: when the runtime cannot
// reconcile an imported strategy the import is an internal error and
// nothing of it is stored.
func TestImportWhoseRuntimeFailsChangesNothing(t *testing.T) {
	ctx := context.Background()
	rt := &reconciles{fail: errors.New("runtime down")}
	e := newEnv(t, trader.Options{Runtime: rt.runtime()})
	file := "strategies:\n  - {id: " + sA + ", account_id: " + tradertest.Account + ", market_symbol: " + tradertest.Market + ", name: trend, status: paused, runnable: true, risk_mode: normal}\n"
	if _, err := e.svc.Import(ctx, operator, []byte(file), trader.FormatYAML); err == nil || contract.KindOf(err) != contract.KindInternal {
		t.Fatalf("import with a failing runtime: %v, want internal", err)
	}
	if a := e.strategy(t, sA); a.Status != trader.StatusActive || a.Revision != 1 {
		t.Errorf("a failed import changed %s: %+v", sA, a)
	}
}
