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
	provs    table[shim.Provision]
	ctx      table[shim.ContextEntry]
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
	return &Memory{
		provs: table[shim.Provision]{noun: "provision", rows: map[key][]byte{},
			key: func(p *shim.Provision) string { return p.ID }, version: func(p *shim.Provision) *int64 { return &p.Version }},
		ctx: table[shim.ContextEntry]{noun: "context entry", rows: map[key][]byte{},
			key: func(e *shim.ContextEntry) string { return e.Ref }, version: func(e *shim.ContextEntry) *int64 { return &e.Version }},
		ledger: map[ledgerKey]bool{}, receipts: map[contract.TenantSlot][][]byte{}}
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
	return contract.Conflictf(shim.CodeRevisionMismatch, "shim: %s %q has another version", what, id)
}

// table is one kind of versioned document (provisions, context entries)
// keyed by (tenant, key), with the Store's CAS rules.
type table[T any] struct {
	noun    string
	rows    map[key][]byte
	key     func(*T) string
	version func(*T) *int64
}

func (t *table[T]) list(tenant contract.TenantSlot) []T {
	var ids []string
	for k := range t.rows {
		if k.tenant == tenant {
			ids = append(ids, k.id)
		}
	}
	slices.Sort(ids)
	out := make([]T, 0, len(ids))
	for _, id := range ids {
		out = append(out, dec[T](t.rows[key{tenant, id}]))
	}
	return out
}

func (t *table[T]) get(tenant contract.TenantSlot, id string) (T, error) {
	b, ok := t.rows[key{tenant, id}]
	if !ok {
		var zero T
		return zero, notFound(t.noun, id)
	}
	return dec[T](b), nil
}

func (t *table[T]) create(tenant contract.TenantSlot, d T) (T, error) {
	k := key{tenant, t.key(&d)}
	if _, ok := t.rows[k]; ok {
		var zero T
		return zero, contract.Conflictf(shim.CodeExists, "shim: %s %q exists", t.noun, k.id)
	}
	*t.version(&d) = 1
	t.rows[k] = enc(d)
	return dec[T](t.rows[k]), nil
}

// current checks that id exists in tenant at ifVersion.
func (t *table[T]) current(k key, ifVersion int64) error {
	b, ok := t.rows[k]
	if !ok {
		return notFound(t.noun, k.id)
	}
	if stored := dec[T](b); *t.version(&stored) != ifVersion {
		return conflict(t.noun, k.id)
	}
	return nil
}

func (t *table[T]) update(tenant contract.TenantSlot, d T, ifVersion int64) (T, error) {
	k := key{tenant, t.key(&d)}
	if err := t.current(k, ifVersion); err != nil {
		var zero T
		return zero, err
	}
	*t.version(&d) = ifVersion + 1
	t.rows[k] = enc(d)
	return dec[T](t.rows[k]), nil
}

func (t *table[T]) delete(tenant contract.TenantSlot, id string, ifVersion int64) error {
	k := key{tenant, id}
	if err := t.current(k, ifVersion); err != nil {
		return err
	}
	delete(t.rows, k)
	return nil
}

// ListProvisions implements shim.Store.
func (m *Memory) ListProvisions(_ context.Context, tenant contract.TenantSlot) ([]shim.Provision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.provs.list(tenant), nil
}

// GetProvision implements shim.Store.
func (m *Memory) GetProvision(_ context.Context, tenant contract.TenantSlot, id string) (shim.Provision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.provs.get(tenant, id)
}

// CreateProvision implements shim.Store.
func (m *Memory) CreateProvision(_ context.Context, tenant contract.TenantSlot, p shim.Provision) (shim.Provision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.provs.create(tenant, p)
}

// UpdateProvision implements shim.Store.
func (m *Memory) UpdateProvision(_ context.Context, tenant contract.TenantSlot, p shim.Provision, ifVersion int64) (shim.Provision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.provs.update(tenant, p, ifVersion)
}

// DeleteProvision implements shim.Store.
func (m *Memory) DeleteProvision(_ context.Context, tenant contract.TenantSlot, id string, ifVersion int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.provs.delete(tenant, id, ifVersion)
}

// ListContext implements shim.Store.
func (m *Memory) ListContext(_ context.Context, tenant contract.TenantSlot) ([]shim.ContextEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ctx.list(tenant), nil
}

// GetContext implements shim.Store.
func (m *Memory) GetContext(_ context.Context, tenant contract.TenantSlot, ref string) (shim.ContextEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ctx.get(tenant, ref)
}

// CreateContext implements shim.Store.
func (m *Memory) CreateContext(_ context.Context, tenant contract.TenantSlot, e shim.ContextEntry) (shim.ContextEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ctx.create(tenant, e)
}

// UpdateContext implements shim.Store.
func (m *Memory) UpdateContext(_ context.Context, tenant contract.TenantSlot, e shim.ContextEntry, ifVersion int64) (shim.ContextEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ctx.update(tenant, e, ifVersion)
}

// DeleteContext implements shim.Store.
func (m *Memory) DeleteContext(_ context.Context, tenant contract.TenantSlot, ref string, ifVersion int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ctx.delete(tenant, ref, ifVersion)
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

// ReceiptOfResponse implements shim.Store.
func (m *Memory) ReceiptOfResponse(_ context.Context, tenant contract.TenantSlot, responseID string) (shim.Receipt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.receipts[tenant]) - 1; i >= 0; i-- {
		if r := dec[shim.Receipt](m.receipts[tenant][i]); r.ResponseID == responseID {
			return r, nil
		}
	}
	return shim.Receipt{}, contract.NotFoundf(shim.CodeNotFound, "shim: no response %q", responseID)
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
