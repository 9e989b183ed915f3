package executor

import "github.com/caduceus-dev/caduceus/broker"

// Envelope is the executor's return to the strategist (seed phase 5), plus
// what was resolved on the way. Aborted is null unless pre-flight failed, in
// which case Actions is empty.
type Envelope struct {
	// ContractVersion is contract.Version (HUX contract_version, 1.x.y) on
	// every envelope a tick writes. A replay answers the stored envelope as
	// it was stored: one stored before envelopes carried it has none.
	ContractVersion       string     `json:"contract_version,omitempty"`
	Aborted               *string    `json:"aborted"`
	CircuitBreakerTripped bool       `json:"circuit_breaker_tripped"`
	AccountValue          float64    `json:"account_value"`
	BuyingPower           float64    `json:"buying_power"`
	Actions               []Action   `json:"actions"`
	TickID                string     `json:"tick_id"`
	Context               RunContext `json:"context"`
	Profile               string     `json:"profile"`
	Mode                  string     `json:"mode,omitempty"`           // the manifest's, when read
	AccountNumber         string     `json:"account_number,omitempty"` // the resolved account, also on aborts
	Notes                 []string   `json:"notes,omitempty"`
	// IdempotencyKey is the key the tick ran under, if any.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Replay is true when this envelope is the stored one of an earlier
	// tick with the same idempotency key and input: no broker was called.
	Replay bool `json:"replay,omitempty"`

	// Audited reports whether the tick's audit record was written (false
	// only when Tick returned an error before or while writing it). HTTP and
	// MCP wrappers use it to decide whether to write their own record.
	Audited bool `json:"-"`
}

// Abort reasons (pre-flight). Spelled as the seed spells them.
const (
	AbortManifestPathInvalid      = "manifest_path_invalid"
	AbortManifestMissing          = "manifest_missing"
	AbortManifestInvalid          = "manifest_invalid" // front matter unreadable (not named by the seed)
	AbortManifestIdentityMismatch = "manifest_identity_mismatch"
	AbortPromotionBlocked         = "promotion_blocked"
	AbortModeMismatch             = "mode_mismatch"
	AbortAccountLockFailed        = "account_lock_failed"
	AbortBrokerUnavailable        = "broker_unavailable"
	AbortCapabilityGated          = "capability_gated"
	AbortProfileCompatibility     = "profile_compatibility_failed"
	AbortOutsideTimeWindow        = "outside_time_window"
	AbortDataAnomaly              = "data_anomaly"
)

// Action statuses.
const (
	StatusSkipped            = "skipped"
	StatusReviewed           = "reviewed"
	StatusPlaced             = "placed"
	StatusSlippageAborted    = "slippage_aborted"
	StatusReviewAnomaly      = "review_anomaly"
	StatusIntentDriftAborted = "intent_drift_aborted"
	StatusPlaceFailed        = "place_failed"
	StatusCancelled          = "cancelled"     // a cancel intent was sent and the order is cancelled
	StatusCancelFailed       = "cancel_failed" // the broker refused or failed the cancel
	// StatusAlreadyPlaced: the broker answered the placement with an order
	// it already held for the ref_id (reason ref_id_exists); order_id is
	// that order, which this tick did not place.
	StatusAlreadyPlaced = "already_placed"
)

// Skip reasons (status skipped) and other action reasons.
const (
	ReasonNoBuyingPower         = "no_buying_power"
	ReasonCircuitBreaker        = "circuit_breaker_tripped"
	ReasonDuplicateSymbol       = "duplicate_symbol_in_tick"
	ReasonOptionsInWrongProfile = "options_in_wrong_profile"
	ReasonOptionsUnsupported    = "options_unsupported" // right profile, but no options path exists
	ReasonOffAllowlist          = "off_allowlist"
	ReasonNoSellableShares      = "no_sellable_shares"
	ReasonQuoteUnavailable      = "quote_unavailable"
	ReasonBelowMinSizeAfterCap  = "below_min_size_after_cap"
	ReasonConcurrentCap         = "concurrent_cap"
	ReasonExpired               = "expired"
	ReasonBuyingPowerExhausted  = "buying_power_exhausted"
	ReasonOrderNotFound         = "order_not_found" // cancel: no such order in the account
	ReasonOrderNotOpen          = "order_not_open"  // cancel: the order is no longer open
	ReasonOriginalNotionalZero  = "original_notional_zero"
	ReasonAnomalyHalt           = "review_anomaly_halt"        // reviewed, not placed: 3 anomalies today
	ReasonNotRouted             = "not_routed"                 // reviewed, not placed: the routing table says no
	ReasonExecuteMismatch       = "execute_directive_mismatch" // reviewed, not placed: chat without a matching EXECUTE:
	ReasonRefIDExists           = "ref_id_exists"              // already_placed: the broker held an order for the ref_id
)

// Action is one RealizedAction: what became of one intent.
type Action struct {
	IntentIndex      int            `json:"intent_index"`
	Symbol           string         `json:"symbol,omitempty"`
	Side             string         `json:"side"`
	Status           string         `json:"status"`
	Reason           string         `json:"reason,omitempty"`
	OrderID          *string        `json:"order_id"`
	FirstSeenAtIndex *int           `json:"first_seen_at_index,omitempty"`
	QuantityType     string         `json:"quantity_type,omitempty"`
	Qty              float64        `json:"qty,omitempty"`
	NotionalUSD      float64        `json:"notional_usd,omitempty"`
	OriginalQty      float64        `json:"original_qty,omitempty"`
	OriginalNotional float64        `json:"original_notional_usd,omitempty"`
	ReviewPrice      float64        `json:"realized_review_price,omitempty"`
	SlippagePct      *float64       `json:"slippage_pct,omitempty"`
	DriftPct         *float64       `json:"drift_pct,omitempty"`
	Alerts           []broker.Alert `json:"alerts,omitempty"`
	RefID            string         `json:"ref_id,omitempty"`
	OrderState       string         `json:"order_state,omitempty"`
	Notes            []string       `json:"notes,omitempty"`
}
