package shim

import (
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Decision is what the shim did with a request.
type Decision string

// Decisions.
const (
	DecisionForward Decision = "forward"          // sent upstream (shimmed or not)
	DecisionDirect  Decision = "respond_directly" // answered by a provision
	DecisionRefused Decision = "refused"          // refused before any upstream call
	DecisionFailed  Decision = "failed"           // the upstream could not be reached
)

// Fired is a provision whose triggers hit.
type Fired struct {
	ID         string   `json:"id"`
	Version    int64    `json:"version"`
	Action     Action   `json:"action"`
	Tier       int      `json:"tier"`   // the tier that decided: 1, 2 or 3
	Reason     string   `json:"reason"` // e.g. "keyword:deploy", "semantic:0.82", "micromodel:0.91"
	Builtin    bool     `json:"builtin,omitempty"`
	Confidence *float64 `json:"confidence,omitempty"`
}

// Skipped is a provision that applied to the request but did not act, and why.
type Skipped struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
	Reason  string `json:"reason"`
}

// Shimmed is one context entry rendered into a request.
type Shimmed struct {
	Provision string `json:"provision"`
	Ref       string `json:"ref"`
	Version   int64  `json:"version"`
	SHA256    string `json:"sha256"`
	Chars     int    `json:"chars"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Refusal says why a request was refused.
type Refusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Spend is what a request forwarded through the gateway reserved and
// settled, attempt by attempt, in microdollars.
type Spend struct {
	Plan     string            `json:"plan,omitempty"`
	Attempts []gateway.Attempt `json:"attempts"`
	Reserved int64             `json:"reserved_microdollars"`
	Settled  int64             `json:"settled_microdollars"`
}

// ReceiptContractVersion is the version of shim.receipt.schema.json every
// receipt is written under (seed 002 $defs/contract_version, 1.x.y): a new
// minor version adds optional fields, a new patch version only clarifies.
//
//   - 1.0.0 (2026-12): receipts carry contract_version; the route carries
//     the reasoning effort the request asked for.
//   - 1.1.0 (2027-01): guardrails (each finding's direction, kind, rule,
//     action and count, never a value), and the HUX sensitivity and
//     redaction of a turn a guardrails policy applied to.
const ReceiptContractVersion = "1.1.0"

// Receipt is the record of one proxied request (DESIGN §7), stored per
// tenant and appended to the audit trail as the payload of a shim.proxy
// outcome.
type Receipt struct {
	// ContractVersion is ReceiptContractVersion on every receipt written
	// (absent on receipts written before it was carried).
	ContractVersion string              `json:"contract_version,omitempty"`
	ID              string              `json:"id"`
	At              string              `json:"at"`
	Tenant          contract.TenantSlot `json:"tenant"`
	Subject         string              `json:"subject"`
	KeyID           string              `json:"key_id,omitempty"`
	Harness         string              `json:"harness,omitempty"`
	Protocol        wire.Protocol       `json:"protocol"`
	Model           string              `json:"model,omitempty"`
	Stream          bool                `json:"stream,omitempty"`
	ConversationID  string              `json:"conversation_id,omitempty"`
	Decision        Decision            `json:"decision"`
	Refusal         *Refusal            `json:"refusal,omitempty"`
	Evaluated       int                 `json:"evaluated"`
	Fired           []Fired             `json:"fired"`
	Skipped         []Skipped           `json:"skipped"`
	Shimmed         []Shimmed           `json:"shimmed"`
	MissingRefs     []string            `json:"missing_refs,omitempty"`
	RequestSHA256   string              `json:"request_sha256,omitempty"`
	ForwardedSHA256 string              `json:"forwarded_sha256,omitempty"`
	ResponseSHA256  string              `json:"response_sha256,omitempty"`
	// ResponseID is the id of the Responses API answer the client got
	// (resp_...): GET /v1/responses/{id} and its cancel go to the route
	// that served it.
	ResponseID string `json:"response_id,omitempty"`
	// CacheHit is the receipt of the request whose answer the plan's cache
	// replayed to this one (nothing was called or charged).
	CacheHit       string `json:"cache_hit,omitempty"`
	Upstream       string `json:"upstream,omitempty"`
	UpstreamStatus int    `json:"upstream_status,omitempty"`
	// UpstreamWire is the wire the upstream that answered spoke when the
	// turn was translated (Protocol is the client's): set only then.
	UpstreamWire   wire.Protocol `json:"upstream_wire,omitempty"`
	OverheadMicros int64         `json:"overhead_us"`
	// Broken: the upstream broke its streamed answer off after the client
	// began receiving it; the client's response was cut off the same way.
	Broken bool `json:"broken,omitempty"`
	// Spend is the gateway's account of the request: every attempt with
	// its reserved and settled microdollars (absent without gateway routes).
	Spend   *Spend `json:"spend,omitempty"`
	AuditID string `json:"audit_id,omitempty"`
	// Route is the HUX route (seed 002): the model asked for (the protocol
	// when the request named none), the reasoning effort it asked for
	// (wire.PeekEffort), the model identity that served it
	// ("openai/gpt-4.1", not the route's name) and its provider class.
	Route *contract.Route `json:"route,omitempty"`
	// Guardrails is what the guardrails found in the request and the
	// answer (docs/guardrails.md): kinds, rules, actions and counts, never
	// a value. Absent when no policy applied or nothing was found.
	Guardrails []guard.Record `json:"guardrails,omitempty"`
	// Sensitivity and Redaction are the HUX fields of a turn a guardrails
	// policy applied to: restricted when a secret was found, personal
	// otherwise; partial when values were replaced with placeholders.
	Sensitivity contract.Sensitivity `json:"sensitivity,omitempty"`
	Redaction   *contract.Redaction  `json:"redaction,omitempty"`
}
