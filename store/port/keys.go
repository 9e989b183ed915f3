package port

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
)

// Keys is the API key table (auth.Store) on the port, in the store's
// tables (store/migrations 000_core to 040_key_account): api_keys, the
// grants of a key or of every key of a tenant (key_id ”) in
// api_key_grants, and the change counter key_changes, which every change
// that can take access away (a revocation, a tenant's grants) raises in
// the same batch, so every process that caches keys forgets them at once.
// auth.Service does the checking and hashing.
type Keys struct {
	db     DB
	now    func() time.Time
	notify func(what string) Statement
	heads  *Audit // HeadsTo
}

// HeadsTo has each read of a key also read where its tenant's audit chain
// ends, in the same statement, and tell trail (Audit.SawHead), whose next
// append for that tenant then seals there without reading the head: at the
// edge a turn's key read, so that an isolate whose last append is not the
// chain's last (another isolate appended since) still seals its turn's
// record without a round trip of its own. It returns k.
func (k *Keys) HeadsTo(trail *Audit) *Keys {
	k.heads = trail
	return k
}

// NewKeys returns the key table on db. now stamps revocations and grants
// (nil: time.Now). notify, when not nil, is a statement each change adds
// to its batch, naming what changed: Postgres's pg_notify, which tells
// every listening process at commit (store.Keys.WatchKeys).
func NewKeys(db DB, now func() time.Time, notify func(what string) Statement) *Keys {
	if now == nil {
		now = time.Now
	}
	return &Keys{db: db, now: now, notify: notify}
}

var _ auth.Store = (*Keys)(nil)

// bumpSQL raises the key change counter.
const bumpSQL = `UPDATE key_changes SET n = n + 1 WHERE id = 1`

// changed is what a change adds to its batch: the counter's bump and the
// notification.
func (k *Keys) changed(what string, bump Statement) []Statement {
	if k.notify == nil {
		return []Statement{bump}
	}
	return []Statement{bump, k.notify(what)}
}

// CreateKey implements auth.Store: the key and its grants in one batch.
func (k *Keys) CreateKey(ctx context.Context, key auth.Key) error {
	stmts := []Statement{{SQL: `INSERT INTO api_keys (id, tenant, secret_hash, scopes, harness, run_context, account, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		Args: []any{key.ID, string(key.Tenant), key.SecretHash, JoinScopes(key.Scopes), key.Harness, string(key.RunContext), key.Account, Micros(key.CreatedAt)}}}
	for _, g := range key.Grants {
		stmts = append(stmts, Statement{SQL: `INSERT INTO api_key_grants (tenant, key_id, model, created_at) VALUES (?, ?, ?, ?)`,
			Args: []any{string(key.Tenant), key.ID, g, Micros(key.CreatedAt)}})
	}
	err := k.db.Batch(ctx, stmts)
	if Unique(err) {
		return contract.Conflictf("key_exists", "key %s already exists", key.ID)
	}
	if err != nil {
		return fmt.Errorf("store: create key: %w", err)
	}
	return nil
}

const keyColumns = `id, tenant, secret_hash, scopes, harness, run_context, account, created_at, revoked_at`

func keyOf(r Row) auth.Key {
	key := auth.Key{ID: r.Str(0), Tenant: contract.TenantSlot(r.Str(1)), SecretHash: r.Str(2), Scopes: SplitScopes(r.Str(3)),
		Harness: r.Str(4), RunContext: contract.RunContext(r.Str(5)), Account: r.Str(6), CreatedAt: FromMicros(r.Int(7))}
	if !r.Null(8) {
		t := FromMicros(r.Int(8))
		key.RevokedAt = &t
	}
	return key
}

// keyWithGrantsSQL reads a key and its grants (its own and its tenant's)
// in one statement: a row per grant, sorted, or one with a NULL model when
// there is none. It is every authenticated request's one read at the
// edge, where each statement is a round trip to D1.
const keyWithGrantsSQL = `SELECT k.id, k.tenant, k.secret_hash, k.scopes, k.harness, k.run_context, k.account, k.created_at, k.revoked_at, g.model
FROM api_keys k LEFT JOIN api_key_grants g ON g.tenant = k.tenant AND g.key_id IN ('', k.id)
WHERE k.id = ? ORDER BY g.model`

// keyWithGrantsAndHeadSQL is keyWithGrantsSQL with the key's tenant's
// audit head on each row (NULL when the tenant has none): HeadsTo.
const keyWithGrantsAndHeadSQL = `SELECT k.id, k.tenant, k.secret_hash, k.scopes, k.harness, k.run_context, k.account, k.created_at, k.revoked_at, g.model, h.seq, h.hash
FROM api_keys k LEFT JOIN api_key_grants g ON g.tenant = k.tenant AND g.key_id IN ('', k.id) LEFT JOIN audit_heads h ON h.tenant = k.tenant
WHERE k.id = ? ORDER BY g.model`

// Key implements auth.Store. Its Grants are the key's own and its
// tenant's, sorted and without duplicates, read with it in one statement.
func (k *Keys) Key(ctx context.Context, id string) (auth.Key, error) {
	q := keyWithGrantsSQL
	if k.heads != nil {
		q = keyWithGrantsAndHeadSQL
	}
	rows, err := k.db.Query(ctx, q, id)
	if err != nil {
		return auth.Key{}, fmt.Errorf("store: key: %w", err)
	}
	if len(rows) == 0 {
		return auth.Key{}, contract.NotFoundf("key_not_found", "no key %s", id)
	}
	key := keyOf(rows[0])
	if r := rows[0]; k.heads != nil && !r.Null(10) {
		k.heads.SawHead(key.Tenant, r.Int(10), r.Str(11))
	}
	for _, r := range rows {
		if r.Null(9) {
			continue
		}
		if g := r.Str(9); len(key.Grants) == 0 || key.Grants[len(key.Grants)-1] != g {
			key.Grants = append(key.Grants, g)
		}
	}
	return key, nil
}

// grants returns the grants of keyID and of every key of tenant, sorted
// and without duplicates (keyID "": the tenant's alone).
func (k *Keys) grants(ctx context.Context, tenant contract.TenantSlot, keyID string) ([]string, error) {
	rows, err := k.db.Query(ctx, `SELECT DISTINCT model FROM api_key_grants WHERE tenant = ? AND key_id IN ('', ?) ORDER BY model`, string(tenant), keyID)
	if err != nil {
		return nil, fmt.Errorf("store: grants: %w", err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Str(0))
	}
	return out, nil
}

// TenantGrants implements auth.Store: the grants every key of tenant holds.
func (k *Keys) TenantGrants(ctx context.Context, tenant contract.TenantSlot) ([]string, error) {
	return k.grants(ctx, tenant, "")
}

// SetTenantGrants implements auth.Store: it replaces the grants every key
// of tenant holds, in one batch that raises the change counter. The
// grants must be checked (contract.CheckGrants) by the caller;
// auth.Service.SetTenantGrants does.
func (k *Keys) SetTenantGrants(ctx context.Context, tenant contract.TenantSlot, grants []string) error {
	stmts := []Statement{{SQL: `DELETE FROM api_key_grants WHERE tenant = ? AND key_id = ''`, Args: []any{string(tenant)}}}
	now := Micros(k.now())
	for _, g := range grants {
		stmts = append(stmts, Statement{SQL: `INSERT INTO api_key_grants (tenant, key_id, model, created_at) VALUES (?, '', ?, ?)`,
			Args: []any{string(tenant), g, now}})
	}
	if err := k.db.Batch(ctx, append(stmts, k.changed("grants:"+string(tenant), Statement{SQL: bumpSQL})...)); err != nil {
		return fmt.Errorf("store: set grants: %w", err)
	}
	return nil
}

// ListKeys implements auth.Store: every key, oldest first.
func (k *Keys) ListKeys(ctx context.Context) ([]auth.Key, error) {
	rows, err := k.db.Query(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	keys := make([]auth.Key, len(rows))
	for i, r := range rows {
		keys[i] = keyOf(r)
		if keys[i].Grants, err = k.grants(ctx, keys[i].Tenant, keys[i].ID); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// RevokeKey implements auth.Store: one batch stamps the key's revocation
// if it has none and, only then, raises the change counter (and notifies).
// A key already revoked is a conflict, a missing one not found.
func (k *Keys) RevokeKey(ctx context.Context, id string) error {
	at := Micros(k.now())
	bump := Statement{SQL: bumpSQL + ` AND EXISTS (SELECT 1 FROM api_keys WHERE id = ? AND revoked_at = ?)`, Args: []any{id, at}}
	stmts := append([]Statement{{SQL: `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, Args: []any{at, id}}},
		k.changed(id, bump)...)
	if err := k.db.Batch(ctx, stmts); err != nil {
		return fmt.Errorf("store: revoke key: %w", err)
	}
	key, err := k.Key(ctx, id)
	if err != nil {
		return err
	}
	if key.RevokedAt == nil || Micros(*key.RevokedAt) != at {
		return contract.Conflictf("key_revoked", "key %s is already revoked", id)
	}
	return nil
}

// JoinScopes is scopes as api_keys stores them, comma-separated.
func JoinScopes(s []contract.Scope) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = string(x)
	}
	return strings.Join(parts, ",")
}

// SplitScopes reads JoinScopes's text.
func SplitScopes(s string) []contract.Scope {
	if s == "" {
		return nil
	}
	var out []contract.Scope
	for p := range strings.SplitSeq(s, ",") {
		out = append(out, contract.Scope(p))
	}
	return out
}
