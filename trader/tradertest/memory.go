// Package tradertest holds the conformance suite of trader.Store (TestStore)
// and Memory, an in-memory Store that passes it.
package tradertest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// Memory is an in-memory trader.Store and audit.Source. Transactions are
// serialized by one mutex and rolled back through an undo log, so it keeps
// every rule the SQL store keeps with indexes: unique decision ids, one
// current strategy per concern, conditional updates on revision, and one
// audit chain per tenant.
type Memory struct {
	mu      sync.Mutex
	tenants map[contract.TenantSlot]*memTenant

	// Fail, when set, is consulted before every Tx method with the method's
	// name ("UpdateStrategy", "AppendAudit", ...); a non-nil result is
	// returned as that method's error. It lets tests break the store.
	Fail func(op string) error
}

type memTenant struct {
	strategies map[string]trader.Strategy
	concerns   map[string]trader.Concern
	decisions  map[string][]byte // JSON of trader.Decision: stored, not aliased
	attempts   map[string][]byte // JSON of trader.Attempt
	instances  map[string]trader.Instance
	chain      []audit.Record
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{tenants: map[contract.TenantSlot]*memTenant{}} }

func (m *Memory) tenant(t contract.TenantSlot) *memTenant {
	mt := m.tenants[t]
	if mt == nil {
		mt = &memTenant{
			strategies: map[string]trader.Strategy{}, concerns: map[string]trader.Concern{},
			decisions: map[string][]byte{}, attempts: map[string][]byte{},
			instances: map[string]trader.Instance{},
		}
		m.tenants[t] = mt
	}
	return mt
}

// InTx implements trader.Store.
func (m *Memory) InTx(ctx context.Context, tenant contract.TenantSlot, fn func(trader.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	tx := &memTx{m: m, tenant: tenant, t: m.tenant(tenant)}
	err := fn(tx)
	if err == nil {
		err = tx.err
	}
	if err != nil {
		for i := len(tx.undo) - 1; i >= 0; i-- {
			tx.undo[i]()
		}
	}
	tx.done = true
	return err
}

type memTx struct {
	m      *Memory
	tenant contract.TenantSlot
	t      *memTenant
	undo   []func()
	err    error // the first error a method returned: the tx is aborted
	done   bool
}

func (tx *memTx) check(op string) error {
	if tx.done {
		panic("tradertest: Tx used after its transaction ended")
	}
	if tx.err != nil {
		return fmt.Errorf("tradertest: %s: transaction aborted by an earlier error: %w", op, tx.err)
	}
	if tx.m.Fail != nil {
		if err := tx.m.Fail(op); err != nil {
			tx.err = err
			return err
		}
	}
	return nil
}

func (tx *memTx) fail(err error) error {
	if tx.err == nil {
		tx.err = err
	}
	return err
}

func setUndo[K comparable, V any](tx *memTx, m map[K]V, k K) {
	old, had := m[k]
	tx.undo = append(tx.undo, func() {
		if had {
			m[k] = old
		} else {
			delete(m, k)
		}
	})
}

func (tx *memTx) Strategy(_ context.Context, id string) (trader.Strategy, bool, error) {
	if err := tx.check("Strategy"); err != nil {
		return trader.Strategy{}, false, err
	}
	s, ok := tx.t.strategies[id]
	return s, ok, nil
}

func (tx *memTx) Strategies(_ context.Context, f trader.StrategyFilter) ([]trader.Strategy, error) {
	if err := tx.check("Strategies"); err != nil {
		return nil, err
	}
	var out []trader.Strategy
	for _, s := range tx.t.strategies {
		if f.Match(s) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b trader.Strategy) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// secondCurrent reports whether s would be a second current strategy.
func (tx *memTx) secondCurrent(s trader.Strategy) bool {
	if !s.Status.Current() {
		return false
	}
	for _, o := range tx.t.strategies {
		if o.ID != s.ID && o.Status.Current() && o.AccountID == s.AccountID && o.MarketSymbol == s.MarketSymbol {
			return true
		}
	}
	return false
}

func (tx *memTx) InsertStrategy(_ context.Context, s trader.Strategy) error {
	if err := tx.check("InsertStrategy"); err != nil {
		return err
	}
	if _, ok := tx.t.strategies[s.ID]; ok {
		return tx.fail(fmt.Errorf("tradertest: strategy %s exists: %w", s.ID, trader.ErrConflict))
	}
	if tx.secondCurrent(s) {
		return tx.fail(fmt.Errorf("tradertest: concern %s has a current strategy: %w", s.ConcernID(), trader.ErrConflict))
	}
	setUndo(tx, tx.t.strategies, s.ID)
	tx.t.strategies[s.ID] = s
	return nil
}

func (tx *memTx) UpdateStrategy(_ context.Context, s trader.Strategy, expect contract.Revision) error {
	if err := tx.check("UpdateStrategy"); err != nil {
		return err
	}
	old, ok := tx.t.strategies[s.ID]
	if !ok || old.Revision != expect {
		return tx.fail(fmt.Errorf("tradertest: strategy %s is not at revision %d: %w", s.ID, expect, trader.ErrConflict))
	}
	if tx.secondCurrent(s) {
		return tx.fail(fmt.Errorf("tradertest: concern %s has a current strategy: %w", s.ConcernID(), trader.ErrConflict))
	}
	setUndo(tx, tx.t.strategies, s.ID)
	tx.t.strategies[s.ID] = s
	return nil
}

func (tx *memTx) Concern(_ context.Context, id string) (trader.Concern, bool, error) {
	if err := tx.check("Concern"); err != nil {
		return trader.Concern{}, false, err
	}
	c, ok := tx.t.concerns[id]
	return c, ok, nil
}

func (tx *memTx) LockConcern(ctx context.Context, id string) (trader.Concern, bool, error) {
	if err := tx.check("LockConcern"); err != nil {
		return trader.Concern{}, false, err
	}
	// Transactions are serialized already: reading is locking.
	c, ok := tx.t.concerns[id]
	return c, ok, nil
}

func (tx *memTx) Concerns(context.Context) ([]trader.Concern, error) {
	if err := tx.check("Concerns"); err != nil {
		return nil, err
	}
	out := make([]trader.Concern, 0, len(tx.t.concerns))
	for _, c := range tx.t.concerns {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b trader.Concern) int { return cmp.Compare(a.ConcernID, b.ConcernID) })
	return out, nil
}

func (tx *memTx) InsertConcern(_ context.Context, c trader.Concern) error {
	if err := tx.check("InsertConcern"); err != nil {
		return err
	}
	if _, ok := tx.t.concerns[c.ConcernID]; ok {
		return tx.fail(fmt.Errorf("tradertest: concern %s exists: %w", c.ConcernID, trader.ErrConflict))
	}
	setUndo(tx, tx.t.concerns, c.ConcernID)
	tx.t.concerns[c.ConcernID] = c
	return nil
}

func (tx *memTx) UpdateConcern(_ context.Context, c trader.Concern, expect contract.Revision) error {
	if err := tx.check("UpdateConcern"); err != nil {
		return err
	}
	if old, ok := tx.t.concerns[c.ConcernID]; !ok || old.Revision != expect {
		return tx.fail(fmt.Errorf("tradertest: concern %s is not at revision %d: %w", c.ConcernID, expect, trader.ErrConflict))
	}
	setUndo(tx, tx.t.concerns, c.ConcernID)
	tx.t.concerns[c.ConcernID] = c
	return nil
}

func (tx *memTx) LookupDecision(_ context.Context, id string) (trader.Decision, bool, error) {
	if err := tx.check("LookupDecision"); err != nil {
		return trader.Decision{}, false, err
	}
	b, ok := tx.t.decisions[id]
	if !ok {
		return trader.Decision{}, false, nil
	}
	var d trader.Decision
	if err := json.Unmarshal(b, &d); err != nil {
		return trader.Decision{}, false, tx.fail(err)
	}
	return d, true, nil
}

func (tx *memTx) SaveDecision(_ context.Context, d trader.Decision) error {
	if err := tx.check("SaveDecision"); err != nil {
		return err
	}
	if _, ok := tx.t.decisions[d.DecisionID]; ok {
		return tx.fail(fmt.Errorf("tradertest: decision %s exists: %w", d.DecisionID, trader.ErrConflict))
	}
	b, err := json.Marshal(d)
	if err != nil {
		return tx.fail(err)
	}
	setUndo(tx, tx.t.decisions, d.DecisionID)
	tx.t.decisions[d.DecisionID] = b
	return nil
}

func (tx *memTx) AddAttempt(_ context.Context, a trader.Attempt) error {
	if err := tx.check("AddAttempt"); err != nil {
		return err
	}
	if _, ok := tx.t.attempts[a.ID]; ok {
		return tx.fail(fmt.Errorf("tradertest: attempt %s exists: %w", a.ID, trader.ErrConflict))
	}
	b, err := json.Marshal(a)
	if err != nil {
		return tx.fail(err)
	}
	setUndo(tx, tx.t.attempts, a.ID)
	tx.t.attempts[a.ID] = b
	return nil
}

func (tx *memTx) Attempts(_ context.Context, f trader.AttemptFilter) ([]trader.Attempt, error) {
	if err := tx.check("Attempts"); err != nil {
		return nil, err
	}
	var out []trader.Attempt
	for _, b := range tx.t.attempts {
		var a trader.Attempt
		if err := json.Unmarshal(b, &a); err != nil {
			return nil, tx.fail(err)
		}
		if f.Match(a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b trader.Attempt) int { return cmp.Compare(b.ID, a.ID) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (tx *memTx) Instance(_ context.Context, id string) (trader.Instance, bool, error) {
	if err := tx.check("Instance"); err != nil {
		return trader.Instance{}, false, err
	}
	in, ok := tx.t.instances[id]
	return in, ok, nil
}

func (tx *memTx) PutInstance(_ context.Context, in trader.Instance) error {
	if err := tx.check("PutInstance"); err != nil {
		return err
	}
	setUndo(tx, tx.t.instances, in.StrategyID)
	tx.t.instances[in.StrategyID] = in
	return nil
}

func (tx *memTx) AppendAudit(_ context.Context, e audit.Entry) (audit.Record, error) {
	if err := tx.check("AppendAudit"); err != nil {
		return audit.Record{}, err
	}
	if e.Outcome.Identity.TenantSlot != tx.tenant {
		return audit.Record{}, tx.fail(fmt.Errorf("tradertest: audit entry of tenant %s in a transaction of %s", e.Outcome.Identity.TenantSlot, tx.tenant))
	}
	if err := audit.Check(e); err != nil {
		return audit.Record{}, tx.fail(err)
	}
	prev := audit.Genesis
	if n := len(tx.t.chain); n > 0 {
		prev = tx.t.chain[n-1].Hash
	}
	rec, err := audit.Seal(e, contract.NewID(contract.PrefixEvent), int64(len(tx.t.chain))+1, prev)
	if err != nil {
		return audit.Record{}, tx.fail(err)
	}
	t := tx.t
	n := len(t.chain)
	tx.undo = append(tx.undo, func() { t.chain = t.chain[:n] })
	t.chain = append(t.chain, rec)
	return rec, nil
}

// Records returns a copy of a tenant's audit chain.
func (m *Memory) Records(t contract.TenantSlot) []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mt := m.tenants[t]; mt != nil {
		return slices.Clone(mt.chain)
	}
	return nil
}

// Tenants implements audit.Source.
func (m *Memory) Tenants(context.Context) ([]contract.TenantSlot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ts []contract.TenantSlot
	for t, mt := range m.tenants {
		if len(mt.chain) > 0 {
			ts = append(ts, t)
		}
	}
	slices.Sort(ts)
	return ts, nil
}

// Head implements audit.Source.
func (m *Memory) Head(_ context.Context, t contract.TenantSlot) (int64, string, error) {
	c := m.Records(t)
	if len(c) == 0 {
		return 0, audit.Genesis, nil
	}
	return c[len(c)-1].Seq, c[len(c)-1].Hash, nil
}

// Scan implements audit.Source.
func (m *Memory) Scan(_ context.Context, t contract.TenantSlot, fn func(audit.Row) error) error {
	for _, r := range m.Records(t) {
		if err := fn(audit.RowOf(r)); err != nil {
			return err
		}
	}
	return nil
}

var (
	_ trader.Store = (*Memory)(nil)
	_ audit.Source = (*Memory)(nil)
)
