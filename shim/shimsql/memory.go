package shimsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/store"
)

// Memory is the shim's entity memory and rule outcomes (migration
// 310_shim_memory); it implements memory.Store. Every statement
// filters on the tenant.
type Memory struct{ db *store.DB }

// NewMemory returns the shim memory tables of db.
func NewMemory(db *store.DB) *Memory { return &Memory{db: db} }

var _ memory.Store = (*Memory)(nil)

// TouchEntities implements memory.Store: one upsert per entity, in one
// transaction.
func (s *Memory) TouchEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, es []shim.EntityRef, at time.Time) error {
	if len(es) == 0 {
		return nil
	}
	if err := s.db.InTx(ctx, func(tx *store.Tx) error { return touchEntities(ctx, tx, tenant, subject, project, es, at) }); err != nil {
		return fmt.Errorf("store: touch entities: %w", err)
	}
	return nil
}

func touchEntities(ctx context.Context, q store.Querier, tenant contract.TenantSlot, subject, project string, es []shim.EntityRef, at time.Time) error {
	us := store.Micros(at)
	for _, e := range es {
		err := store.ExecLater(ctx, q, memory.TouchEntitySQL, string(tenant), subject, project, e.Kind, e.Value, us, us)
		if err != nil {
			return err
		}
	}
	return nil
}

var _ memory.TurnStore = (*Memory)(nil)

// RecordMemory implements memory.TurnStore: the statements of
// TouchEntities, ResolveOutcomes and AddOutcomes in one transaction.
func (s *Memory) RecordMemory(ctx context.Context, w shim.MemoryWrite) error {
	if err := s.db.InTx(ctx, func(tx *store.Tx) error { return recordMemory(ctx, tx, w) }); err != nil {
		return fmt.Errorf("store: record memory: %w", err)
	}
	return nil
}

func recordMemory(ctx context.Context, q store.Querier, w shim.MemoryWrite) error {
	if err := touchEntities(ctx, q, w.Tenant, w.Subject, w.Project, w.Entities, w.At); err != nil {
		return err
	}
	if w.Conversation == "" {
		return nil
	}
	// The count is not read here: the statement may wait for the
	// transaction's next batch (store.ExecLater).
	if err := store.ExecLater(ctx, q, memory.ResolveOutcomesSQL, w.Outcome, w.Signature, w.Receipt, store.Micros(w.At),
		string(w.Tenant), w.Conversation, memory.OutcomePending, w.Receipt); err != nil {
		return err
	}
	return addOutcomes(ctx, q, w.Tenant, w.Pending)
}

// ListEntities implements memory.Store.
func (s *Memory) ListEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, limit int) ([]memory.Entity, error) {
	q, args := memory.EntitiesQuery(tenant, subject, project, limit)
	return store.AppendRows([]memory.Entity{}, store.QueryRows(ctx, s.db, "list entities", func(row store.Scanner) (memory.Entity, error) {
		e := memory.Entity{Subject: subject}
		var first, last int64
		err := row.Scan(&e.Project, &e.Kind, &e.Value, &first, &last, &e.Count)
		e.FirstSeen, e.LastSeen = contract.Timestamp(store.FromMicros(first)), contract.Timestamp(store.FromMicros(last))
		return e, err
	}, q, args...))
}

// AddOutcomes implements memory.Store: inserts that ignore an existing
// (tenant, receipt, provision), in one transaction.
func (s *Memory) AddOutcomes(ctx context.Context, tenant contract.TenantSlot, os []shim.RuleOutcome) error {
	if len(os) == 0 {
		return nil
	}
	if err := s.db.InTx(ctx, func(tx *store.Tx) error { return addOutcomes(ctx, tx, tenant, os) }); err != nil {
		return fmt.Errorf("store: add outcomes: %w", err)
	}
	return nil
}

func addOutcomes(ctx context.Context, q store.Querier, tenant contract.TenantSlot, os []shim.RuleOutcome) error {
	for _, o := range os {
		var fired int64
		if t, err := contract.ParseTimestamp(o.FiredAt); err == nil {
			fired = store.Micros(t)
		}
		builtin := 0
		if o.Builtin {
			builtin = 1
		}
		err := store.ExecLater(ctx, q, memory.AddOutcomeSQL,
			string(tenant), o.Receipt, o.Provision, o.Conversation, o.Subject, o.Project, o.Version, builtin, memory.OutcomePending, fired)
		if err != nil {
			return err
		}
	}
	return nil
}

// ResolveOutcomes implements memory.Store with one conditional UPDATE.
func (s *Memory) ResolveOutcomes(ctx context.Context, tenant contract.TenantSlot, conversation, exceptReceipt, outcome, signature, nextReceipt string, at time.Time) (int, error) {
	n, err := store.RowsAffected(s.db.Exec(ctx, memory.ResolveOutcomesSQL,
		outcome, signature, nextReceipt, store.Micros(at), string(tenant), conversation, memory.OutcomePending, exceptReceipt))
	if err != nil {
		return 0, fmt.Errorf("store: resolve outcomes: %w", err)
	}
	return int(n), nil
}

// ListOutcomes implements memory.Store.
func (s *Memory) ListOutcomes(ctx context.Context, tenant contract.TenantSlot, subject string, limit int) ([]shim.RuleOutcome, error) {
	q, args := memory.OutcomesQuery(tenant, subject, limit)
	return store.AppendRows([]shim.RuleOutcome{}, store.QueryRows(ctx, s.db, "list outcomes", scanOutcome, q, args...))
}

func scanOutcome(row store.Scanner) (shim.RuleOutcome, error) {
	var o shim.RuleOutcome
	var builtin int
	var fired, resolved int64
	if err := row.Scan(&o.Receipt, &o.Provision, &o.Conversation, &o.Subject, &o.Project, &o.Version, &builtin,
		&o.Outcome, &o.ErrorSignature, &o.NextReceipt, &fired, &resolved); err != nil {
		return shim.RuleOutcome{}, err
	}
	o.Builtin = builtin != 0
	o.FiredAt = contract.Timestamp(store.FromMicros(fired))
	if resolved != 0 {
		o.ResolvedAt = contract.Timestamp(store.FromMicros(resolved))
	}
	return o, nil
}

// GetSyncMark implements shim.SyncLedger.
func (s *Memory) GetSyncMark(ctx context.Context, tenant contract.TenantSlot, kind, id string) (shim.SyncMark, bool, error) {
	m := shim.SyncMark{Kind: kind, ID: id}
	err := s.db.QueryRow(ctx, memory.GetSyncMarkSQL, string(tenant), kind, id).Scan(&m.SourceVersion, &m.LocalVersion)
	if errors.Is(err, sql.ErrNoRows) {
		return shim.SyncMark{}, false, nil
	}
	if err != nil {
		return shim.SyncMark{}, false, fmt.Errorf("store: sync mark: %w", err)
	}
	return m, true, nil
}

// PutSyncMark implements shim.SyncLedger with one upsert.
func (s *Memory) PutSyncMark(ctx context.Context, tenant contract.TenantSlot, m shim.SyncMark) error {
	_, err := s.db.Exec(ctx, memory.PutSyncMarkSQL, string(tenant), m.Kind, m.ID, m.SourceVersion, m.LocalVersion)
	if err != nil {
		return fmt.Errorf("store: put sync mark: %w", err)
	}
	return nil
}
