// Package shimtest holds the conformance suite of shim.Store and an
// in-memory implementation that passes it.
package shimtest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
)

// Memory is an in-memory shim.Store. Values are copied in and out (through
// JSON, like a database row), so callers cannot alias stored state.
type Memory struct {
	mu       sync.Mutex
	provs    map[key][]byte
	ctx      map[key][]byte
	ledger   map[ledgerKey]bool
	receipts map[contract.TenantSlot][][]byte // in insertion order
}

type key struct {
	tenant contract.TenantSlot
	id     string
}

type ledgerKey struct {
	tenant contract.TenantSlot
	conv   string
	prov   string
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{provs: map[key][]byte{}, ctx: map[key][]byte{}, ledger: map[ledgerKey]bool{}, receipts: map[contract.TenantSlot][][]byte{}}
}

var _ shim.Store = (*Memory)(nil)

func enc(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func dec[T any](b []byte) T {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		panic(err)
	}
	return v
}

func notFound(what, id string) error {
	return contract.NotFoundf(shim.CodeNotFound, "shim: no %s %q", what, id)
}

func conflict(what, id string) error {
	return contract.Conflictf(shim.CodeVersionConflict, "shim: %s %q has another version", what, id)
}

func list[T any](m map[key][]byte, tenant contract.TenantSlot) []T {
	var ids []string
	for k := range m {
		if k.tenant == tenant {
			ids = append(ids, k.id)
		}
	}
	slices.Sort(ids)
	out := make([]T, 0, len(ids))
	for _, id := range ids {
		out = append(out, dec[T](m[key{tenant, id}]))
	}
	return out
}

// ListProvisions implements shim.Store.
func (m *Memory) ListProvisions(_ context.Context, tenant contract.TenantSlot) ([]shim.Provision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return list[shim.Provision](m.provs, tenant), nil
}

// GetProvision implements shim.Store.
func (m *Memory) GetProvision(_ context.Context, tenant contract.TenantSlot, id string) (shim.Provision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.provs[key{tenant, id}]
	if !ok {
		return shim.Provision{}, notFound("provision", id)
	}
	return dec[shim.Provision](b), nil
}

// CreateProvision implements shim.Store.
func (m *Memory) CreateProvision(_ context.Context, tenant contract.TenantSlot, p shim.Provision) (shim.Provision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{tenant, p.ID}
	if _, ok := m.provs[k]; ok {
		return shim.Provision{}, contract.Conflictf(shim.CodeExists, "shim: provision %q exists", p.ID)
	}
	p.Version = 1
	m.provs[k] = enc(p)
	return dec[shim.Provision](m.provs[k]), nil
}

// UpdateProvision implements shim.Store.
func (m *Memory) UpdateProvision(_ context.Context, tenant contract.TenantSlot, p shim.Provision, ifVersion int64) (shim.Provision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{tenant, p.ID}
	b, ok := m.provs[k]
	if !ok {
		return shim.Provision{}, notFound("provision", p.ID)
	}
	if dec[shim.Provision](b).Version != ifVersion {
		return shim.Provision{}, conflict("provision", p.ID)
	}
	p.Version = ifVersion + 1
	m.provs[k] = enc(p)
	return dec[shim.Provision](m.provs[k]), nil
}

// DeleteProvision implements shim.Store.
func (m *Memory) DeleteProvision(_ context.Context, tenant contract.TenantSlot, id string, ifVersion int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{tenant, id}
	b, ok := m.provs[k]
	if !ok {
		return notFound("provision", id)
	}
	if dec[shim.Provision](b).Version != ifVersion {
		return conflict("provision", id)
	}
	delete(m.provs, k)
	return nil
}

// ListContext implements shim.Store.
func (m *Memory) ListContext(_ context.Context, tenant contract.TenantSlot) ([]shim.ContextEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return list[shim.ContextEntry](m.ctx, tenant), nil
}

// GetContext implements shim.Store.
func (m *Memory) GetContext(_ context.Context, tenant contract.TenantSlot, ref string) (shim.ContextEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.ctx[key{tenant, ref}]
	if !ok {
		return shim.ContextEntry{}, notFound("context entry", ref)
	}
	return dec[shim.ContextEntry](b), nil
}

// CreateContext implements shim.Store.
func (m *Memory) CreateContext(_ context.Context, tenant contract.TenantSlot, e shim.ContextEntry) (shim.ContextEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{tenant, e.Ref}
	if _, ok := m.ctx[k]; ok {
		return shim.ContextEntry{}, contract.Conflictf(shim.CodeExists, "shim: context entry %q exists", e.Ref)
	}
	e.Version = 1
	m.ctx[k] = enc(e)
	return dec[shim.ContextEntry](m.ctx[k]), nil
}

// UpdateContext implements shim.Store.
func (m *Memory) UpdateContext(_ context.Context, tenant contract.TenantSlot, e shim.ContextEntry, ifVersion int64) (shim.ContextEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{tenant, e.Ref}
	b, ok := m.ctx[k]
	if !ok {
		return shim.ContextEntry{}, notFound("context entry", e.Ref)
	}
	if dec[shim.ContextEntry](b).Version != ifVersion {
		return shim.ContextEntry{}, conflict("context entry", e.Ref)
	}
	e.Version = ifVersion + 1
	m.ctx[k] = enc(e)
	return dec[shim.ContextEntry](m.ctx[k]), nil
}

// DeleteContext implements shim.Store.
func (m *Memory) DeleteContext(_ context.Context, tenant contract.TenantSlot, ref string, ifVersion int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{tenant, ref}
	b, ok := m.ctx[k]
	if !ok {
		return notFound("context entry", ref)
	}
	if dec[shim.ContextEntry](b).Version != ifVersion {
		return conflict("context entry", ref)
	}
	delete(m.ctx, k)
	return nil
}

// MarkShimmed implements shim.Store.
func (m *Memory) MarkShimmed(_ context.Context, tenant contract.TenantSlot, conversation, provision string, _ int64, _ time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := ledgerKey{tenant, conversation, provision}
	if m.ledger[k] {
		return false, nil
	}
	m.ledger[k] = true
	return true, nil
}

// Shimmed implements shim.Store.
func (m *Memory) Shimmed(_ context.Context, tenant contract.TenantSlot, conversation, provision string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ledger[ledgerKey{tenant, conversation, provision}], nil
}

// AddReceipt implements shim.Store.
func (m *Memory) AddReceipt(_ context.Context, tenant contract.TenantSlot, r shim.Receipt) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.receipts[tenant] {
		if dec[shim.Receipt](b).ID == r.ID {
			return contract.Conflictf(shim.CodeExists, "shim: receipt %q exists", r.ID)
		}
	}
	m.receipts[tenant] = append(m.receipts[tenant], enc(r))
	return nil
}

// ListReceipts implements shim.Store.
func (m *Memory) ListReceipts(_ context.Context, tenant contract.TenantSlot, limit int, before string) ([]shim.Receipt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []shim.Receipt
	for _, b := range m.receipts[tenant] {
		r := dec[shim.Receipt](b)
		if before == "" || strings.Compare(r.ID, before) < 0 {
			all = append(all, r)
		}
	}
	slices.SortFunc(all, func(a, b shim.Receipt) int { return strings.Compare(b.ID, a.ID) })
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}
