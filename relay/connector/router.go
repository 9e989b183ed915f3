package connector

import (
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
)

// Owner is a gateway connection that can own sessions.
type Owner interface {
	// ID names the connection ("rconn_<ulid>").
	ID() string
	// Deliver queues a frame for the connection; false when it is gone or
	// cannot take more.
	Deliver(f relay.Frame) bool
	// Serves reports whether the connection said hello for (platform, bot).
	Serves(platform, bot string) bool
}

// Router keeps the routing invariant: one gateway connection owns a
// (tenant, session key) at a time, and that connection receives the
// session's events, interrupts and follow-ups. The in-process LocalRouter
// serves one connector process; a multi-process deployment would forward
// through a broker (NATS) behind the same interface.
type Router interface {
	// Owner returns the owner of (tenant, key) and the chat the session is in.
	Owner(tenant contract.TenantSlot, key string) (o Owner, chatID string, ok bool)
	// SetOwner makes o the owner of (tenant, key).
	SetOwner(tenant contract.TenantSlot, key, chatID string, o Owner)
	// Forget drops every session o owns (its connection ended).
	Forget(o Owner)
}

// BufferSignal is a Router that also tells the other processes when one of
// them buffers an event, so a process with a connection for it drains the
// shared buffer at once rather than at its next maintenance tick. The first
// event of a chat has no session owner; without this it waits in the
// buffer until the process holding the tenant's gateway looks again.
type BufferSignal interface {
	// Buffered tells the other processes that tenant's buffer has an
	// event for (platform, bot).
	Buffered(tenant contract.TenantSlot, platform, bot string)
	// OnBuffered sets what runs when another process says so. An empty
	// tenant means any buffer may hold events (after an outage of the
	// signals' transport): drain every one this process can.
	OnBuffered(fn func(tenant contract.TenantSlot, platform, bot string))
}

// LocalRouter is the in-process Router.
type LocalRouter struct {
	mu     sync.RWMutex
	owners map[routeKey]route
	byConn map[Owner]map[routeKey]struct{}
}

type routeKey struct {
	tenant contract.TenantSlot
	key    string
}

type route struct {
	owner  Owner
	chatID string
}

// NewLocalRouter returns an empty in-process router.
func NewLocalRouter() *LocalRouter {
	return &LocalRouter{owners: map[routeKey]route{}, byConn: map[Owner]map[routeKey]struct{}{}}
}

// Owner implements Router.
func (r *LocalRouter) Owner(tenant contract.TenantSlot, key string) (Owner, string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	rt, ok := r.owners[routeKey{tenant, key}]
	return rt.owner, rt.chatID, ok
}

// SetOwner implements Router.
func (r *LocalRouter) SetOwner(tenant contract.TenantSlot, key, chatID string, o Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := routeKey{tenant, key}
	if old, ok := r.owners[k]; ok && old.owner != o {
		delete(r.byConn[old.owner], k)
	}
	r.owners[k] = route{owner: o, chatID: chatID}
	set := r.byConn[o]
	if set == nil {
		set = map[routeKey]struct{}{}
		r.byConn[o] = set
	}
	set[k] = struct{}{}
}

// Forget implements Router.
func (r *LocalRouter) Forget(o Owner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.byConn[o] {
		if r.owners[k].owner == o {
			delete(r.owners, k)
		}
	}
	delete(r.byConn, o)
}

// Len returns how many sessions have an owner.
func (r *LocalRouter) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.owners)
}
