package shim

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// The turn's memory contract: what an Observer that is a TurnPlanner
// (shim/memory.Memory) asks a TurnRecorder to write in a turn's own
// transaction, and the ledger a provsync.Syncer keeps. The rows are defined here so
// that the proxy and the stores agree on them without importing the memory
// package.

// EntityRef is one extracted entity: a kind and a normalized value.
type EntityRef struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// RuleOutcome is what became of one provision fired on one turn.
type RuleOutcome struct {
	Receipt      string `json:"receipt"` // the turn's receipt id
	Conversation string `json:"conversation"`
	Subject      string `json:"subject"`
	Project      string `json:"project"`
	Provision    string `json:"provision"`
	Version      int64  `json:"version"`
	Builtin      bool   `json:"builtin,omitempty"`
	Outcome      string `json:"outcome"`
	// ErrorSignature is the first error signature of the next turn (retry_error only).
	ErrorSignature string `json:"error_signature,omitempty"`
	// NextReceipt is the receipt of the turn that resolved the outcome.
	NextReceipt string `json:"next_receipt,omitempty"`
	FiredAt     string `json:"fired_at"`
	ResolvedAt  string `json:"resolved_at,omitempty"`
}

// MemoryWrite is one turn's memory update: touch Entities; then, when
// Conversation is not empty, resolve the conversation's pending outcomes of
// other receipts to Outcome (with Signature, and Receipt as the next
// receipt) and add Pending.
type MemoryWrite struct {
	Tenant             contract.TenantSlot
	Subject, Project   string
	Entities           []EntityRef
	Conversation       string
	Receipt            string
	Outcome, Signature string
	Pending            []RuleOutcome
	At                 time.Time
}

// TurnPlanner is an Observer whose work on a turn is a MemoryWrite. With
// Config.Turns, the Service asks it for that write and commits it in the
// turn's own transaction, with the receipt and its audit record, instead
// of calling ObserveTurn.
type TurnPlanner interface {
	Observer
	PlanTurn(t Turn) (MemoryWrite, bool)
}

// SyncMark remembers what the last sync of one record did: the source
// version it took and the local version that write produced. A local
// version other than LocalVersion means the record was edited locally
// since, and a sync will not overwrite it.
type SyncMark struct {
	Kind          string `json:"kind"` // provision, context
	ID            string `json:"id"`
	SourceVersion int64  `json:"source_version"`
	LocalVersion  int64  `json:"local_version"`
}

// SyncLedger keeps SyncMarks per tenant (part of memory.Store). PutSyncMark
// is one upsert on (tenant, kind, id).
type SyncLedger interface {
	// GetSyncMark returns the mark of a record, and false when there is none.
	GetSyncMark(ctx context.Context, tenant contract.TenantSlot, kind, id string) (SyncMark, bool, error)
	// PutSyncMark stores m, replacing the record's previous mark.
	PutSyncMark(ctx context.Context, tenant contract.TenantSlot, m SyncMark) error
}

// Observer watches proxied turns (the hook for entity memory and outcomes).
type Observer interface {
	ObserveTurn(ctx context.Context, t Turn)
}

// Turn is one proxied request as an Observer sees it.
type Turn struct {
	Caller       contract.Caller
	Conversation string
	Project      string        // X-Caduceus-Project, "" when absent
	Request      *wire.Request // nil when the body did not parse
	Receipt      Receipt
}
