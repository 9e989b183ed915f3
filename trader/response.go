package trader

import "encoding/json"

// Action is a control action of the contract.
type Action string

// The four supported actions. ActionKeep is named only to refuse it: keep is
// not a Trader write action (Hermes records it on its own side).
const (
	ActionSwitch      Action = "switch"
	ActionPause       Action = "pause"
	ActionResume      Action = "resume"
	ActionSetRiskMode Action = "set_risk_mode"
	ActionKeep        Action = "keep"
)

// Supported reports whether a is one of the four write actions.
func (a Action) Supported() bool {
	return a == ActionSwitch || a == ActionPause || a == ActionResume || a == ActionSetRiskMode
}

// Outcome is the status of a control decision response.
type Outcome string

// Response statuses.
const (
	Applied  Outcome = "applied"  // validation passed and Trader changed state
	Rejected Outcome = "rejected" // refused by validation or a safety gate
	Noop     Outcome = "noop"     // nothing changed: the requested state already exists, or a dry run passed
	Failed   Outcome = "failed"   // attempted, but a runtime or persistence failure rolled it back
)

// Stable issue codes. They are append-only: a code, once published, keeps
// its meaning.
const (
	// Not a request at all.
	CodeBodyTooLarge = "body_too_large"
	CodeBadJSON      = "bad_json"
	CodeNotAnObject  = "not_an_object"

	// Shape of the request.
	CodeUnknownField   = "unknown_field"
	CodeDuplicateField = "duplicate_field"
	CodeWrongType      = "wrong_type"
	CodeMissingField   = "missing_field"
	CodeInvalidField   = "invalid_field"
	CodeSchemaInvalid  = "schema_invalid"

	// Action, conditional fields and confidence.
	CodeUnsupportedAction      = "unsupported_action"
	CodeUnknownRiskMode        = "unknown_risk_mode"
	CodeConfidenceOutOfRange   = "confidence_out_of_range"
	CodeDecisionIDConflict     = "decision_id_conflict"
	CodeConcernMismatch        = "concern_mismatch"
	CodeConcernNotFound        = "concern_not_found"
	CodeAccountMismatch        = "account_mismatch"
	CodeMarketMismatch         = "market_mismatch"
	CodeTargetNotFound         = "target_not_found"
	CodeNoCurrentStrategy      = "no_current_strategy"
	CodeTargetNotCurrent       = "target_not_current"
	CodeTargetNotRunnable      = "target_not_runnable"
	CodeExpectedActiveMismatch = "expected_active_mismatch"
	CodeExecutionDegraded      = "execution_degraded"

	// Failures.
	CodeRuntimeFailed    = "runtime_failed"
	CodeStoreFailed      = "store_failed"
	CodeConcurrentUpdate = "concurrent_update"

	// Warnings.
	//
	// CodeIdempotentReplay is no longer sent: a replay is the first answer
	// unchanged plus replayed: true. It stays reserved.
	CodeIdempotentReplay    = "idempotent_replay"
	CodeOverride            = "override"
	CodeExpectedActiveUnset = "expected_active_not_provided"
	CodeDryRun              = "dry_run"
	CodeNotReconciled       = "not_reconciled"
)

// Issue is one entry of a response's errors or warnings.
type Issue struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Bypassed lists the error codes an override let through (only on the
	// override warning).
	Bypassed []string `json:"bypassed,omitempty"`
}

// Validation is the response's validation map. A check that was not reached
// (the request was refused before it) is false.
type Validation struct {
	ConcernMatch        bool `json:"concern_match"`
	AccountMatch        bool `json:"account_match"`
	MarketMatch         bool `json:"market_match"`
	ExpectedActiveMatch bool `json:"expected_active_match"`
	TargetExists        bool `json:"target_exists"`
	TargetRunnable      bool `json:"target_runnable"`
}

// Mode changes reported in Result.ModeChange.
const (
	ModeApplied    = "applied"     // the state change was committed
	ModeWouldApply = "would_apply" // dry run: it would have been applied
	ModeNone       = "none"        // nothing to change (noop or rejected)
	ModeRolledBack = "rolled_back" // failed: the change was rolled back
)

// Result is what the decision did.
type Result struct {
	ModeChange string `json:"mode_change"`
	Reconciled bool   `json:"reconciled"`
}

// Response is the control decision response of the seed.
type Response struct {
	// ContractVersion is contract.Version (HUX contract_version, 1.x.y) on
	// every response written. A replay answers the stored response as it
	// was stored: one stored before responses carried it has none.
	ContractVersion string     `json:"contract_version,omitempty"`
	OK              bool       `json:"ok"`
	Status          Outcome    `json:"status"`
	DecisionID      string     `json:"decision_id"`
	ConcernID       string     `json:"concern_id"`
	Action          Action     `json:"action"`
	FromStrategyID  string     `json:"from_strategy_id,omitempty"`
	ToStrategyID    string     `json:"to_strategy_id,omitempty"`
	RiskMode        string     `json:"risk_mode,omitempty"`
	DryRun          bool       `json:"dry_run"`
	Validation      Validation `json:"validation"`
	Warnings        []Issue    `json:"warnings"`
	Errors          []Issue    `json:"errors"`
	Result          Result     `json:"result"`
	AppliedAt       string     `json:"applied_at,omitempty"`
	// Replayed is true on the answer to a repeated decision_id: the first
	// answer, unchanged (its status included), with this field added. It
	// is absent from the first answer.
	Replayed bool `json:"replayed,omitempty"`
}

// MarshalJSON keeps warnings and errors arrays, never null.
func (r Response) MarshalJSON() ([]byte, error) {
	type plain Response
	if r.Warnings == nil {
		r.Warnings = []Issue{}
	}
	if r.Errors == nil {
		r.Errors = []Issue{}
	}
	return json.Marshal(plain(r))
}

// Replay reports whether r is a stored response answered again for a repeated
// decision_id.
func (r Response) Replay() bool { return r.Replayed }

// NotARequest reports whether r refuses a body that is not a control decision
// request at all (too large, not JSON, not a JSON object). HTTP answers those
// with 400; every other response, whatever its status, with 200.
func (r Response) NotARequest() bool {
	for _, e := range r.Errors {
		switch e.Code {
		case CodeBodyTooLarge, CodeBadJSON, CodeNotAnObject:
			return true
		}
	}
	return false
}

// ErrorCodes returns the codes of r's errors, in order.
func (r Response) ErrorCodes() []string {
	codes := make([]string, len(r.Errors))
	for i, e := range r.Errors {
		codes[i] = e.Code
	}
	return codes
}

func (r Response) hasWarning(code string) bool {
	for _, w := range r.Warnings {
		if w.Code == code {
			return true
		}
	}
	return false
}
