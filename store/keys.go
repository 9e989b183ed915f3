package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
)

// Keys is the API key table; it implements auth.Store.
type Keys struct{ db *DB }

// Keys returns the store's key table.
func (db *DB) Keys() *Keys { return &Keys{db: db} }

var _ auth.Store = (*Keys)(nil)

// CreateKey implements auth.Store.
// The key and its grants are written in one transaction.
func (k *Keys) CreateKey(ctx context.Context, key auth.Key) error {
	err := k.db.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO api_keys (id, tenant, secret_hash, scopes, harness, run_context, account, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			key.ID, string(key.Tenant), key.SecretHash, joinScopes(key.Scopes), key.Harness, string(key.RunContext), key.Account, Micros(key.CreatedAt)); err != nil {
			return err
		}
		for _, g := range key.Grants {
			if _, err := tx.Exec(ctx, `INSERT INTO api_key_grants (tenant, key_id, model, created_at) VALUES (?, ?, ?, ?)`,
				string(key.Tenant), key.ID, g, Micros(key.CreatedAt)); err != nil {
				return err
			}
		}
		return nil
	})
	if IsUniqueViolation(err) {
		return contract.Conflictf("key_exists", "key %s already exists", key.ID)
	}
	if err != nil {
		return fmt.Errorf("store: create key: %w", err)
	}
	return nil
}

const keyColumns = `id, tenant, secret_hash, scopes, harness, run_context, account, created_at, revoked_at`

func scanKey(row Scanner) (auth.Key, error) {
	var key auth.Key
	var tenant, scopes, runCtx string
	var created int64
	var revoked sql.NullInt64
	if err := row.Scan(&key.ID, &tenant, &key.SecretHash, &scopes, &key.Harness, &runCtx, &key.Account, &created, &revoked); err != nil {
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

// Key implements auth.Store. Its Grants are the key's own and its
// tenant's, sorted.
func (k *Keys) Key(ctx context.Context, id string) (auth.Key, error) {
	key, err := scanKey(k.db.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return auth.Key{}, contract.NotFoundf("key_not_found", "no key %s", id)
	}
	if err != nil {
		return auth.Key{}, fmt.Errorf("store: key: %w", err)
	}
	if key.Grants, err = k.grants(ctx, key.Tenant, key.ID); err != nil {
		return auth.Key{}, err
	}
	return key, nil
}

// grants returns the grants of keyID and of every key of tenant, sorted
// and without duplicates (keyID "": the tenant's alone).
func (k *Keys) grants(ctx context.Context, tenant contract.TenantSlot, keyID string) ([]string, error) {
	return AppendRows(nil, QueryRows(ctx, k.db, "grants", ScanValue[string],
		`SELECT DISTINCT model FROM api_key_grants WHERE tenant = ? AND key_id IN ('', ?) ORDER BY model`, string(tenant), keyID))
}

// TenantGrants implements auth.Store: the grants every key of tenant holds.
func (k *Keys) TenantGrants(ctx context.Context, tenant contract.TenantSlot) ([]string, error) {
	return k.grants(ctx, tenant, "")
}

// SetTenantGrants implements auth.Store: it replaces the grants every key
// of tenant holds. Like a revocation it bumps the key change counter (and
// notifies on Postgres), so every process re-reads the keys it cached. The
// grants must be checked
// (contract.CheckGrants) by the caller; auth.Service.SetTenantGrants does.
func (k *Keys) SetTenantGrants(ctx context.Context, tenant contract.TenantSlot, grants []string) error {
	return k.db.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM api_key_grants WHERE tenant = ? AND key_id = ''`, string(tenant)); err != nil {
			return fmt.Errorf("store: set grants: %w", err)
		}
		now := Micros(k.db.Now())
		for _, g := range grants {
			if _, err := tx.Exec(ctx, `INSERT INTO api_key_grants (tenant, key_id, model, created_at) VALUES (?, '', ?, ?)`, string(tenant), g, now); err != nil {
				return fmt.Errorf("store: set grants: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE key_changes SET n = n + 1 WHERE id = 1`); err != nil {
			return fmt.Errorf("store: set grants: %w", err)
		}
		if tx.Dialect() == Postgres {
			if _, err := tx.Exec(ctx, `SELECT pg_notify(?, ?)`, keysChannel, "grants:"+string(tenant)); err != nil {
				return fmt.Errorf("store: set grants: notify: %w", err)
			}
		}
		return nil
	})
}

// ListKeys implements auth.Store.
func (k *Keys) ListKeys(ctx context.Context) ([]auth.Key, error) {
	keys, err := AppendRows(nil, QueryRows(ctx, k.db, "list keys", scanKey, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`))
	if err != nil {
		return nil, err
	}
	for i := range keys {
		if keys[i].Grants, err = k.grants(ctx, keys[i].Tenant, keys[i].ID); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// RevokeKey implements auth.Store. The revocation bumps the key change
// counter in the same transaction and, on Postgres, notifies every
// listening process at commit (see WatchKeys).
func (k *Keys) RevokeKey(ctx context.Context, id string) error {
	var n int64
	err := k.db.InTx(ctx, func(tx *Tx) error {
		res, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, Micros(k.db.Now()), id)
		if err != nil {
			return fmt.Errorf("store: revoke key: %w", err)
		}
		if n, _ = res.RowsAffected(); n == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE key_changes SET n = n + 1 WHERE id = 1`); err != nil {
			return fmt.Errorf("store: revoke key: %w", err)
		}
		if tx.Dialect() == Postgres {
			if _, err := tx.Exec(ctx, `SELECT pg_notify(?, ?)`, keysChannel, id); err != nil {
				return fmt.Errorf("store: revoke key: notify: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if n == 0 {
		if _, err := k.Key(ctx, id); err != nil {
			return err
		}
		return contract.Conflictf("key_revoked", "key %s is already revoked", id)
	}
	return nil
}

// keysChannel is the Postgres NOTIFY channel of key changes.
const keysChannel = "caduceus_keys"

// KeyPollInterval is how often WatchKeys reads the change counter on SQLite
// (and on Postgres as the fallback while its LISTEN connection is down).
const KeyPollInterval = 10 * time.Millisecond

// WatchKeys implements auth.Watcher. On Postgres a connection of its own
// LISTENs on caduceus_keys and calls changed on every notification (and on
// every reconnect, in case one was missed while it was down). On SQLite it
// reads the key change counter every KeyPollInterval: one indexed row on a
// reader connection, which WAL lets run beside the writer.
func (k *Keys) WatchKeys(ctx context.Context, changed func()) error {
	if k.db.dialect == Postgres {
		return k.listen(ctx, changed)
	}
	return k.poll(ctx, changed, KeyPollInterval)
}

func (k *Keys) changeCount(ctx context.Context) (int64, error) {
	var n int64
	err := k.db.QueryRow(ctx, `SELECT n FROM key_changes WHERE id = 1`).Scan(&n)
	return n, err
}

func (k *Keys) poll(ctx context.Context, changed func(), every time.Duration) error {
	last, err := k.changeCount(ctx)
	if err != nil {
		last = -1
	}
	// Whatever was cached before the baseline was read may predate a
	// change the baseline already counts.
	changed()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		n, err := k.changeCount(ctx)
		if err != nil {
			continue // the store is unreachable; the cache TTL still bounds
		}
		if n != last {
			last = n
			changed()
		}
	}
}

func (k *Keys) listen(ctx context.Context, changed func()) error {
	for {
		err := k.db.Listen(ctx, keysChannel, changed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Down: fall back to polling the counter until the next attempt.
		_ = err
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		k.poll(pctx, changed, 50*time.Millisecond)
		cancel()
	}
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
