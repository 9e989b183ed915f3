package edge

import (
	"context"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
)

// Memory is the shim's entity memory, rule outcomes and sync marks
// (memory.Store) on a DB, in the server's tables and statements, each
// write one upsert or conditional UPDATE.
type Memory struct{ db DB }

// NewMemory returns the memory store on db.
func NewMemory(db DB) *Memory { return &Memory{db: db} }

var _ memory.Store = (*Memory)(nil)

// TouchEntities implements memory.Store: one upsert per entity.
func (m *Memory) TouchEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, es []shim.EntityRef, at time.Time) error {
	if err := execAll(ctx, m.db, touchEntities(tenant, subject, project, es, at)); err != nil {
		return fmt.Errorf("edge: touch entities: %w", err)
	}
	return nil
}

func touchEntities(tenant contract.TenantSlot, subject, project string, es []shim.EntityRef, at time.Time) []Statement {
	us := micros(at)
	out := make([]Statement, len(es))
	for i, e := range es {
		out[i] = Statement{memory.TouchEntitySQL, []any{string(tenant), subject, project, e.Kind, e.Value, us, us}}
	}
	return out
}

// memoryWrite is a turn's memory write as statements, as the server's
// store makes it: the entities, the conversation's pending outcomes
// resolved by this turn, and the outcomes this turn leaves pending.
func memoryWrite(w shim.MemoryWrite) []Statement {
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
		return nil, fmt.Errorf("edge: list entities: %w", err)
	}
	out := make([]memory.Entity, len(rows))
	for i, r := range rows {
		out[i] = memory.Entity{Subject: subject, Project: r.Str(0), Kind: r.Str(1), Value: r.Str(2),
			FirstSeen: contract.Timestamp(fromMicros(r.Int(3))), LastSeen: contract.Timestamp(fromMicros(r.Int(4))), Count: r.Int(5)}
	}
	return out, nil
}

// AddOutcomes implements memory.Store: pending rows, a repeat ignored.
func (m *Memory) AddOutcomes(ctx context.Context, tenant contract.TenantSlot, os []shim.RuleOutcome) error {
	if err := execAll(ctx, m.db, addOutcomes(tenant, os)); err != nil {
		return fmt.Errorf("edge: add outcomes: %w", err)
	}
	return nil
}

func addOutcomes(tenant contract.TenantSlot, os []shim.RuleOutcome) []Statement {
	out := make([]Statement, len(os))
	for i, o := range os {
		var fired int64
		if t, err := contract.ParseTimestamp(o.FiredAt); err == nil {
			fired = micros(t)
		}
		var builtin int64
		if o.Builtin {
			builtin = 1
		}
		out[i] = Statement{memory.AddOutcomeSQL,
			[]any{string(tenant), o.Receipt, o.Provision, o.Conversation, o.Subject, o.Project, o.Version, builtin, memory.OutcomePending, fired}}
	}
	return out
}

// ResolveOutcomes implements memory.Store: one conditional UPDATE of the
// conversation's pending rows.
func (m *Memory) ResolveOutcomes(ctx context.Context, tenant contract.TenantSlot, conversation, exceptReceipt, outcome, signature, nextReceipt string, at time.Time) (int, error) {
	st := resolveOutcomes(tenant, conversation, exceptReceipt, outcome, signature, nextReceipt, at)
	n, err := m.db.Exec(ctx, st.SQL, st.Args...)
	if err != nil {
		return 0, fmt.Errorf("edge: resolve outcomes: %w", err)
	}
	return int(n), nil
}

func resolveOutcomes(tenant contract.TenantSlot, conversation, exceptReceipt, outcome, signature, nextReceipt string, at time.Time) Statement {
	return Statement{memory.ResolveOutcomesSQL,
		[]any{outcome, signature, nextReceipt, micros(at), string(tenant), conversation, memory.OutcomePending, exceptReceipt}}
}

// ListOutcomes implements memory.Store.
func (m *Memory) ListOutcomes(ctx context.Context, tenant contract.TenantSlot, subject string, limit int) ([]shim.RuleOutcome, error) {
	q, args := memory.OutcomesQuery(tenant, subject, limit)
	rows, err := m.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("edge: list outcomes: %w", err)
	}
	out := make([]shim.RuleOutcome, len(rows))
	for i, r := range rows {
		o := shim.RuleOutcome{Receipt: r.Str(0), Provision: r.Str(1), Conversation: r.Str(2), Subject: r.Str(3), Project: r.Str(4),
			Version: r.Int(5), Builtin: r.Int(6) != 0, Outcome: r.Str(7), ErrorSignature: r.Str(8), NextReceipt: r.Str(9),
			FiredAt: contract.Timestamp(fromMicros(r.Int(10)))}
		if resolved := r.Int(11); resolved != 0 {
			o.ResolvedAt = contract.Timestamp(fromMicros(resolved))
		}
		out[i] = o
	}
	return out, nil
}

// GetSyncMark implements shim.SyncLedger.
func (m *Memory) GetSyncMark(ctx context.Context, tenant contract.TenantSlot, kind, id string) (shim.SyncMark, bool, error) {
	r, found, err := one(ctx, m.db, memory.GetSyncMarkSQL, string(tenant), kind, id)
	if err != nil {
		return shim.SyncMark{}, false, fmt.Errorf("edge: sync mark: %w", err)
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
		return fmt.Errorf("edge: put sync mark: %w", err)
	}
	return nil
}
