// Package relaytest holds the conformance suite for relay.Store and an
// in-memory Store that passes it.
package relaytest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
)

// Memory is an in-process relay.Store, for tests and single-process use
// without persistence.
type Memory struct {
	mu    sync.Mutex
	caps  map[capKey]relay.Capability
	seen  map[seenKey]time.Time
	buf   map[contract.TenantSlot][]*bufRow
	chats map[chatKey]bool
}

type capKey struct {
	tenant           contract.TenantSlot
	sessionKey, kind string
}

type seenKey struct {
	tenant contract.TenantSlot
	key    string
}

type chatKey struct {
	tenant           contract.TenantSlot
	platform, chatID string
}

type bufRow struct {
	b     relay.Buffered
	owner string
	until time.Time
}

// NewMemory returns an empty store.
func NewMemory() *Memory {
	return &Memory{
		caps:  map[capKey]relay.Capability{},
		seen:  map[seenKey]time.Time{},
		buf:   map[contract.TenantSlot][]*bufRow{},
		chats: map[chatKey]bool{},
	}
}

var _ relay.Store = (*Memory)(nil)

// PutCapability implements relay.Store.
func (m *Memory) PutCapability(_ context.Context, c relay.Capability) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.caps[capKey{c.Tenant, c.SessionKey, c.Kind}] = c
	return nil
}

// Capability implements relay.Store.
func (m *Memory) Capability(_ context.Context, tenant contract.TenantSlot, sessionKey, kind string, now time.Time) (relay.Capability, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.caps[capKey{tenant, sessionKey, kind}]
	if !ok || !now.Before(c.ExpiresAt) {
		return relay.Capability{}, false, nil
	}
	return c, true, nil
}

// MarkSeen implements relay.Store.
func (m *Memory) MarkSeen(_ context.Context, tenant contract.TenantSlot, key string, at time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := seenKey{tenant, key}
	if _, ok := m.seen[k]; ok {
		return false, nil
	}
	m.seen[k] = at
	return true, nil
}

// Enqueue implements relay.Store.
func (m *Memory) Enqueue(_ context.Context, b relay.Buffered, limit int) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rows := m.buf[b.Tenant]
	if limit > 0 && len(rows) >= limit {
		return false, nil
	}
	for _, r := range rows {
		if r.b.ID == b.ID {
			return false, nil
		}
	}
	b.Event = slices.Clone(b.Event)
	m.buf[b.Tenant] = append(rows, &bufRow{b: b})
	slices.SortFunc(m.buf[b.Tenant], func(x, y *bufRow) int { return strings.Compare(x.b.ID, y.b.ID) })
	return true, nil
}

// Pending implements relay.Store.
func (m *Memory) Pending(_ context.Context, tenant contract.TenantSlot, platform, bot string, now time.Time, limit int) ([]relay.Buffered, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []relay.Buffered
	for _, r := range m.buf[tenant] {
		if limit > 0 && len(out) >= limit {
			break
		}
		if r.b.Platform != platform || r.b.Bot != bot || now.Before(r.until) {
			continue
		}
		b := r.b
		b.Event = slices.Clone(b.Event)
		out = append(out, b)
	}
	return out, nil
}

// Lease implements relay.Store.
func (m *Memory) Lease(_ context.Context, tenant contract.TenantSlot, id, owner string, now, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.buf[tenant] {
		if r.b.ID != id {
			continue
		}
		if now.Before(r.until) && r.owner != owner {
			return false, nil
		}
		r.owner, r.until = owner, until
		return true, nil
	}
	return false, nil
}

// ReleaseLeases implements relay.Store.
func (m *Memory) ReleaseLeases(_ context.Context, tenant contract.TenantSlot, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.buf[tenant] {
		if r.owner == owner {
			r.owner, r.until = "", time.Time{}
		}
	}
	return nil
}

// Ack implements relay.Store.
func (m *Memory) Ack(_ context.Context, tenant contract.TenantSlot, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rows := m.buf[tenant]
	for i, r := range rows {
		if r.b.ID == id {
			m.buf[tenant] = slices.Delete(rows, i, i+1)
			return true, nil
		}
	}
	return false, nil
}

// BindChat implements relay.Store.
func (m *Memory) BindChat(_ context.Context, tenant contract.TenantSlot, platform, chatID string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.chats[chatKey{tenant, platform, chatID}] = true
	return nil
}

// ChatBound implements relay.Store.
func (m *Memory) ChatBound(_ context.Context, tenant contract.TenantSlot, platform, chatID string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.chats[chatKey{tenant, platform, chatID}], nil
}

// Prune implements relay.Store.
func (m *Memory) Prune(_ context.Context, now, seenBefore time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, c := range m.caps {
		if !now.Before(c.ExpiresAt) {
			delete(m.caps, k)
		}
	}
	for k, at := range m.seen {
		if at.Before(seenBefore) {
			delete(m.seen, k)
		}
	}
	return nil
}
