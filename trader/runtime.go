package trader

import (
	"context"
	"time"
)

// Runtime drives a strategy's runtime instance to the strategy's state after
// a change (the seed's reconcile_instance). It runs inside the decision's
// transaction, after the state change: an error fails the decision and rolls
// all of it back. reconciled reports whether the instance reached the state
// (false without an error means it will converge later; the decision stands
// and carries a not_reconciled warning).
type Runtime interface {
	Reconcile(ctx context.Context, tx Tx, s Strategy) (reconciled bool, err error)
}

// StoreRuntime is the default Runtime: it has no process to drive, so it
// records the desired state and marks the instance as having reached it, in
// the store, through the transaction.
type StoreRuntime struct {
	Now func() time.Time // defaults to time.Now
}

// Reconcile implements Runtime.
func (r StoreRuntime) Reconcile(ctx context.Context, tx Tx, s Strategy) (bool, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	in := Instance{StrategyID: s.ID, Desired: s.Status, Actual: s.Status, RiskMode: s.RiskMode, UpdatedAt: stamp(now())}
	if err := tx.PutInstance(ctx, in); err != nil {
		return false, err
	}
	return true, nil
}

// RuntimeFunc adapts a function to Runtime.
type RuntimeFunc func(ctx context.Context, tx Tx, s Strategy) (bool, error)

// Reconcile implements Runtime.
func (f RuntimeFunc) Reconcile(ctx context.Context, tx Tx, s Strategy) (bool, error) {
	return f(ctx, tx, s)
}
