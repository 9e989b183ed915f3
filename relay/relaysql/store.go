// Package relaysql is the relay gate's SQL: relay.Store over the store core
// (tables of migrations/400_relay.sql), on SQLite and Postgres.
package relaysql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

func init() { store.RegisterMigrations("relaysql", migrations, "migrations") }

// Store is the relay connector's state; it implements relay.Store. Every
// statement filters on tenant, except Prune's deletions of expired rows.
type Store struct{ db *store.DB }

// New returns the adapter over db.
func New(db *store.DB) *Store { return &Store{db: db} }

var _ relay.Store = (*Store)(nil)

// PutCapability implements relay.Store (one upsert).
func (s *Store) PutCapability(ctx context.Context, c relay.Capability) error {
	_, err := s.db.Exec(ctx, `INSERT INTO relay_capabilities (tenant, session_key, kind, bot, secret, expires_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, session_key, kind) DO UPDATE SET bot = excluded.bot, secret = excluded.secret, expires_at = excluded.expires_at`,
		string(c.Tenant), c.SessionKey, c.Kind, c.Bot, c.Secret, store.Micros(c.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: relay: put capability: %w", err)
	}
	return nil
}

// Capability implements relay.Store.
func (s *Store) Capability(ctx context.Context, tenant contract.TenantSlot, sessionKey, kind string, now time.Time) (relay.Capability, bool, error) {
	c := relay.Capability{Tenant: tenant, SessionKey: sessionKey, Kind: kind}
	var exp int64
	err := s.db.QueryRow(ctx, `SELECT bot, secret, expires_at FROM relay_capabilities WHERE tenant = ? AND session_key = ? AND kind = ? AND expires_at > ?`,
		string(tenant), sessionKey, kind, store.Micros(now)).Scan(&c.Bot, &c.Secret, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return relay.Capability{}, false, nil
	}
	if err != nil {
		return relay.Capability{}, false, fmt.Errorf("store: relay: capability: %w", err)
	}
	c.ExpiresAt = store.FromMicros(exp)
	return c, true, nil
}

// MarkSeen implements relay.Store (one INSERT ... ON CONFLICT DO NOTHING).
func (s *Store) MarkSeen(ctx context.Context, tenant contract.TenantSlot, key string, at time.Time) (bool, error) {
	n, err := store.RowsAffected(s.db.Exec(ctx, `INSERT INTO relay_seen (tenant, dedupe_key, seen_at) VALUES (?, ?, ?) ON CONFLICT (tenant, dedupe_key) DO NOTHING`,
		string(tenant), key, store.Micros(at)))
	if err != nil {
		return false, fmt.Errorf("store: relay: mark seen: %w", err)
	}
	return n == 1, nil
}

// Enqueue implements relay.Store: one INSERT ... SELECT guarded by the
// tenant's count, which does nothing for an event already buffered (ON
// CONFLICT DO NOTHING, so a platform's redelivery is no error in the
// server's log). On SQLite the single writer makes the bound exact; on
// Postgres concurrent enqueues of one tenant may pass it by a few rows.
func (s *Store) Enqueue(ctx context.Context, b relay.Buffered, limit int) (bool, error) {
	args := []any{string(b.Tenant), b.ID, b.Platform, b.Bot, b.SessionKey, string(b.Event), store.Micros(b.CreatedAt)}
	q := `INSERT INTO relay_buffer (tenant, id, platform, bot, session_key, event, created_at)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT)`
	if limit > 0 {
		q += ` WHERE (SELECT COUNT(*) FROM relay_buffer WHERE tenant = ?) < ?`
		args = append(args, string(b.Tenant), limit)
	} else {
		q += ` WHERE true` // SQLite reads ON CONFLICT after a SELECT only past a WHERE
	}
	q += ` ON CONFLICT (tenant, id) DO NOTHING`
	n, err := store.RowsAffected(s.db.Exec(ctx, q, args...))
	if err != nil {
		return false, fmt.Errorf("store: relay: enqueue: %w", err)
	}
	return n == 1, nil
}

// Pending implements relay.Store.
func (s *Store) Pending(ctx context.Context, tenant contract.TenantSlot, platform, bot string, now time.Time, limit int) ([]relay.Buffered, error) {
	q := store.Statement{SQL: `SELECT id, session_key, event, created_at FROM relay_buffer
		WHERE tenant = ? AND platform = ? AND bot = ? AND lease_until <= ? ORDER BY id`, Args: []any{string(tenant), platform, bot, store.Micros(now)}}
	if limit > 0 {
		q.Add(` LIMIT ?`, limit)
	}
	return store.AppendRows(nil, store.QueryRows(ctx, s.db, "relay: pending", func(row store.Scanner) (relay.Buffered, error) {
		b := relay.Buffered{Tenant: tenant, Platform: platform, Bot: bot}
		var event string
		var created int64
		err := row.Scan(&b.ID, &b.SessionKey, &event, &created)
		b.Event, b.CreatedAt = []byte(event), store.FromMicros(created)
		return b, err
	}, q.SQL, q.Args...))
}

// Lease implements relay.Store (one conditional UPDATE).
func (s *Store) Lease(ctx context.Context, tenant contract.TenantSlot, id, owner string, now, until time.Time) (bool, error) {
	n, err := store.RowsAffected(s.db.Exec(ctx, `UPDATE relay_buffer SET lease_owner = ?, lease_until = ?
		WHERE tenant = ? AND id = ? AND (lease_until <= ? OR lease_owner = ?)`,
		owner, store.Micros(until), string(tenant), id, store.Micros(now), owner))
	if err != nil {
		return false, fmt.Errorf("store: relay: lease: %w", err)
	}
	return n == 1, nil
}

// ReleaseLeases implements relay.Store.
func (s *Store) ReleaseLeases(ctx context.Context, tenant contract.TenantSlot, owner string) error {
	if _, err := s.db.Exec(ctx, `UPDATE relay_buffer SET lease_owner = '', lease_until = 0 WHERE tenant = ? AND lease_owner = ?`,
		string(tenant), owner); err != nil {
		return fmt.Errorf("store: relay: release leases: %w", err)
	}
	return nil
}

// Ack implements relay.Store.
func (s *Store) Ack(ctx context.Context, tenant contract.TenantSlot, id string) (bool, error) {
	n, err := store.RowsAffected(s.db.Exec(ctx, `DELETE FROM relay_buffer WHERE tenant = ? AND id = ?`, string(tenant), id))
	if err != nil {
		return false, fmt.Errorf("store: relay: ack: %w", err)
	}
	return n == 1, nil
}

// BindChat implements relay.Store.
func (s *Store) BindChat(ctx context.Context, tenant contract.TenantSlot, platform, chatID string, at time.Time) error {
	if _, err := s.db.Exec(ctx, `INSERT INTO relay_chats (tenant, platform, chat_id, bound_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, platform, chat_id) DO NOTHING`, string(tenant), platform, chatID, store.Micros(at)); err != nil {
		return fmt.Errorf("store: relay: bind chat: %w", err)
	}
	return nil
}

// ChatBound implements relay.Store.
func (s *Store) ChatBound(ctx context.Context, tenant contract.TenantSlot, platform, chatID string) (bool, error) {
	var one int
	err := s.db.QueryRow(ctx, `SELECT 1 FROM relay_chats WHERE tenant = ? AND platform = ? AND chat_id = ?`,
		string(tenant), platform, chatID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: relay: chat bound: %w", err)
	}
	return true, nil
}

// Prune implements relay.Store.
func (s *Store) Prune(ctx context.Context, now, seenBefore time.Time) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM relay_capabilities WHERE expires_at <= ?`, store.Micros(now)); err != nil {
		return fmt.Errorf("store: relay: prune capabilities: %w", err)
	}
	if _, err := s.db.Exec(ctx, `DELETE FROM relay_seen WHERE seen_at < ?`, store.Micros(seenBefore)); err != nil {
		return fmt.Errorf("store: relay: prune seen: %w", err)
	}
	return nil
}

// Buffered lists the events of a tenant's buffer (every tenant when tenant
// is empty), oldest first, at most limit (<= 0: 100), with their lease: the
// console's view of what waits for a gateway.
func (s *Store) Buffered(ctx context.Context, tenant contract.TenantSlot, limit int) ([]BufferedEvent, error) {
	if limit <= 0 {
		limit = 100
	}
	q := store.Statement{SQL: `SELECT tenant, id, platform, bot, session_key, event, created_at, lease_owner, lease_until FROM relay_buffer`}
	if tenant != "" {
		q.Add(` WHERE tenant = ?`, string(tenant))
	}
	q.Add(` ORDER BY id LIMIT ?`, limit)
	return store.AppendRows(nil, store.QueryRows(ctx, s.db, "relay: buffered", scanBufferedEvent, q.SQL, q.Args...))
}

func scanBufferedEvent(row store.Scanner) (BufferedEvent, error) {
	var b BufferedEvent
	var t, event string
	var created, until int64
	if err := row.Scan(&t, &b.ID, &b.Platform, &b.Bot, &b.SessionKey, &event, &created, &b.LeaseOwner, &until); err != nil {
		return BufferedEvent{}, err
	}
	b.Tenant, b.Event, b.CreatedAt = contract.TenantSlot(t), []byte(event), store.FromMicros(created)
	if until > 0 {
		b.LeaseUntil = store.FromMicros(until)
	}
	return b, nil
}

// BufferedEvent is a buffered relay event with its lease (LeaseOwner empty
// and LeaseUntil zero when no connection holds it).
type BufferedEvent struct {
	relay.Buffered
	LeaseOwner string
	LeaseUntil time.Time
}
