package audit

import (
	"context"
	"slices"
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
)

// Memory is an in-process Log and Source, for tests of packages that record
// audit entries and for tools that build a chain before storing it. It keeps
// the same chain rules as the store.
type Memory struct {
	mu     sync.Mutex
	chains map[contract.TenantSlot][]Record
}

// NewMemory returns an empty in-memory log.
func NewMemory() *Memory { return &Memory{chains: map[contract.TenantSlot][]Record{}} }

// Append implements Log.
func (m *Memory) Append(_ context.Context, e Entry) (Record, error) {
	if err := Check(e); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := e.Outcome.Identity.TenantSlot
	chain := m.chains[t]
	prev := Genesis
	if n := len(chain); n > 0 {
		prev = chain[n-1].Hash
	}
	rec, err := Seal(e, contract.NewID(contract.PrefixEvent), int64(len(chain))+1, prev)
	if err != nil {
		return Record{}, err
	}
	m.chains[t] = append(chain, rec)
	return rec, nil
}

// Records returns a copy of a tenant's chain.
func (m *Memory) Records(t contract.TenantSlot) []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.chains[t])
}

// Tenants implements Source.
func (m *Memory) Tenants(context.Context) ([]contract.TenantSlot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ts []contract.TenantSlot
	for t := range m.chains {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts, nil
}

// Head implements Source.
func (m *Memory) Head(_ context.Context, t contract.TenantSlot) (int64, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.chains[t]
	if len(c) == 0 {
		return 0, Genesis, nil
	}
	return c[len(c)-1].Seq, c[len(c)-1].Hash, nil
}

// Scan implements Source.
func (m *Memory) Scan(_ context.Context, t contract.TenantSlot, fn func(Row) error) error {
	for _, r := range m.Records(t) {
		if err := fn(RowOf(r)); err != nil {
			return err
		}
	}
	return nil
}

// RowOf is the stored form of a record.
func RowOf(r Record) Row {
	return Row{ID: r.ID, Tenant: r.Tenant, Seq: r.Seq, At: r.Outcome.At, Action: r.Outcome.Action, Resource: r.Outcome.Resource,
		Outcome: string(r.Outcome.Outcome), Body: r.Body, PrevHash: r.PrevHash, Hash: r.Hash}
}
