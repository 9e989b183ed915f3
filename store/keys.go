package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
)

// Keys is the API key table; it implements auth.Store.
type Keys struct{ db *DB }

// Keys returns the store's key table.
func (db *DB) Keys() *Keys { return &Keys{db: db} }

var _ auth.Store = (*Keys)(nil)

// CreateKey implements auth.Store.
func (k *Keys) CreateKey(ctx context.Context, key auth.Key) error {
	_, err := k.db.Exec(ctx, `INSERT INTO api_keys (id, tenant, secret_hash, scopes, harness, run_context, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		key.ID, string(key.Tenant), key.SecretHash, joinScopes(key.Scopes), key.Harness, string(key.RunContext), Micros(key.CreatedAt))
	if IsUniqueViolation(err) {
		return contract.Conflictf("key_exists", "key %s already exists", key.ID)
	}
	if err != nil {
		return fmt.Errorf("store: create key: %w", err)
	}
	return nil
}

const keyColumns = `id, tenant, secret_hash, scopes, harness, run_context, created_at, revoked_at`

func scanKey(row interface{ Scan(...any) error }) (auth.Key, error) {
	var key auth.Key
	var tenant, scopes, runCtx string
	var created int64
	var revoked sql.NullInt64
	if err := row.Scan(&key.ID, &tenant, &key.SecretHash, &scopes, &key.Harness, &runCtx, &created, &revoked); err != nil {
		return auth.Key{}, err
	}
	key.Tenant = contract.TenantSlot(tenant)
	key.Scopes = splitScopes(scopes)
	key.RunContext = contract.RunContext(runCtx)
	key.CreatedAt = FromMicros(created)
	if revoked.Valid {
		t := FromMicros(revoked.Int64)
		key.RevokedAt = &t
	}
	return key, nil
}

// Key implements auth.Store.
func (k *Keys) Key(ctx context.Context, id string) (auth.Key, error) {
	key, err := scanKey(k.db.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return auth.Key{}, contract.NotFoundf("key_not_found", "no key %s", id)
	}
	if err != nil {
		return auth.Key{}, fmt.Errorf("store: key: %w", err)
	}
	return key, nil
}

// ListKeys implements auth.Store.
func (k *Keys) ListKeys(ctx context.Context) ([]auth.Key, error) {
	rows, err := k.db.Query(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	defer rows.Close()
	var keys []auth.Key
	for rows.Next() {
		key, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list keys: %w", err)
		}
		keys = append(keys, key)
	}
	return keys, rows.Err()
}

// RevokeKey implements auth.Store.
func (k *Keys) RevokeKey(ctx context.Context, id string) error {
	res, err := k.db.Exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, Micros(k.db.Now()), id)
	if err != nil {
		return fmt.Errorf("store: revoke key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := k.Key(ctx, id); err != nil {
			return err
		}
		return contract.Conflictf("key_revoked", "key %s is already revoked", id)
	}
	return nil
}

func joinScopes(s []contract.Scope) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = string(x)
	}
	return strings.Join(parts, ",")
}

func splitScopes(s string) []contract.Scope {
	if s == "" {
		return nil
	}
	var out []contract.Scope
	for p := range strings.SplitSeq(s, ",") {
		out = append(out, contract.Scope(p))
	}
	return out
}
