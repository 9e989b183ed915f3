package port

import (
	"context"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// RequestKeys keeps the Idempotency-Key of the server's write routes
// (server.RequestKeys) on the port, in the store's idempotency table, with
// the store's lease rules (store.ClaimLeasedKeyIn): the first
// use claims the key with an insert-if-absent, a repeat with another body
// is a conflict, a completed key answers its stored result, and a claim
// whose holder never finished is taken over after its lease by one
// conditional UPDATE on its claim time.
type RequestKeys struct {
	db  DB
	now func() time.Time
}

// NewRequestKeys returns the idempotency keys on db (now nil: time.Now).
func NewRequestKeys(db DB, now func() time.Time) *RequestKeys {
	if now == nil {
		now = time.Now
	}
	return &RequestKeys{db: db, now: now}
}

// ClaimLeasedKey implements server.RequestKeys.
func (k *RequestKeys) ClaimLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key, bodyHash string, lease time.Duration) (contract.KeyClaim, error) {
	now := Micros(k.now())
	n, err := k.db.Exec(ctx, `INSERT INTO idempotency (tenant, scope, key, body_hash, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		string(tenant), scope, key, bodyHash, now)
	if err != nil {
		return contract.KeyClaim{}, fmt.Errorf("store: claim idempotency key: %w", err)
	}
	if n == 1 {
		return contract.KeyClaim{Claimed: true}, nil
	}
	r, found, err := One(ctx, k.db, `SELECT body_hash, result, created_at FROM idempotency WHERE tenant = ? AND scope = ? AND key = ?`, string(tenant), scope, key)
	switch {
	case err != nil:
		return contract.KeyClaim{}, fmt.Errorf("store: read idempotency key: %w", err)
	case !found: // released between the two statements: claim again
		return k.ClaimLeasedKey(ctx, tenant, scope, key, bodyHash, lease)
	}
	stored := contract.StoredKey{BodyHash: r.Str(0), Done: !r.Null(1), Result: []byte(r.Str(1)), ClaimedAt: r.Int(2)}
	c, takeOver, err := stored.Claim(key, bodyHash, now, lease)
	if err != nil || !takeOver {
		return c, err
	}
	n, err = k.db.Exec(ctx, `UPDATE idempotency SET created_at = ? WHERE tenant = ? AND scope = ? AND key = ? AND result IS NULL AND created_at = ?`,
		now, string(tenant), scope, key, stored.ClaimedAt)
	if err != nil {
		return contract.KeyClaim{}, fmt.Errorf("store: take over idempotency key: %w", err)
	}
	return contract.KeyClaim{Claimed: n == 1}, nil
}

// CompleteLeasedKey implements server.RequestKeys.
func (k *RequestKeys) CompleteLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key string, result []byte) error {
	if _, err := k.db.Exec(ctx, `UPDATE idempotency SET result = ? WHERE tenant = ? AND scope = ? AND key = ?`,
		string(result), string(tenant), scope, key); err != nil {
		return fmt.Errorf("store: complete idempotency key: %w", err)
	}
	return nil
}

// ReleaseLeasedKey implements server.RequestKeys: a claim that changed
// nothing is freed; a completed key stays.
func (k *RequestKeys) ReleaseLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key string) error {
	if _, err := k.db.Exec(ctx, `DELETE FROM idempotency WHERE tenant = ? AND scope = ? AND key = ? AND result IS NULL`,
		string(tenant), scope, key); err != nil {
		return fmt.Errorf("store: release idempotency key: %w", err)
	}
	return nil
}
