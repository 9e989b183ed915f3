package edge

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
)

// Keys is the key store (auth.Store) on a DB: one row per key holding its
// fields as JSON (with the key's own grants) and its revocation time, and
// one row per tenant holding the grants every key of the tenant has.
// auth.Service does the checking and hashing, as on the server.
type Keys struct {
	db  DB
	now func() time.Time
}

// NewKeys returns the key store on db; now stamps revocations (nil:
// time.Now).
func NewKeys(db DB, now func() time.Time) *Keys {
	if now == nil {
		now = time.Now
	}
	return &Keys{db: db, now: now}
}

var _ auth.Store = (*Keys)(nil)

// keyDoc is a key's stored JSON.
type keyDoc struct {
	ID         string              `json:"id"`
	Tenant     contract.TenantSlot `json:"tenant"`
	Scopes     []contract.Scope    `json:"scopes"`
	Harness    string              `json:"harness,omitempty"`
	RunContext contract.RunContext `json:"run_context,omitempty"`
	Account    string              `json:"account,omitempty"`
	SecretHash string              `json:"secret_hash"`
	Grants     []string            `json:"grants,omitempty"`
	CreatedAt  int64               `json:"created_at"`
}

// CreateKey implements auth.Store.
func (k *Keys) CreateKey(ctx context.Context, key auth.Key) error {
	doc, err := json.Marshal(keyDoc{ID: key.ID, Tenant: key.Tenant, Scopes: key.Scopes, Harness: key.Harness, RunContext: key.RunContext, Account: key.Account,
		SecretHash: key.SecretHash, Grants: key.Grants, CreatedAt: micros(key.CreatedAt)})
	if err != nil {
		return fmt.Errorf("edge: create key: %w", err)
	}
	n, err := k.db.Exec(ctx, `INSERT INTO keys (id, tenant, doc) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, key.ID, string(key.Tenant), string(doc))
	if err != nil {
		return fmt.Errorf("edge: create key: %w", err)
	}
	if n == 0 {
		return contract.Conflictf("key_exists", "key %s already exists", key.ID)
	}
	return nil
}

// Key implements auth.Store: its Grants are its own and its tenant's.
func (k *Keys) Key(ctx context.Context, id string) (auth.Key, error) {
	r, found, err := one(ctx, k.db, `SELECT k.doc, k.revoked_at, g.grants FROM keys k LEFT JOIN tenant_grants g ON g.tenant = k.tenant WHERE k.id = ?`, id)
	if err != nil {
		return auth.Key{}, fmt.Errorf("edge: key: %w", err)
	}
	if !found {
		return auth.Key{}, contract.NotFoundf("key_not_found", "no key %s", id)
	}
	return keyOf(r)
}

// ListKeys implements auth.Store.
func (k *Keys) ListKeys(ctx context.Context) ([]auth.Key, error) {
	rows, err := k.db.Query(ctx, `SELECT k.doc, k.revoked_at, g.grants FROM keys k LEFT JOIN tenant_grants g ON g.tenant = k.tenant`)
	if err != nil {
		return nil, fmt.Errorf("edge: list keys: %w", err)
	}
	out := make([]auth.Key, len(rows))
	for i, r := range rows {
		if out[i], err = keyOf(r); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b auth.Key) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// keyOf reads a row of doc, revoked_at and the tenant's grants.
func keyOf(r Row) (auth.Key, error) {
	var d keyDoc
	if err := json.Unmarshal([]byte(r.Str(0)), &d); err != nil {
		return auth.Key{}, fmt.Errorf("edge: decode key: %w", err)
	}
	key := auth.Key{ID: d.ID, Tenant: d.Tenant, Scopes: d.Scopes, Harness: d.Harness, RunContext: d.RunContext, Account: d.Account,
		SecretHash: d.SecretHash, CreatedAt: fromMicros(d.CreatedAt)}
	if !r.Null(1) {
		t := fromMicros(r.Int(1))
		key.RevokedAt = &t
	}
	var tenant []string
	if !r.Null(2) {
		if err := json.Unmarshal([]byte(r.Str(2)), &tenant); err != nil {
			return auth.Key{}, fmt.Errorf("edge: decode grants: %w", err)
		}
	}
	if grants := append(slices.Clone(d.Grants), tenant...); len(grants) > 0 {
		slices.Sort(grants)
		key.Grants = slices.Compact(grants)
	}
	return key, nil
}

// RevokeKey implements auth.Store.
func (k *Keys) RevokeKey(ctx context.Context, id string) error {
	n, err := k.db.Exec(ctx, `UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, micros(k.now()), id)
	if err != nil {
		return fmt.Errorf("edge: revoke key: %w", err)
	}
	if n != 0 {
		return nil
	}
	if _, err := k.Key(ctx, id); err != nil {
		return err
	}
	return contract.Conflictf("key_revoked", "key %s is already revoked", id)
}

// TenantGrants implements auth.Store.
func (k *Keys) TenantGrants(ctx context.Context, tenant contract.TenantSlot) ([]string, error) {
	r, found, err := one(ctx, k.db, `SELECT grants FROM tenant_grants WHERE tenant = ?`, string(tenant))
	if err != nil || !found {
		return nil, err
	}
	var grants []string
	if err := json.Unmarshal([]byte(r.Str(0)), &grants); err != nil {
		return nil, fmt.Errorf("edge: decode grants: %w", err)
	}
	return grants, nil
}

// SetTenantGrants implements auth.Store: one upsert of the tenant's row.
func (k *Keys) SetTenantGrants(ctx context.Context, tenant contract.TenantSlot, grants []string) error {
	b, err := json.Marshal(grants)
	if err == nil {
		_, err = k.db.Exec(ctx, `INSERT INTO tenant_grants (tenant, grants) VALUES (?, ?) ON CONFLICT (tenant) DO UPDATE SET grants = excluded.grants`,
			string(tenant), string(b))
	}
	if err != nil {
		return fmt.Errorf("edge: set grants: %w", err)
	}
	return nil
}
