package relay

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Capability is a platform credential the connector holds in its vault, for
// one tenant and session, and never sends to a gateway (a Discord
// interaction token, for follow-ups).
type Capability struct {
	Tenant     contract.TenantSlot
	SessionKey string
	Kind       string // e.g. KindDiscordInteractionToken
	Bot        string // the application or bot the credential acts for
	Secret     string // the credential itself
	ExpiresAt  time.Time
}

// Buffered is an inbound event kept while no gateway of its tenant is
// connected. It leaves the buffer only when a gateway acknowledges it.
type Buffered struct {
	ID         string // "rbuf_<ulid>"; ids sort by creation
	Tenant     contract.TenantSlot
	Platform   string
	Bot        string
	SessionKey string
	Event      []byte // the MessageEvent's JSON
	CreatedAt  time.Time
}

// Store is what the connector persists. Every method is scoped to one
// tenant (except Prune, which only deletes what has expired). Implementations
// must be safe for concurrent use by several processes sharing one database:
// the conditional rules (first sighting, buffer bound, lease) are each one
// statement. relay/relaytest holds the conformance suite and an in-memory
// implementation.
type Store interface {
	// PutCapability stores c, replacing the capability with the same
	// (tenant, session key, kind).
	PutCapability(ctx context.Context, c Capability) error
	// Capability returns the capability at (tenant, sessionKey, kind) if it
	// has not expired at now; ok is false when it is absent or expired.
	Capability(ctx context.Context, tenant contract.TenantSlot, sessionKey, kind string, now time.Time) (c Capability, ok bool, err error)

	// MarkSeen records an inbound event's dedupe key for tenant. first is
	// true only for the first call with that (tenant, key).
	MarkSeen(ctx context.Context, tenant contract.TenantSlot, key string, at time.Time) (first bool, err error)

	// Enqueue adds b to its tenant's buffer unless that buffer already holds
	// limit events (ok false then, nothing stored). A zero or negative limit
	// means no bound.
	Enqueue(ctx context.Context, b Buffered, limit int) (ok bool, err error)
	// Pending lists up to limit buffered events of (tenant, platform, bot)
	// that no lease holds at now, oldest first.
	Pending(ctx context.Context, tenant contract.TenantSlot, platform, bot string, now time.Time, limit int) ([]Buffered, error)
	// Lease marks buffered event id as being delivered by owner until until.
	// It fails (ok false) when the event is gone or another owner's lease is
	// still running at now.
	Lease(ctx context.Context, tenant contract.TenantSlot, id, owner string, now, until time.Time) (ok bool, err error)
	// ReleaseLeases ends every lease owner holds in tenant's buffer, so the
	// events are delivered again on the next connection.
	ReleaseLeases(ctx context.Context, tenant contract.TenantSlot, owner string) error
	// Ack removes buffered event id from tenant's buffer; ok is false when it
	// was not there (already acknowledged, or another tenant's).
	Ack(ctx context.Context, tenant contract.TenantSlot, id string) (ok bool, err error)

	// BindChat records that chatID on platform belongs to tenant (seen in
	// an inbound event resolved to tenant). Binding twice is not an error.
	BindChat(ctx context.Context, tenant contract.TenantSlot, platform, chatID string, at time.Time) error
	// ChatBound reports whether chatID on platform is bound to tenant.
	ChatBound(ctx context.Context, tenant contract.TenantSlot, platform, chatID string) (bool, error)

	// Prune deletes capabilities expired at now and dedupe keys recorded
	// before seenBefore, in every tenant.
	Prune(ctx context.Context, now, seenBefore time.Time) error
}
