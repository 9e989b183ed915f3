package shimstore

import (
	"context"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/store/port"
)

// Memory is the shim's entity memory, rule outcomes and sync marks
// (memory.Store, memory.TurnStore) on the port: each write an upsert or a
// conditional UPDATE, a write of several rows one batch.
type Memory struct{ db port.DB }

// NewMemory returns the memory store on db.
func NewMemory(db port.DB) *Memory { return &Memory{db: db} }

var (
	_ memory.Store     = (*Memory)(nil)
	_ memory.TurnStore = (*Memory)(nil)
)

// TouchEntities implements memory.Store: one upsert per entity, in one
// batch.
func (m *Memory) TouchEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, es []shim.EntityRef, at time.Time) error {
	if err := batch(ctx, m.db, touchEntities(tenant, subject, project, es, at)); err != nil {
		return fmt.Errorf("shimstore: touch entities: %w", err)
	}
	return nil
}

// RecordMemory implements memory.TurnStore: a turn's memory write
// (MemoryWrite) in one batch.
func (m *Memory) RecordMemory(ctx context.Context, w shim.MemoryWrite) error {
	if err := batch(ctx, m.db, MemoryWrite(w)); err != nil {
		return fmt.Errorf("shimstore: record memory: %w", err)
	}
	return nil
}

// batch runs stmts in one batch; none is nothing to run.
func batch(ctx context.Context, db port.DB, stmts []port.Statement) error {
	if len(stmts) == 0 {
		return nil
	}
	return db.Batch(ctx, stmts)
}

func touchEntities(tenant contract.TenantSlot, subject, project string, es []shim.EntityRef, at time.Time) []port.Statement {
	us := port.Micros(at)
	out := make([]port.Statement, len(es))
	for i, e := range es {
		out[i] = port.Statement{SQL: memory.TouchEntitySQL, Args: []any{string(tenant), subject, project, e.Kind, e.Value, us, us}}
	}
	return out
}

// MemoryWrite is a turn's memory write as statements: the entities, the
// conversation's pending outcomes resolved by this turn, and the outcomes
// this turn leaves pending.
func MemoryWrite(w shim.MemoryWrite) []port.Statement {
	out := touchEntities(w.Tenant, w.Subject, w.Project, w.Entities, w.At)
	if w.Conversation == "" {
		return out
	}
	out = append(out, resolveOutcomes(w.Tenant, w.Conversation, w.Receipt, w.Outcome, w.Signature, w.Receipt, w.At))
	return append(out, addOutcomes(w.Tenant, w.Pending)...)
}

// ListEntities implements memory.Store.
func (m *Memory) ListEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, limit int) ([]memory.Entity, error) {
	q, args := memory.EntitiesQuery(tenant, subject, project, limit)
	rows, err := m.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("shimstore: list entities: %w", err)
	}
	out := make([]memory.Entity, len(rows))
	for i, r := range rows {
		out[i] = memory.Entity{Subject: subject, Project: r.Str(0), Kind: r.Str(1), Value: r.Str(2),
			FirstSeen: contract.Timestamp(port.FromMicros(r.Int(3))), LastSeen: contract.Timestamp(port.FromMicros(r.Int(4))), Count: r.Int(5)}
	}
	return out, nil
}

// AddOutcomes implements memory.Store: pending rows, a repeat ignored, in
// one batch.
func (m *Memory) AddOutcomes(ctx context.Context, tenant contract.TenantSlot, os []shim.RuleOutcome) error {
	if err := batch(ctx, m.db, addOutcomes(tenant, os)); err != nil {
		return fmt.Errorf("shimstore: add outcomes: %w", err)
	}
	return nil
}

func addOutcomes(tenant contract.TenantSlot, os []shim.RuleOutcome) []port.Statement {
	out := make([]port.Statement, len(os))
	for i, o := range os {
		var fired int64
		if t, err := contract.ParseTimestamp(o.FiredAt); err == nil {
			fired = port.Micros(t)
		}
		var builtin int64
		if o.Builtin {
			builtin = 1
		}
		out[i] = port.Statement{SQL: memory.AddOutcomeSQL, Args: []any{string(tenant), o.Receipt, o.Provision, o.Conversation, o.Subject, o.Project, o.Version, builtin, memory.OutcomePending, fired}}
	}
	return out
}

// ResolveOutcomes implements memory.Store: one conditional UPDATE of the
// conversation's pending rows.
func (m *Memory) ResolveOutcomes(ctx context.Context, tenant contract.TenantSlot, conversation, exceptReceipt, outcome, signature, nextReceipt string, at time.Time) (int, error) {
	st := resolveOutcomes(tenant, conversation, exceptReceipt, outcome, signature, nextReceipt, at)
	n, err := m.db.Exec(ctx, st.SQL, st.Args...)
	if err != nil {
		return 0, fmt.Errorf("shimstore: resolve outcomes: %w", err)
	}
	return int(n), nil
}

func resolveOutcomes(tenant contract.TenantSlot, conversation, exceptReceipt, outcome, signature, nextReceipt string, at time.Time) port.Statement {
	return port.Statement{SQL: memory.ResolveOutcomesSQL, Args: []any{outcome, signature, nextReceipt, port.Micros(at), string(tenant), conversation, memory.OutcomePending, exceptReceipt}}
}

// ListOutcomes implements memory.Store.
func (m *Memory) ListOutcomes(ctx context.Context, tenant contract.TenantSlot, subject string, limit int) ([]shim.RuleOutcome, error) {
	q, args := memory.OutcomesQuery(tenant, subject, limit)
	rows, err := m.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("shimstore: list outcomes: %w", err)
	}
	out := make([]shim.RuleOutcome, len(rows))
	for i, r := range rows {
		o := shim.RuleOutcome{Receipt: r.Str(0), Provision: r.Str(1), Conversation: r.Str(2), Subject: r.Str(3), Project: r.Str(4),
			Version: r.Int(5), Builtin: r.Int(6) != 0, Outcome: r.Str(7), ErrorSignature: r.Str(8), NextReceipt: r.Str(9),
			FiredAt: contract.Timestamp(port.FromMicros(r.Int(10)))}
		if resolved := r.Int(11); resolved != 0 {
			o.ResolvedAt = contract.Timestamp(port.FromMicros(resolved))
		}
		out[i] = o
	}
	return out, nil
}

// GetSyncMark implements shim.SyncLedger.
func (m *Memory) GetSyncMark(ctx context.Context, tenant contract.TenantSlot, kind, id string) (shim.SyncMark, bool, error) {
	r, found, err := port.One(ctx, m.db, memory.GetSyncMarkSQL, string(tenant), kind, id)
	if err != nil {
		return shim.SyncMark{}, false, fmt.Errorf("shimstore: sync mark: %w", err)
	}
	if !found {
		return shim.SyncMark{}, false, nil
	}
	return shim.SyncMark{Kind: kind, ID: id, SourceVersion: r.Int(0), LocalVersion: r.Int(1)}, true, nil
}

// PutSyncMark implements shim.SyncLedger.
func (m *Memory) PutSyncMark(ctx context.Context, tenant contract.TenantSlot, mk shim.SyncMark) error {
	_, err := m.db.Exec(ctx, memory.PutSyncMarkSQL, string(tenant), mk.Kind, mk.ID, mk.SourceVersion, mk.LocalVersion)
	if err != nil {
		return fmt.Errorf("shimstore: put sync mark: %w", err)
	}
	return nil
}
