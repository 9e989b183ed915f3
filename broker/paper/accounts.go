package paper

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/contract"
)

// StateStore keeps simulator states by tenant and name with a
// compare-and-swap on a version; the executor's store (executor.Store) is
// one.
type StateStore interface {
	BrokerState(ctx context.Context, tenant contract.TenantSlot, name string) (state []byte, version int64, err error)
	SaveBrokerState(ctx context.Context, tenant contract.TenantSlot, name string, state []byte, version int64) (newVersion int64, saved bool, err error)
}

// StorePersister keeps one simulator's state in a StateStore, under a
// tenant and a name.
type StorePersister struct {
	Store  StateStore
	Tenant contract.TenantSlot
	Name   string
}

// Load implements Persister.
func (p StorePersister) Load(ctx context.Context) ([]byte, int64, error) {
	b, v, err := p.Store.BrokerState(ctx, p.Tenant, p.Name)
	if err != nil {
		return nil, 0, fmt.Errorf("paper: load %s: %w", p.Name, err)
	}
	return b, v, nil
}

// Save implements Persister: a compare-and-swap on the version.
func (p StorePersister) Save(ctx context.Context, state []byte, version int64) (int64, bool, error) {
	return p.Store.SaveBrokerState(ctx, p.Tenant, p.Name, state, version)
}

// AccountName is the name a scenario's simulated account is stored under,
// derived from the scenario's bytes: the same scenario continues its
// account (orders, fills, consumed faults), a changed one starts fresh.
func AccountName(scenario []byte) string {
	sum := sha256.Sum256(scenario)
	return "paper/" + hex.EncodeToString(sum[:8])
}

// Brokers returns an executor.Executor.Brokers function for a server: each
// tenant gets its own paper account, built from the scenario the first time
// and kept in store under AccountName (so `caduceus exec` and the server
// share a tenant's paper account). The scenario's fixed now is ignored: a
// server runs on the wall clock. Simulators are kept per tenant in this
// process; every call they make is a compare-and-swap transaction on the
// stored state, so processes sharing one database share the account without
// losing or doubling a fill.
func Brokers(store StateStore, scenario []byte) (func(context.Context, contract.TenantSlot) (broker.Broker, error), error) {
	sc, err := ParseScenario(scenario)
	if err != nil {
		return nil, contract.FieldError("scenario", "bad_scenario", "%v", err)
	}
	name := AccountName(scenario)
	var mu sync.Mutex
	sims := map[contract.TenantSlot]*Sim{}
	return func(ctx context.Context, t contract.TenantSlot) (broker.Broker, error) {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := sims[t]; ok {
			return s, nil
		}
		fresh := *sc
		fresh.Now = "" // a server runs on the wall clock
		s, err := Open(ctx, StorePersister{Store: store, Tenant: t, Name: name}, &fresh, nil)
		if err != nil {
			return nil, err
		}
		sims[t] = s
		return s, nil
	}, nil
}
