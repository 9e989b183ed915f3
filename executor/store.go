package executor

import (
	"context"

	"github.com/caduceus-dev/caduceus/contract"
)

// Store keeps the executor's own state, per tenant and broker account and
// per New York trading day ("2006-01-02"). Every method maps to one or two
// simple SQL statements; the check-then-write rules are an INSERT ... ON
// CONFLICT DO NOTHING (first writer wins) and an atomic UPSERT increment, so
// several processes may share one database.
//
// Implementations return an error only on failure; a missing row is not one.
type Store interface {
	// CaptureDayStart records value as the day-start account value of
	// (tenant, account, day) unless one is already recorded, and returns the
	// recorded value: the first tick of the day wins, later ticks read it.
	CaptureDayStart(ctx context.Context, tenant contract.TenantSlot, account, day string, value float64) (float64, error)
	// Anomalies returns the review-anomaly count of (tenant, account, day);
	// zero when none was recorded.
	Anomalies(ctx context.Context, tenant contract.TenantSlot, account, day string) (int, error)
	// AddAnomaly increments that count by one and returns the count after
	// the increment (it may include increments made concurrently).
	AddAnomaly(ctx context.Context, tenant contract.TenantSlot, account, day string) (int, error)
	// BrokerState returns the saved state of a named simulated broker
	// (e.g. "paper") for a tenant, nil when none was saved.
	BrokerState(ctx context.Context, tenant contract.TenantSlot, name string) ([]byte, error)
	// SaveBrokerState replaces that state.
	SaveBrokerState(ctx context.Context, tenant contract.TenantSlot, name string, state []byte) error
}

// AnomalyHaltThreshold is how many review anomalies in one New York trading
// day halt placement for the rest of that day.
const AnomalyHaltThreshold = 3

// DailyLossLimit is the realized loss, as a fraction of the day-start
// account value, that trips the daily-loss breaker.
const DailyLossLimit = -0.05
