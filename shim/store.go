package shim

import (
	"context"
	"errors"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// Store persists provisions, context entries, the once-per-conversation
// ledger and receipts. Every method is scoped to one tenant and never reads
// or writes another's rows; builtin rows live under the Service's
// BuiltinTenant and are read through the same methods.
//
// Errors: a missing row is a not_found *contract.Error (code "not_found");
// a version mismatch or an existing id on create is a conflict
// *contract.Error (codes "revision_mismatch", "exists"); anything else is a
// failure. Each check-then-write is one statement: create is an INSERT
// guarded by the (tenant, id) primary key, update and delete are
// "... WHERE tenant = ? AND id = ? AND version = ?" (zero rows affected then
// tells not_found from conflict with one more SELECT), the ledger mark is an
// INSERT that does nothing on a (tenant, conversation, provision) conflict.
type Store interface {
	// ListProvisions returns the tenant's provisions ordered by id.
	ListProvisions(ctx context.Context, tenant contract.TenantSlot) ([]Provision, error)
	// GetProvision returns one provision.
	GetProvision(ctx context.Context, tenant contract.TenantSlot, id string) (Provision, error)
	// CreateProvision stores p with version 1 and returns it as stored.
	CreateProvision(ctx context.Context, tenant contract.TenantSlot, p Provision) (Provision, error)
	// UpdateProvision replaces the provision p.ID if its stored version is
	// ifVersion, storing it with version ifVersion+1, and returns it as stored.
	UpdateProvision(ctx context.Context, tenant contract.TenantSlot, p Provision, ifVersion int64) (Provision, error)
	// DeleteProvision deletes the provision if its stored version is ifVersion.
	DeleteProvision(ctx context.Context, tenant contract.TenantSlot, id string, ifVersion int64) error

	// ListContext returns the tenant's context entries ordered by ref.
	ListContext(ctx context.Context, tenant contract.TenantSlot) ([]ContextEntry, error)
	// GetContext returns one context entry.
	GetContext(ctx context.Context, tenant contract.TenantSlot, ref string) (ContextEntry, error)
	// CreateContext stores e with version 1 and returns it as stored.
	CreateContext(ctx context.Context, tenant contract.TenantSlot, e ContextEntry) (ContextEntry, error)
	// UpdateContext replaces e.Ref if its stored version is ifVersion.
	UpdateContext(ctx context.Context, tenant contract.TenantSlot, e ContextEntry, ifVersion int64) (ContextEntry, error)
	// DeleteContext deletes the entry if its stored version is ifVersion.
	DeleteContext(ctx context.Context, tenant contract.TenantSlot, ref string, ifVersion int64) error

	// MarkShimmed records that provision was shimmed into conversation and
	// reports whether this call made the mark (false: it was already there).
	MarkShimmed(ctx context.Context, tenant contract.TenantSlot, conversation, provision string, version int64, at time.Time) (bool, error)
	// Shimmed reports whether provision was shimmed into conversation.
	Shimmed(ctx context.Context, tenant contract.TenantSlot, conversation, provision string) (bool, error)

	// AddReceipt stores a receipt (r.ID is unique per tenant).
	AddReceipt(ctx context.Context, tenant contract.TenantSlot, r Receipt) error
	// ReceiptOfResponse returns the receipt of the request whose client got
	// the Responses API answer responseID (Receipt.ResponseID).
	ReceiptOfResponse(ctx context.Context, tenant contract.TenantSlot, responseID string) (Receipt, error)
	// ListReceipts returns receipts newest first: at most limit of them, and
	// only those with an id below before when before is not empty.
	ListReceipts(ctx context.Context, tenant contract.TenantSlot, limit int, before string) ([]Receipt, error)
}

// Store error codes.
const (
	CodeNotFound         = "not_found"
	CodeRevisionMismatch = contract.CodeRevisionMismatch // the version is not the If-Match one
	CodeExists           = "exists"
)

// TurnRecorder writes a proxied turn's record as one unit: the audit entry
// e (whose payload is the receipt) sealed onto its tenant's chain, rc with
// rc.AuditID set to the new record's id, and the memory writes of the
// turn's TurnPlanner observers, in one transaction. On SQLite that
// transaction goes through the store's group commit, so turns that finish
// together share one commit. Config.Turns.
//
// A memory write that fails is rolled back alone: the receipt and audit
// record still commit, and RecordTurn returns ErrMemoryNotRecorded.
//
// When rc.Spend lists gateway attempts still to close (a gateway with
// DeferClose), their settlements and releases join the same transaction;
// a recorder that cannot do that must be used with a gateway that closes
// its reservations itself.
type TurnRecorder interface {
	RecordTurn(ctx context.Context, e audit.Entry, rc *Receipt, memory []MemoryWrite) error
}

// ErrMemoryNotRecorded wraps the failure of a turn's memory writes when its
// receipt and audit record were committed.
var ErrMemoryNotRecorded = errors.New("shim: memory not recorded")

func isNotFound(err error) bool { return err != nil && contract.KindOf(err) == contract.KindNotFound }

// asErr is contract.AsError that keeps a nil error nil (a nil *Error in an
// error interface would not be).
func asErr(err error) error {
	if err == nil {
		return nil
	}
	return contract.AsError(err)
}

// Isolation is the caller scope of a Service's rules and receipts.
type Isolation string

// Isolations.
const (
	IsolationTenant Isolation = "tenant"
	IsolationKey    Isolation = "key"
)

// Scope is whose provisions, context entries, shim ledger and cached
// answers a caller reads and writes: its tenant, or under IsolationKey one
// key of it, so the rules one key writes never reach, and are never seen
// by, another key of the same tenant. Builtins are shared by every scope.
type Scope struct {
	Tenant contract.TenantSlot
	KeyID  string // "": the whole tenant
}

// Slot is the scope as the stores key its rows: the tenant, or
// "<tenant>/key/<key id>".
func (sc Scope) Slot() contract.TenantSlot {
	if sc.KeyID == "" {
		return sc.Tenant
	}
	return sc.Tenant + "/key/" + contract.TenantSlot(sc.KeyID)
}

// ProvisionPairLister is a Store that reads two tenants' provisions in one
// call, each ordered by id as ListProvisions orders them. With OwnReads (the
// edge, where each statement is a round trip to D1) the Service reads a
// tenant's provisions and the builtins' so when both are due again.
type ProvisionPairLister interface {
	ListProvisionPair(ctx context.Context, a, b contract.TenantSlot) (ofA, ofB []Provision, err error)
}
