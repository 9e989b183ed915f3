// Package trail assembles one conversation's trail: the ordered records
// every gate (relay, shim, trader, executor) wrote for it, each with its
// audit record id and whether the tenant's hash chain verifies through it.
//
// The types here are the contract between the HTTP API
// (GET /v1/trail/conversations[/{id}]), `caduceus trace` and the console.
package trail

import (
	"context"
	"time"
)

// Gate names the part of Caduceus that wrote an event.
type Gate string

// Gates.
const (
	GateRelay    Gate = "relay"
	GateShim     Gate = "shim"
	GateTrader   Gate = "trader"
	GateExecutor Gate = "executor"
)

// Event is one step of a conversation.
type Event struct {
	At       time.Time      `json:"at"`
	Gate     Gate           `json:"gate"`
	Kind     string         `json:"kind"`    // e.g. inbound_message, llm_turn, decision, tick, outbound_reply
	Summary  string         `json:"summary"` // one human line
	AuditID  string         `json:"audit_id"`
	AuditSeq int64          `json:"audit_seq"`
	Verified bool           `json:"verified"` // the tenant's chain verifies from genesis (or a signed checkpoint) through this record
	Outcome  string         `json:"outcome"`  // the audit outcome's result (allowed, refused, ...)
	RunID    string         `json:"run_id,omitempty"`
	Detail   map[string]any `json:"detail,omitempty"` // gate-specific: fired rules, spend, validation, intents and orders
}

// Trail is one conversation, oldest event first.
type Trail struct {
	ConversationID string  `json:"conversation_id"`
	SessionKey     string  `json:"session_key,omitempty"`
	Tenant         string  `json:"tenant"`
	Events         []Event `json:"events"`
	Verified       bool    `json:"verified"` // every event verified
	// Break says what is wrong with the tenant's chain, when something is
	// (events past it are not verified).
	Break string `json:"break,omitempty"`
	// Checkpoint names the signed checkpoint verification started from
	// ("" when it started from genesis).
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Summary is one line of the recent-conversations list.
type Summary struct {
	ConversationID string    `json:"conversation_id"`
	SessionKey     string    `json:"session_key,omitempty"`
	Tenant         string    `json:"tenant"`
	FirstAt        time.Time `json:"first_at"`
	LastAt         time.Time `json:"last_at"`
	Events         int       `json:"events"`
	Gates          []Gate    `json:"gates"`
}

// Reader is what the API, the CLI and the console read trails through.
// tenant "" means every tenant (admin callers only; the caller checks).
// id is a conv_ id or a session key (mapped with contract.ConversationFor
// per tenant). A conversation the tenant does not have is ErrNotFound.
type Reader interface {
	List(ctx context.Context, tenant string, limit int) ([]Summary, error)
	Get(ctx context.Context, tenant, id string) (Trail, error)
}

// ErrNotFound is returned by Reader.Get for a conversation the tenant does not have.
var ErrNotFound = errNotFound{}

type errNotFound struct{}

func (errNotFound) Error() string { return "trail: conversation not found" }
