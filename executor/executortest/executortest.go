// Package executortest holds the conformance suite every executor.Store
// must pass, and Memory, the in-memory Store that passes it.
package executortest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

type key struct {
	tenant       contract.TenantSlot
	account, day string
}

type stateKey struct {
	tenant contract.TenantSlot
	name   string
}

// Memory is an in-memory executor.Store.
type Memory struct {
	mu        sync.Mutex
	dayStart  map[key]float64
	anomalies map[key]int
	states    map[stateKey][]byte
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{dayStart: map[key]float64{}, anomalies: map[key]int{}, states: map[stateKey][]byte{}}
}

// CaptureDayStart implements executor.Store.
func (m *Memory) CaptureDayStart(_ context.Context, t contract.TenantSlot, account, day string, v float64) (float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{t, account, day}
	if old, ok := m.dayStart[k]; ok {
		return old, nil
	}
	m.dayStart[k] = v
	return v, nil
}

// Anomalies implements executor.Store.
func (m *Memory) Anomalies(_ context.Context, t contract.TenantSlot, account, day string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.anomalies[key{t, account, day}], nil
}

// AddAnomaly implements executor.Store.
func (m *Memory) AddAnomaly(_ context.Context, t contract.TenantSlot, account, day string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key{t, account, day}
	m.anomalies[k]++
	return m.anomalies[k], nil
}

// BrokerState implements executor.Store.
func (m *Memory) BrokerState(_ context.Context, t contract.TenantSlot, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.states[stateKey{t, name}]), nil
}

// SaveBrokerState implements executor.Store.
func (m *Memory) SaveBrokerState(_ context.Context, t contract.TenantSlot, name string, state []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[stateKey{t, name}] = bytes.Clone(state)
	return nil
}

var _ executor.Store = (*Memory)(nil)

// TestStore runs the conformance suite against stores made by open; each
// call of open must return an empty store.
func TestStore(t *testing.T, open func(t *testing.T) executor.Store) {
	const (
		t1 = contract.TenantSlot("slot-1")
		t2 = contract.TenantSlot("slot-2")
	)
	t.Run("DayStartFirstWriterWins", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		v, err := s.CaptureDayStart(ctx, t1, "A1", "2026-06-26", 1000)
		if err != nil || v != 1000 {
			t.Fatalf("first capture = %v, %v; want 1000", v, err)
		}
		v, err = s.CaptureDayStart(ctx, t1, "A1", "2026-06-26", 900.5)
		if err != nil || v != 1000 {
			t.Fatalf("second capture = %v, %v; want the first value 1000", v, err)
		}
		v, err = s.CaptureDayStart(ctx, t1, "A1", "2026-06-27", 900.5)
		if err != nil || v != 900.5 {
			t.Fatalf("next day capture = %v, %v; want 900.5", v, err)
		}
		v, err = s.CaptureDayStart(ctx, t1, "A2", "2026-06-26", 42.25)
		if err != nil || v != 42.25 {
			t.Fatalf("other account capture = %v, %v; want 42.25", v, err)
		}
		v, err = s.CaptureDayStart(ctx, t2, "A1", "2026-06-26", 7)
		if err != nil || v != 7 {
			t.Fatalf("other tenant capture = %v, %v; want 7 (tenants must not share rows)", v, err)
		}
	})
	t.Run("DayStartConcurrent", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		var wg sync.WaitGroup
		got := make([]float64, 8)
		errs := make([]error, 8)
		for i := range got {
			wg.Go(func() { got[i], errs[i] = s.CaptureDayStart(ctx, t1, "A1", "2026-06-26", float64(100+i)) })
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil {
				t.Fatalf("capture %d: %v", i, errs[i])
			}
			if got[i] != got[0] {
				t.Fatalf("concurrent captures disagree: %v", got)
			}
		}
	})
	t.Run("AnomalyCounter", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		if n, err := s.Anomalies(ctx, t1, "A1", "2026-06-26"); err != nil || n != 0 {
			t.Fatalf("empty count = %d, %v", n, err)
		}
		for want := 1; want <= 3; want++ {
			n, err := s.AddAnomaly(ctx, t1, "A1", "2026-06-26")
			if err != nil || n != want {
				t.Fatalf("add #%d = %d, %v", want, n, err)
			}
		}
		if n, _ := s.Anomalies(ctx, t1, "A1", "2026-06-26"); n != 3 {
			t.Fatalf("count = %d, want 3", n)
		}
		for _, k := range []struct {
			t         contract.TenantSlot
			acct, day string
		}{{t1, "A1", "2026-06-27"}, {t1, "A2", "2026-06-26"}, {t2, "A1", "2026-06-26"}} {
			if n, err := s.Anomalies(ctx, k.t, k.acct, k.day); err != nil || n != 0 {
				t.Fatalf("count %v = %d, %v; want 0 (rows must not leak across day, account or tenant)", k, n, err)
			}
		}
	})
	t.Run("AnomalyConcurrent", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, err := s.AddAnomaly(ctx, t1, "A1", "2026-06-26"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n, _ := s.Anomalies(ctx, t1, "A1", "2026-06-26"); n != 10 {
			t.Fatalf("count after 10 concurrent adds = %d", n)
		}
	})
	t.Run("BrokerState", func(t *testing.T) {
		s, ctx := open(t), t.Context()
		if b, err := s.BrokerState(ctx, t1, "paper"); err != nil || b != nil {
			t.Fatalf("empty state = %q, %v; want nil", b, err)
		}
		if err := s.SaveBrokerState(ctx, t1, "paper", []byte(`{"v":1}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveBrokerState(ctx, t1, "paper", []byte(`{"v":2}`)); err != nil {
			t.Fatal(err)
		}
		if b, err := s.BrokerState(ctx, t1, "paper"); err != nil || string(b) != `{"v":2}` {
			t.Fatalf("state = %q, %v; want the last save", b, err)
		}
		if b, _ := s.BrokerState(ctx, t2, "paper"); b != nil {
			t.Fatalf("tenant 2 sees %q", b)
		}
		if b, _ := s.BrokerState(ctx, t1, "other"); b != nil {
			t.Fatalf("other name sees %q", b)
		}
	})
}
