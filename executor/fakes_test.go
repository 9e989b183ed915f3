package executor_test

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

// countingBroker refuses everything and counts calls: tests that must not
// reach a broker use it.
type countingBroker struct{ calls int }

func (b *countingBroker) fail() error {
	b.calls++
	return broker.Errorf("test", 500, "must not be called")
}
func (b *countingBroker) Accounts(context.Context) ([]broker.Account, error) {
	return nil, b.fail()
}
func (b *countingBroker) Portfolio(context.Context, string) (broker.Portfolio, error) {
	return broker.Portfolio{}, b.fail()
}
func (b *countingBroker) Positions(context.Context, string) ([]broker.Position, error) {
	return nil, b.fail()
}
func (b *countingBroker) Quotes(context.Context, []string) ([]broker.Quote, error) {
	return nil, b.fail()
}
func (b *countingBroker) Review(context.Context, broker.OrderRequest) (broker.Review, error) {
	return broker.Review{}, b.fail()
}
func (b *countingBroker) Place(context.Context, broker.OrderRequest) (broker.Order, error) {
	return broker.Order{}, b.fail()
}
func (b *countingBroker) Cancel(context.Context, string, string) (broker.Order, error) {
	return broker.Order{}, b.fail()
}
func (b *countingBroker) Orders(context.Context, string) ([]broker.Order, error) {
	return nil, b.fail()
}
func (b *countingBroker) RealizedPnL(context.Context, string, string) (broker.PnL, error) {
	return broker.PnL{}, b.fail()
}

type nopStore struct{}

func (nopStore) CaptureDayStart(_ context.Context, _ contract.TenantSlot, _, _ string, v float64) (float64, error) {
	return v, nil
}
func (nopStore) Anomalies(context.Context, contract.TenantSlot, string, string) (int, error) {
	return 0, nil
}
func (nopStore) AddAnomaly(context.Context, contract.TenantSlot, string, string) (int, error) {
	return 1, nil
}
func (nopStore) BrokerState(context.Context, contract.TenantSlot, string) ([]byte, int64, error) {
	return nil, 0, nil
}
func (nopStore) SaveBrokerState(_ context.Context, _ contract.TenantSlot, _ string, _ []byte, v int64) (int64, bool, error) {
	return v + 1, true, nil
}
func (nopStore) ClaimTick(context.Context, contract.TenantSlot, string, string, time.Duration) (executor.TickClaim, error) {
	return executor.TickClaim{Claimed: true}, nil
}
func (nopStore) CompleteTick(context.Context, contract.TenantSlot, string, []byte) error { return nil }
func (nopStore) ReleaseTick(context.Context, contract.TenantSlot, string) error          { return nil }
func (nopStore) TickRefs(_ context.Context, _ contract.TenantSlot, _ string, refs []string) ([]string, error) {
	return refs, nil
}

type nopLog struct{}

func (nopLog) Append(_ context.Context, e audit.Entry) (audit.Record, error) {
	return audit.Record{}, audit.Check(e)
}
