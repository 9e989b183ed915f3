package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Idempotent is the HUX idempotency primitive. It runs fn once per (tenant,
// scope, key) and stores its result in the same transaction:
//
//   - first use of the key: fn runs in a transaction that also claims the key
//     and stores fn's result; replay is false;
//   - same key, same canonical body: the stored result, replay true, fn does
//     not run;
//   - same key, different canonical body: a conflict Error (code
//     idempotency_key_conflict), nothing changes;
//   - concurrent duplicates: exactly one runs fn; the others wait for its
//     commit and get its result (Postgres blocks the second INSERT on the
//     unique key; SQLite serializes write transactions).
//
// If fn returns an error the transaction rolls back, the key stays free, and a
// retry with the same key runs fn again.
func (db *DB) Idempotent(ctx context.Context, tenant contract.TenantSlot, scope, key string, body []byte, fn func(*Tx) ([]byte, error)) (result []byte, replay bool, err error) {
	if !contract.ValidIdempotencyKey(key) {
		return nil, false, contract.FieldError("idempotency_key", "bad_idempotency_key", "idempotency key %q must match ^[A-Za-z0-9._:-]{8,120}$", key)
	}
	canon, err := contract.CanonicalJSON(body)
	if err != nil {
		return nil, false, err
	}
	bodyHash := contract.SHA256(canon)
	err = db.InTx(ctx, func(tx *Tx) error {
		claimed, stored, err := ClaimKey(ctx, tx, tenant, scope, key, bodyHash)
		if err != nil {
			return err
		}
		if !claimed {
			result, replay = stored, true
			return nil
		}
		res, err := fn(tx)
		if err != nil {
			return err
		}
		result, replay = res, false
		return CompleteKey(ctx, tx, tenant, scope, key, res)
	})
	if err != nil {
		return nil, false, err
	}
	return result, replay, nil
}

// ClaimKey claims an idempotency key inside tx, for adapters that run their
// own transaction. claimed is true when this transaction owns the key (the
// caller must then CompleteKey before commit); otherwise stored is the result
// recorded by the transaction that owns it. A different bodyHash is a
// conflict Error.
func ClaimKey(ctx context.Context, tx *Tx, tenant contract.TenantSlot, scope, key, bodyHash string) (claimed bool, stored []byte, err error) {
	res, err := tx.Exec(ctx, `INSERT INTO idempotency (tenant, scope, key, body_hash, result, created_at)
		VALUES (?, ?, ?, ?, NULL, ?) ON CONFLICT (tenant, scope, key) DO NOTHING`,
		string(tenant), scope, key, bodyHash, Micros(tx.db.Now()))
	if err != nil {
		return false, nil, fmt.Errorf("store: claim idempotency key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil, nil
	}
	var prevHash string
	var result sql.NullString
	err = tx.QueryRow(ctx, `SELECT body_hash, result FROM idempotency WHERE tenant = ? AND scope = ? AND key = ?`,
		string(tenant), scope, key).Scan(&prevHash, &result)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil, fmt.Errorf("store: idempotency key %s vanished", key)
	}
	if err != nil {
		return false, nil, fmt.Errorf("store: read idempotency key: %w", err)
	}
	if prevHash != bodyHash {
		return false, nil, contract.Conflictf("idempotency_key_conflict", "idempotency key %q was already used with a different body", key)
	}
	return false, []byte(result.String), nil
}

// CompleteKey stores the result of the transaction that claimed key.
func CompleteKey(ctx context.Context, tx *Tx, tenant contract.TenantSlot, scope, key string, result []byte) error {
	_, err := tx.Exec(ctx, `UPDATE idempotency SET result = ? WHERE tenant = ? AND scope = ? AND key = ?`,
		string(result), string(tenant), scope, key)
	if err != nil {
		return fmt.Errorf("store: complete idempotency key: %w", err)
	}
	return nil
}

// Leased keys: work that runs outside the claiming transaction (an HTTP
// write whose handler runs transactions of its own, an executor tick that
// calls a broker) claims its key in a short transaction, runs, then stores
// its result (CompleteLeasedKey) or frees the key (ReleaseLeasedKey). A
// claim whose result never arrived (its process died) is taken over after
// its lease by one taker: the claim's created_at is moved forward with a
// conditional UPDATE.

// KeyClaim is contract.KeyClaim: the state of a leased key.
type KeyClaim = contract.KeyClaim

// ClaimLeasedKey claims (tenant, scope, key) for a caller whose work runs
// outside this transaction. A key already used with another bodyHash is a
// conflict Error (code idempotency_key_conflict) and changes nothing.
func (db *DB) ClaimLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key, bodyHash string, lease time.Duration) (KeyClaim, error) {
	var out KeyClaim
	err := db.InTx(ctx, func(tx *Tx) error {
		var err error
		out, err = ClaimLeasedKeyIn(context.WithoutCancel(ctx), tx, tenant, scope, key, bodyHash, lease, true)
		return err
	})
	if err != nil {
		return KeyClaim{}, err
	}
	return out, nil
}

// ClaimLeasedKeyIn is ClaimLeasedKey inside tx, for adapters that write
// more in the same transaction (an executor replay appends its audit
// record). With take false it only reads: a free key, or a claim whose
// lease ran out, is left as it is and answered as in progress.
func ClaimLeasedKeyIn(ctx context.Context, tx *Tx, tenant contract.TenantSlot, scope, key, bodyHash string, lease time.Duration, take bool) (KeyClaim, error) {
	k, found, err := ReadKey(ctx, tx, tenant, scope, key)
	if err != nil {
		return KeyClaim{}, err
	}
	if !found {
		if !take {
			return KeyClaim{}, nil
		}
		claimed, stored, err := ClaimKey(ctx, tx, tenant, scope, key, bodyHash)
		if err != nil {
			return KeyClaim{}, err
		}
		if !claimed && len(stored) > 0 {
			return KeyClaim{Result: stored}, nil // completed by a concurrent transaction (Postgres)
		}
		return KeyClaim{Claimed: claimed}, nil
	}
	now := Micros(tx.db.Now())
	c, takeOver, err := k.Claim(key, bodyHash, now, lease)
	if err != nil || !takeOver || !take {
		return c, err
	}
	claimed, err := TakeOverKey(ctx, tx, tenant, scope, key, k.ClaimedAt, now)
	return KeyClaim{Claimed: claimed}, err
}

// ReadKey reads (tenant, scope, key) with q; found is false when no claim
// holds it.
func ReadKey(ctx context.Context, q Querier, tenant contract.TenantSlot, scope, key string) (k contract.StoredKey, found bool, err error) {
	var result sql.NullString
	err = q.QueryRow(ctx, `SELECT body_hash, result, created_at FROM idempotency WHERE tenant = ? AND scope = ? AND key = ?`,
		string(tenant), scope, key).Scan(&k.BodyHash, &result, &k.ClaimedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return contract.StoredKey{}, false, nil
	}
	if err != nil {
		return contract.StoredKey{}, false, fmt.Errorf("store: read idempotency key: %w", err)
	}
	if result.Valid {
		k.Done, k.Result = true, []byte(result.String)
	}
	return k, true, nil
}

// TakeOverKey moves the claim of a key whose lease ran out (claimed at
// claimedAt, its result never stored) to now; taken is true for the one
// taker whose conditional UPDATE changed the row.
func TakeOverKey(ctx context.Context, q Querier, tenant contract.TenantSlot, scope, key string, claimedAt, now int64) (taken bool, err error) {
	n, err := RowsAffected(q.Exec(ctx, `UPDATE idempotency SET created_at = ? WHERE tenant = ? AND scope = ? AND key = ? AND result IS NULL AND created_at = ?`,
		now, string(tenant), scope, key, claimedAt))
	if err != nil {
		return false, fmt.Errorf("store: take over idempotency key: %w", err)
	}
	return n == 1, nil
}

// CompleteLeasedKey stores the result of the caller that claimed key.
func (db *DB) CompleteLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key string, result []byte) error {
	return db.InTx(ctx, func(tx *Tx) error { return CompleteKey(ctx, tx, tenant, scope, key, result) })
}

// ReleaseLeasedKey frees a claimed key whose work changed nothing (it
// failed), so a retry runs again. A completed key is left as it is.
func (db *DB) ReleaseLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key string) error {
	if _, err := db.Exec(ctx, `DELETE FROM idempotency WHERE tenant = ? AND scope = ? AND key = ? AND result IS NULL`,
		string(tenant), scope, key); err != nil {
		return fmt.Errorf("store: release idempotency key: %w", err)
	}
	return nil
}
