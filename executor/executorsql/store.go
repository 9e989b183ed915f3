// Package executorsql is the executor gate's SQL: executor.Store over the store
// core (tables of migrations/2*.sql), on SQLite and Postgres.
package executorsql

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

func init() { store.RegisterMigrations("executorsql", migrations, "migrations") }

// Store is the executor's state in SQL; it implements
// executor.Store. Every statement filters on the tenant.
type Store struct{ db *store.DB }

// New returns the adapter over db.
func New(db *store.DB) *Store { return &Store{db: db} }

var _ executor.Store = (*Store)(nil)

// CaptureDayStart implements executor.Store: INSERT ... ON CONFLICT DO
// NOTHING on the writer, then read back the row that won. No transaction is
// needed: the unique key decides the winner and the row never changes.
func (s *Store) CaptureDayStart(ctx context.Context, t contract.TenantSlot, account, day string, value float64) (float64, error) {
	if _, err := s.db.Exec(ctx, `INSERT INTO executor_day_start (tenant, account, ny_day, start_value, captured_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, account, ny_day) DO NOTHING`, string(t), account, day, value, store.Micros(s.db.Now())); err != nil {
		return 0, fmt.Errorf("store: executor day start: %w", err)
	}
	var got float64
	if err := s.db.QueryRow(ctx, `SELECT start_value FROM executor_day_start WHERE tenant = ? AND account = ? AND ny_day = ?`, string(t), account, day).Scan(&got); err != nil {
		return 0, fmt.Errorf("store: executor day start: %w", err)
	}
	return got, nil
}

// Anomalies implements executor.Store.
func (s *Store) Anomalies(ctx context.Context, t contract.TenantSlot, account, day string) (int, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT n FROM executor_anomalies WHERE tenant = ? AND account = ? AND ny_day = ?`, string(t), account, day).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: executor anomalies: %w", err)
	}
	return int(n), nil
}

// AddAnomaly implements executor.Store: one atomic UPSERT increment on the
// writer, then a read of the count (which includes this increment, and any
// that landed concurrently).
func (s *Store) AddAnomaly(ctx context.Context, t contract.TenantSlot, account, day string) (int, error) {
	if _, err := s.db.Exec(ctx, `INSERT INTO executor_anomalies (tenant, account, ny_day, n, updated_at) VALUES (?, ?, ?, 1, ?)
		ON CONFLICT (tenant, account, ny_day) DO UPDATE SET n = executor_anomalies.n + 1, updated_at = excluded.updated_at`,
		string(t), account, day, store.Micros(s.db.Now())); err != nil {
		return 0, fmt.Errorf("store: executor add anomaly: %w", err)
	}
	return s.Anomalies(ctx, t, account, day)
}

// BrokerState implements executor.Store.
func (s *Store) BrokerState(ctx context.Context, t contract.TenantSlot, name string) ([]byte, int64, error) {
	var state string
	var version int64
	err := s.db.QueryRow(ctx, `SELECT state, version FROM executor_broker_state WHERE tenant = ? AND name = ?`, string(t), name).Scan(&state, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: executor broker state: %w", err)
	}
	return []byte(state), version, nil
}

// SaveBrokerState implements executor.Store: one conditional statement, an
// INSERT ... ON CONFLICT DO NOTHING for version 0 and an UPDATE ... WHERE
// version = ? otherwise, so of two writers holding the same version exactly
// one succeeds. The state is kept as text and must be UTF-8 (the paper
// broker saves JSON).
func (s *Store) SaveBrokerState(ctx context.Context, t contract.TenantSlot, name string, state []byte, version int64) (int64, bool, error) {
	if !utf8.Valid(state) {
		return 0, false, fmt.Errorf("store: executor broker state %s is not UTF-8", name)
	}
	var n int64
	var err error
	if version == 0 {
		n, err = store.RowsAffected(s.db.Exec(ctx, `INSERT INTO executor_broker_state (tenant, name, state, updated_at, version) VALUES (?, ?, ?, ?, 1)
			ON CONFLICT (tenant, name) DO NOTHING`, string(t), name, string(state), store.Micros(s.db.Now())))
	} else {
		n, err = store.RowsAffected(s.db.Exec(ctx, `UPDATE executor_broker_state SET state = ?, updated_at = ?, version = version + 1
			WHERE tenant = ? AND name = ? AND version = ?`, string(state), store.Micros(s.db.Now()), string(t), name, version))
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: executor save broker state: %w", err)
	}
	if n != 1 {
		return 0, false, nil
	}
	return version + 1, true, nil
}

// ClaimTick implements executor.Store through the HUX idempotency ledger
// (store.ClaimLeasedKey, scope executor.tick). A key already completed or
// in progress is answered by one read, without a write; a free key, or a
// claim whose lease ran out, is claimed in a short transaction of its own
// (the tick runs outside it: it calls the broker and writes the audit
// log), where one taker wins.
func (s *Store) ClaimTick(ctx context.Context, t contract.TenantSlot, key, bodyHash string, lease time.Duration) (executor.TickClaim, error) {
	k, found, err := store.ReadKey(ctx, s.db, t, executor.TickKeyScope, key)
	if err != nil {
		return executor.TickClaim{}, err
	}
	if found {
		c, takeOver, err := k.Claim(key, bodyHash, store.Micros(s.db.Now()), lease)
		if err != nil {
			return executor.TickClaim{}, tickClaimErr(err, key)
		}
		if !takeOver {
			return tickClaim(c), nil
		}
	}
	c, err := s.db.ClaimLeasedKey(ctx, t, executor.TickKeyScope, key, bodyHash, lease)
	if err != nil {
		return executor.TickClaim{}, tickClaimErr(err, key)
	}
	return tickClaim(c), nil
}

// tickClaim is a leased key's claim as the executor reads it.
func tickClaim(c contract.KeyClaim) executor.TickClaim {
	return executor.TickClaim{Claimed: c.Claimed, Envelope: c.Result}
}

// tickKeyConflict refuses a tick key already used with another payload or
// message.
func tickKeyConflict(key string) error {
	return contract.Conflictf("idempotency_key_conflict", "idempotency key %q was already used with a different payload or message", key)
}

// tickClaimErr is the error of a claim's transaction, a conflict (the key
// written with another body hash by a concurrent claim) as tickKeyConflict.
func tickClaimErr(err error, key string) error {
	if contract.KindOf(err) == contract.KindConflict {
		return tickKeyConflict(key)
	}
	return err
}

var _ executor.TickReplayer = (*Store)(nil)

// AuditsTo implements executor.TickReplayer: l is this database's audit log.
func (s *Store) AuditsTo(l audit.Log) bool {
	al, ok := l.(*store.AuditLog)
	return ok && al.DB() == s.db
}

// ClaimOrReplayTick implements executor.TickReplayer: one write transaction
// reads the key and, as it finds it, appends the replay's audit record,
// claims the free key (claim true), takes over an expired claim (claim
// true), or changes nothing. On SQLite the transaction shares a group
// commit with concurrent ones (see batcher), so replays arriving together
// pay one commit; nothing is answered before that commit.
func (s *Store) ClaimOrReplayTick(ctx context.Context, t contract.TenantSlot, key, bodyHash string, lease time.Duration, claim bool, record func(envelope []byte) (audit.Entry, error)) (executor.TickClaim, error) {
	var out executor.TickClaim
	err := s.db.InTxFor(ctx, t, func(tx *store.Tx) error {
		// Once the transaction runs, the caller's hang-up no longer stops
		// it: the answer says whether the replay and its record committed.
		ctx := context.WithoutCancel(ctx)
		c, err := store.ClaimLeasedKeyIn(ctx, tx, t, executor.TickKeyScope, key, bodyHash, lease, claim)
		out = tickClaim(c)
		if err != nil || c.Result == nil {
			return err
		}
		e, err := record(c.Result)
		if err != nil {
			return err
		}
		_, err = store.AppendAudit(ctx, tx, e)
		return err
	})
	if err != nil {
		return executor.TickClaim{}, tickClaimErr(err, key)
	}
	return out, nil
}

// CompleteTick implements executor.Store (store.CompleteLeasedKey).
func (s *Store) CompleteTick(ctx context.Context, t contract.TenantSlot, key string, envelope []byte) error {
	return s.db.CompleteLeasedKey(ctx, t, executor.TickKeyScope, key, envelope)
}

// ReleaseTick implements executor.Store (as store.ReleaseLeasedKey): in one
// transaction it deletes the key only while no result is stored, and with
// it the key's ref_ids.
func (s *Store) ReleaseTick(ctx context.Context, t contract.TenantSlot, key string) error {
	return s.db.InTx(ctx, func(tx *store.Tx) error {
		n, err := store.RowsAffected(tx.Exec(ctx, `DELETE FROM idempotency WHERE tenant = ? AND scope = ? AND key = ? AND result IS NULL`,
			string(t), executor.TickKeyScope, key))
		if err != nil {
			return fmt.Errorf("store: release idempotency key: %w", err)
		}
		if n == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM executor_tick_refs WHERE tenant = ? AND key = ?`, string(t), key); err != nil {
			return fmt.Errorf("store: release tick ref_ids: %w", err)
		}
		return nil
	})
}

// TickRefs implements executor.Store: INSERT ... ON CONFLICT DO NOTHING on
// the writer, then read back the row that won.
func (s *Store) TickRefs(ctx context.Context, t contract.TenantSlot, key string, refs []string) ([]string, error) {
	if refs == nil {
		refs = []string{}
	}
	b, err := json.Marshal(refs)
	if err != nil {
		return nil, fmt.Errorf("store: tick ref_ids: %w", err)
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO executor_tick_refs (tenant, key, refs, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, key) DO NOTHING`, string(t), key, string(b), store.Micros(s.db.Now())); err != nil {
		return nil, fmt.Errorf("store: tick ref_ids: %w", err)
	}
	var got string
	if err := s.db.QueryRow(ctx, `SELECT refs FROM executor_tick_refs WHERE tenant = ? AND key = ?`, string(t), key).Scan(&got); err != nil {
		return nil, fmt.Errorf("store: tick ref_ids: %w", err)
	}
	var out []string
	if err := json.Unmarshal([]byte(got), &out); err != nil {
		return nil, fmt.Errorf("store: tick ref_ids of key %s: %w", key, err)
	}
	return out, nil
}
