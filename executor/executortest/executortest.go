// Package executortest holds the conformance suite every executor.Store
// must pass, and Memory, the in-memory Store that passes it.
package executortest

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

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
	states    map[stateKey]brokerState
	keys      map[stateKey]*tickKey // idempotency keys of ticks (name = key)
	refs      map[stateKey][]string // ref_ids of keyed ticks (name = key)
}

type brokerState struct {
	state   []byte
	version int64
}

type tickKey struct {
	hash     string
	at       time.Time
	done     bool
	envelope []byte
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory {
	return &Memory{dayStart: map[key]float64{}, anomalies: map[key]int{}, states: map[stateKey]brokerState{}, keys: map[stateKey]*tickKey{}, refs: map[stateKey][]string{}}
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
func (m *Memory) BrokerState(_ context.Context, t contract.TenantSlot, name string) ([]byte, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.states[stateKey{t, name}]
	return bytes.Clone(st.state), st.version, nil
}

// SaveBrokerState implements executor.Store.
func (m *Memory) SaveBrokerState(_ context.Context, t contract.TenantSlot, name string, state []byte, version int64) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := stateKey{t, name}
	if m.states[k].version != version {
		return 0, false, nil
	}
	m.states[k] = brokerState{bytes.Clone(state), version + 1}
	return version + 1, true, nil
}

// ClaimTick implements executor.Store.
func (m *Memory) ClaimTick(_ context.Context, t contract.TenantSlot, key, bodyHash string, lease time.Duration) (executor.TickClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := stateKey{t, key}
	c, ok := m.keys[k]
	switch {
	case !ok:
		m.keys[k] = &tickKey{hash: bodyHash, at: time.Now()}
		return executor.TickClaim{Claimed: true}, nil
	case c.hash != bodyHash:
		return executor.TickClaim{}, contract.Conflictf("idempotency_key_conflict", "idempotency key %q was already used with a different body", key)
	case c.done:
		return executor.TickClaim{Envelope: bytes.Clone(c.envelope)}, nil
	case time.Since(c.at) > lease:
		c.at = time.Now()
		return executor.TickClaim{Claimed: true}, nil
	}
	return executor.TickClaim{}, nil
}

// CompleteTick implements executor.Store.
func (m *Memory) CompleteTick(_ context.Context, t contract.TenantSlot, key string, envelope []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.keys[stateKey{t, key}]; ok {
		c.done, c.envelope = true, bytes.Clone(envelope)
	}
	return nil
}

// ReleaseTick implements executor.Store.
func (m *Memory) ReleaseTick(_ context.Context, t contract.TenantSlot, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.keys[stateKey{t, key}]; ok && !c.done {
		delete(m.keys, stateKey{t, key})
		delete(m.refs, stateKey{t, key})
	}
	return nil
}

// TickRefs implements executor.Store.
func (m *Memory) TickRefs(_ context.Context, t contract.TenantSlot, key string, refs []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := stateKey{t, key}
	if old, ok := m.refs[k]; ok {
		return slices.Clone(old), nil
	}
	m.refs[k] = slices.Clone(refs)
	return slices.Clone(refs), nil
}

var _ executor.Store = (*Memory)(nil)

// Tenants of the conformance suite.
const (
	t1 = contract.TenantSlot("slot-1")
	t2 = contract.TenantSlot("slot-2")
)

// TestStore runs the conformance suite against stores made by open; each
// call of open must return an empty store.
func TestStore(t *testing.T, open func(t *testing.T) executor.Store) {
	for _, c := range []struct {
		name string
		run  func(*testing.T, executor.Store)
	}{
		{"DayStartFirstWriterWins", testDayStartFirstWriterWins},
		{"DayStartConcurrent", testDayStartConcurrent},
		{"AnomalyCounter", testAnomalyCounter},
		{"AnomalyConcurrent", testAnomalyConcurrent},
		{"BrokerState", testBrokerState},
		{"BrokerStateConcurrent", testBrokerStateConcurrent},
		{"TickKeys", testTickKeys},
		{"TickKeysConcurrent", testTickKeysConcurrent},
		{"TickRefs", testTickRefs},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

func testDayStartFirstWriterWins(t *testing.T, s executor.Store) {
	ctx := t.Context()
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
}

func testDayStartConcurrent(t *testing.T, s executor.Store) {
	ctx := t.Context()
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
}

func testAnomalyCounter(t *testing.T, s executor.Store) {
	ctx := t.Context()
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
}

func testAnomalyConcurrent(t *testing.T, s executor.Store) {
	ctx := t.Context()
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
}

func testBrokerState(t *testing.T, s executor.Store) {
	ctx := t.Context()
	if b, v, err := s.BrokerState(ctx, t1, "paper"); err != nil || b != nil || v != 0 {
		t.Fatalf("empty state = %q v%d, %v; want nil v0", b, v, err)
	}
	v1, ok, err := s.SaveBrokerState(ctx, t1, "paper", []byte(`{"v":1}`), 0)
	if err != nil || !ok {
		t.Fatalf("first save: %v %v", ok, err)
	}
	if _, ok, err := s.SaveBrokerState(ctx, t1, "paper", []byte(`{"v":"stale"}`), 0); err != nil || ok {
		t.Fatalf("second save at version 0 = %v, %v; want refused", ok, err)
	}
	v2, ok, err := s.SaveBrokerState(ctx, t1, "paper", []byte(`{"v":2}`), v1)
	if err != nil || !ok || v2 == v1 {
		t.Fatalf("save at v%d = v%d %v, %v", v1, v2, ok, err)
	}
	if _, ok, _ := s.SaveBrokerState(ctx, t1, "paper", []byte(`{"v":"stale"}`), v1); ok {
		t.Fatal("save at a stale version succeeded")
	}
	if b, v, err := s.BrokerState(ctx, t1, "paper"); err != nil || string(b) != `{"v":2}` || v != v2 {
		t.Fatalf("state = %q v%d, %v; want the last save at v%d", b, v, err, v2)
	}
	if b, _, _ := s.BrokerState(ctx, t2, "paper"); b != nil {
		t.Fatalf("tenant 2 sees %q", b)
	}
	if b, _, _ := s.BrokerState(ctx, t1, "other"); b != nil {
		t.Fatalf("other name sees %q", b)
	}
}

// testBrokerStateConcurrent: compare-and-swap increments from 8 writers: none is lost.
func testBrokerStateConcurrent(t *testing.T, s executor.Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				for {
					b, v, err := s.BrokerState(ctx, t1, "paper")
					if err != nil {
						t.Error(err)
						return
					}
					n := len(b)
					_, ok, err := s.SaveBrokerState(ctx, t1, "paper", bytes.Repeat([]byte("x"), n+1), v)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if b, _, _ := s.BrokerState(ctx, t1, "paper"); len(b) != 40 {
		t.Fatalf("%d increments survived, want 40", len(b))
	}
}

func testTickKeys(t *testing.T, s executor.Store) {
	ctx := t.Context()
	const k = "tick-key-0001"
	c, err := s.ClaimTick(ctx, t1, k, "h1", time.Hour)
	if err != nil || !c.Claimed || c.Envelope != nil {
		t.Fatalf("first claim = %+v, %v", c, err)
	}
	if c, err := s.ClaimTick(ctx, t1, k, "h1", time.Hour); err != nil || c.Claimed || c.Envelope != nil {
		t.Fatalf("claim while in progress = %+v, %v; want neither claimed nor stored", c, err)
	}
	if _, err := s.ClaimTick(ctx, t1, k, "h2", time.Hour); contract.KindOf(err) != contract.KindConflict {
		t.Fatalf("other body while in progress: %v, want conflict", err)
	}
	if err := s.CompleteTick(ctx, t1, k, []byte(`{"tick_id":"t1"}`)); err != nil {
		t.Fatal(err)
	}
	if c, err := s.ClaimTick(ctx, t1, k, "h1", time.Hour); err != nil || c.Claimed || string(c.Envelope) != `{"tick_id":"t1"}` {
		t.Fatalf("claim after completion = %+v, %v; want the stored envelope", c, err)
	}
	if _, err := s.ClaimTick(ctx, t1, k, "h2", time.Hour); contract.KindOf(err) != contract.KindConflict {
		t.Fatalf("other body: %v, want conflict", err)
	}
	// Keys are per tenant.
	if c, err := s.ClaimTick(ctx, t2, k, "h2", time.Hour); err != nil || !c.Claimed {
		t.Fatalf("other tenant = %+v, %v; want claimed", c, err)
	}
	// A released key is free again; a stale claim is taken over.
	if err := s.ReleaseTick(ctx, t2, k); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.ClaimTick(ctx, t2, k, "h3", time.Hour); !c.Claimed {
		t.Fatalf("released key not claimable: %+v", c)
	}
	if c, _ := s.ClaimTick(ctx, t2, k, "h3", 0); !c.Claimed {
		t.Fatalf("stale claim not taken over: %+v", c)
	}
	// Completed keys are never released.
	if err := s.ReleaseTick(ctx, t1, k); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.ClaimTick(ctx, t1, k, "h1", 0); c.Envelope == nil {
		t.Fatalf("completed key lost by release or lease: %+v", c)
	}
}

func testTickKeysConcurrent(t *testing.T, s executor.Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	var mu sync.Mutex
	claimed := 0
	for range 20 {
		wg.Go(func() {
			c, err := s.ClaimTick(ctx, t1, "tick-key-0002", "h", time.Hour)
			if err != nil {
				t.Error(err)
			}
			if c.Claimed {
				mu.Lock()
				claimed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if claimed != 1 {
		t.Fatalf("%d concurrent claims won, want 1", claimed)
	}
}

func testTickRefs(t *testing.T, s executor.Store) {
	ctx := t.Context()
	const k = "tick-key-0003"
	first := []string{"8c0f6a57-8a3e-4a52-9d0e-0c1f3b0a1d11", "8c0f6a57-8a3e-4a52-9d0e-0c1f3b0a1d12"}
	if _, err := s.ClaimTick(ctx, t1, k, "h1", time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := s.TickRefs(ctx, t1, k, first)
	if err != nil || !slices.Equal(got, first) {
		t.Fatalf("first TickRefs = %q, %v; want %q", got, err, first)
	}
	// A takeover proposes its own and reads the first run's back.
	got, err = s.TickRefs(ctx, t1, k, []string{"other-1", "other-2"})
	if err != nil || !slices.Equal(got, first) {
		t.Fatalf("second TickRefs = %q, %v; want the first run's %q", got, err, first)
	}
	// Per tenant.
	if got, err := s.TickRefs(ctx, t2, k, []string{"t2-ref"}); err != nil || !slices.Equal(got, []string{"t2-ref"}) {
		t.Fatalf("other tenant = %q, %v", got, err)
	}
	// A tick with no intents records none, and reads none back.
	if got, err := s.TickRefs(ctx, t1, "tick-key-0004", []string{}); err != nil || len(got) != 0 {
		t.Fatalf("no intents = %q, %v", got, err)
	}
	// A released key forgets its ref_ids: the next run writes its own.
	if err := s.ReleaseTick(ctx, t1, k); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimTick(ctx, t1, k, "h1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TickRefs(ctx, t1, k, []string{"fresh"}); err != nil || !slices.Equal(got, []string{"fresh"}) {
		t.Fatalf("after release = %q, %v; want the new run's", got, err)
	}
	// A completed key keeps them.
	if err := s.CompleteTick(ctx, t1, k, []byte(`{"tick_id":"t"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseTick(ctx, t1, k); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TickRefs(ctx, t1, k, []string{"later"}); err != nil || !slices.Equal(got, []string{"fresh"}) {
		t.Fatalf("completed key = %q, %v; want its ref_ids kept", got, err)
	}
}
