package tradertest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// TestMemoryTxWhoseMethodFailedDoesNotCommit states the Store rule for the
// memory store: when a Tx method failed (the store failed, or a write lost
// to a uniqueness rule: ErrConflict), the transaction commits nothing and
// InTx returns that error, even if fn swallowed it and returned nil.
func TestMemoryTxWhoseMethodFailedDoesNotCommit(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("disk on fire")
	for name, c := range map[string]struct {
		fail func(op string) error
		call func(tx trader.Tx)
		want error
	}{
		"store failure": {
			fail: func(op string) error {
				if op == "Strategy" {
					return boom
				}
				return nil
			},
			call: func(tx trader.Tx) { _, _, _ = tx.Strategy(ctx, StrategyA) },
			want: boom,
		},
		"conflict": {
			call: func(tx trader.Tx) {
				_ = tx.InsertConcern(ctx, trader.Concern{ConcernID: Concern, ExecutionState: trader.Degraded, Revision: 1})
			},
			want: trader.ErrConflict,
		},
	} {
		m := NewMemory()
		m.Fail = c.fail
		err := m.InTx(ctx, T1, func(tx trader.Tx) error {
			if err := tx.InsertConcern(ctx, trader.Concern{ConcernID: Concern, ExecutionState: trader.Healthy, Revision: 1}); err != nil {
				return err
			}
			c.call(tx) // fails; fn goes on as if it had not
			return nil
		})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: InTx = %v, want %v", name, err, c.want)
			continue
		}
		m.Fail = nil
		if err := m.InTx(ctx, T1, func(tx trader.Tx) error {
			if _, ok, err := tx.Concern(ctx, Concern); err != nil || ok {
				t.Errorf("%s: the concern written before the failure was committed (%v)", name, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMemoryAuditSourceNamesTenantsWithRecords: as an audit source, the
// memory store names the tenants that have records, not one that was only
// read.
func TestMemoryAuditSourceNamesTenantsWithRecords(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	Seed(t, m, T1)
	svc, err := trader.New(m, trader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PutConcern(ctx, Caller(T1, "operator", contract.ScopeConfigure), trader.Concern{ConcernID: "acct9:ethusd", ExecutionState: trader.Healthy}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ListConcerns(ctx, "slot-9"); err != nil {
		t.Fatal(err)
	}
	if ts, err := m.Tenants(ctx); err != nil || !slices.Equal(ts, []contract.TenantSlot{T1}) {
		t.Errorf("tenants %v, %v; want only %s", ts, err, T1)
	}
}
