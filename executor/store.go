package executor

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
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
	// (e.g. "paper") for a tenant and its version; nil and 0 when none was
	// saved.
	BrokerState(ctx context.Context, tenant contract.TenantSlot, name string) (state []byte, version int64, err error)
	// SaveBrokerState replaces that state if its version is still version
	// (0: nothing saved yet) and returns the new version; saved is false,
	// and nothing changes, when another writer saved first. It is one
	// conditional statement, so processes sharing a database never
	// overwrite each other's changes.
	SaveBrokerState(ctx context.Context, tenant contract.TenantSlot, name string, state []byte, version int64) (newVersion int64, saved bool, err error)

	// ClaimTick looks up or claims the idempotency key of a tick for a
	// tenant. bodyHash is the sha256 of the tick's canonical input. It
	// returns, when the key was used before with the same bodyHash, the
	// stored envelope (a replay); when the key is free, or its claim is older
	// than lease and was never completed (its process died), Claimed: the
	// caller owns the key and must CompleteTick or ReleaseTick it; otherwise
	// neither (another tick holds the key right now). The same key with a
	// different bodyHash is a conflict *contract.Error.
	ClaimTick(ctx context.Context, tenant contract.TenantSlot, key, bodyHash string, lease time.Duration) (TickClaim, error)
	// CompleteTick stores the envelope of the tick that claimed key.
	CompleteTick(ctx context.Context, tenant contract.TenantSlot, key string, envelope []byte) error
	// ReleaseTick frees a claimed key whose tick did nothing (an invalid
	// payload, a store failure before any broker call), so a retry runs. It
	// forgets the key's ref_ids too (TickRefs).
	ReleaseTick(ctx context.Context, tenant contract.TenantSlot, key string) error
	// TickRefs records refs as the ref_ids (one per intent) of the tick
	// holding key unless ref_ids are recorded for it already, and returns
	// the recorded ones: the first run of a key writes them, a run that
	// took over its claim (the first process died) reads them back, so it
	// places under the same ref_ids.
	TickRefs(ctx context.Context, tenant contract.TenantSlot, key string, refs []string) ([]string, error)
}

// TickReplayer is what a Store whose database also holds the audit log can
// do on top of ClaimTick: answer a retry in one transaction. A replay must
// write its audit record before it is acknowledged; done by the store in the
// transaction that reads the key, it costs one commit instead of a read and
// an append of its own.
type TickReplayer interface {
	// AuditsTo reports whether l appends to the chain ClaimOrReplayTick
	// writes (the same database), so a record written there is l's.
	AuditsTo(l audit.Log) bool
	// ClaimOrReplayTick is ClaimTick in one transaction that also records a
	// replay: when key was completed with bodyHash, record is called with
	// the stored envelope and the entry it returns is appended to the
	// tenant's audit chain in the same transaction, and the envelope is
	// returned (TickClaim.Envelope); an error of record rolls everything
	// back and is returned. record may be called more than once (a retried
	// transaction) and must have no other effect. With claim false a free
	// key, or an expired claim, is left as it is and the answer is the zero
	// TickClaim: a caller that only wants a completed key's envelope. A
	// ctx ended before the transaction starts changes nothing and is an
	// error; once it has started, the transaction runs to its end.
	ClaimOrReplayTick(ctx context.Context, tenant contract.TenantSlot, key, bodyHash string, lease time.Duration, claim bool, record func(envelope []byte) (audit.Entry, error)) (TickClaim, error)
}

// TickClaim is what ClaimTick found.
type TickClaim struct {
	Claimed  bool   // the caller owns the key
	Envelope []byte // the stored envelope of a completed tick (a replay)
}

// AnomalyHaltThreshold is how many review anomalies in one New York trading
// day halt placement for the rest of that day.
const AnomalyHaltThreshold = 3

// DailyLossLimit is the realized loss, as a fraction of the day-start
// account value, that trips the daily-loss breaker.
const DailyLossLimit = -0.05
