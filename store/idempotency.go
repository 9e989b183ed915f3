package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
