package shimtest

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
)

// MemoryStore is an in-memory memory.Store.
type MemoryStore struct {
	mu       sync.Mutex
	entities map[entityKey]*entityRow
	outcomes map[outcomeKey]shim.RuleOutcome
	marks    map[markKey]shim.SyncMark
}

type markKey struct {
	tenant   contract.TenantSlot
	kind, id string
}

type entityKey struct {
	tenant                        contract.TenantSlot
	subject, project, kind, value string
}

type entityRow struct {
	first, last time.Time
	count       int64
}

type outcomeKey struct {
	tenant             contract.TenantSlot
	receipt, provision string
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{entities: map[entityKey]*entityRow{}, outcomes: map[outcomeKey]shim.RuleOutcome{}, marks: map[markKey]shim.SyncMark{}}
}

var _ memory.Store = (*MemoryStore)(nil)

// TouchEntities implements memory.Store.
func (m *MemoryStore) TouchEntities(_ context.Context, tenant contract.TenantSlot, subject, project string, es []shim.EntityRef, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	at = at.Truncate(time.Microsecond)
	for _, e := range es {
		k := entityKey{tenant, subject, project, e.Kind, e.Value}
		if r := m.entities[k]; r != nil {
			r.count++
			r.last = at
		} else {
			m.entities[k] = &entityRow{first: at, last: at, count: 1}
		}
	}
	return nil
}

// ListEntities implements memory.Store.
func (m *MemoryStore) ListEntities(_ context.Context, tenant contract.TenantSlot, subject, project string, limit int) ([]memory.Entity, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	type row struct {
		k entityKey
		r entityRow
	}
	var rows []row
	for k, r := range m.entities {
		if k.tenant == tenant && k.subject == subject && (project == "" || k.project == project) {
			rows = append(rows, row{k, *r})
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(b.r.last.Compare(a.r.last), cmp.Compare(a.k.project, b.k.project), cmp.Compare(a.k.kind, b.k.kind), cmp.Compare(a.k.value, b.k.value))
	})
	out := []memory.Entity{}
	for _, r := range rows {
		if len(out) == limit {
			break
		}
		out = append(out, memory.Entity{Subject: r.k.subject, Project: r.k.project, Kind: r.k.kind, Value: r.k.value,
			FirstSeen: contract.Timestamp(r.r.first), LastSeen: contract.Timestamp(r.r.last), Count: r.r.count})
	}
	return out, nil
}

// AddOutcomes implements memory.Store.
func (m *MemoryStore) AddOutcomes(_ context.Context, tenant contract.TenantSlot, os []shim.RuleOutcome) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range os {
		k := outcomeKey{tenant, o.Receipt, o.Provision}
		if _, ok := m.outcomes[k]; ok {
			continue
		}
		o.Outcome, o.ErrorSignature, o.NextReceipt, o.ResolvedAt = memory.OutcomePending, "", "", ""
		m.outcomes[k] = o
	}
	return nil
}

// ResolveOutcomes implements memory.Store.
func (m *MemoryStore) ResolveOutcomes(_ context.Context, tenant contract.TenantSlot, conversation, exceptReceipt, outcome, signature, nextReceipt string, at time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, o := range m.outcomes {
		if k.tenant == tenant && o.Conversation == conversation && o.Outcome == memory.OutcomePending && o.Receipt != exceptReceipt {
			o.Outcome, o.ErrorSignature, o.NextReceipt, o.ResolvedAt = outcome, signature, nextReceipt, contract.Timestamp(at)
			m.outcomes[k] = o
			n++
		}
	}
	return n, nil
}

// ListOutcomes implements memory.Store.
func (m *MemoryStore) ListOutcomes(_ context.Context, tenant contract.TenantSlot, subject string, limit int) ([]shim.RuleOutcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rows []shim.RuleOutcome
	for k, o := range m.outcomes {
		if k.tenant == tenant && (subject == "" || o.Subject == subject) {
			rows = append(rows, o)
		}
	}
	slices.SortFunc(rows, func(a, b shim.RuleOutcome) int {
		return cmp.Or(cmp.Compare(b.Receipt, a.Receipt), cmp.Compare(a.Provision, b.Provision))
	})
	if len(rows) > limit {
		rows = rows[:limit]
	}
	if rows == nil {
		rows = []shim.RuleOutcome{}
	}
	return rows, nil
}

// GetSyncMark implements shim.SyncLedger.
func (m *MemoryStore) GetSyncMark(_ context.Context, tenant contract.TenantSlot, kind, id string) (shim.SyncMark, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk, ok := m.marks[markKey{tenant, kind, id}]
	return mk, ok, nil
}

// PutSyncMark implements shim.SyncLedger.
func (m *MemoryStore) PutSyncMark(_ context.Context, tenant contract.TenantSlot, mk shim.SyncMark) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marks[markKey{tenant, mk.Kind, mk.ID}] = mk
	return nil
}
