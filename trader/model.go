package trader

import (
	"regexp"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Status is the lifecycle status of a strategy. A strategy that is active or
// paused is the "current" one of its concern; at most one per concern is.
type Status string

// Strategy statuses.
const (
	StatusActive   Status = "active"
	StatusPaused   Status = "paused"
	StatusInactive Status = "inactive"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	return s == StatusActive || s == StatusPaused || s == StatusInactive
}

// Current reports whether a strategy in status s is its concern's current
// strategy (active or paused).
func (s Status) Current() bool { return s == StatusActive || s == StatusPaused }

// ExecutionState is the execution health of a concern.
type ExecutionState string

// Execution states of a concern.
const (
	Healthy  ExecutionState = "healthy"
	Degraded ExecutionState = "degraded"
)

// Valid reports whether e is a known execution state.
func (e ExecutionState) Valid() bool { return e == Healthy || e == Degraded }

// Strategy is a trading strategy bound to one account-market concern.
type Strategy struct {
	ID           string            `json:"id"`
	AccountID    string            `json:"account_id"`
	MarketSymbol string            `json:"market_symbol"`
	Name         string            `json:"name"`
	Status       Status            `json:"status"`
	Runnable     bool              `json:"runnable"`
	RiskMode     string            `json:"risk_mode"`
	Revision     contract.Revision `json:"revision"`
	UpdatedAt    time.Time         `json:"updated_at"`
}

// ConcernID returns the strategy's concern id, "account_id:market_symbol".
func (s Strategy) ConcernID() string { return ConcernID(s.AccountID, s.MarketSymbol) }

// Concern is an account-market pair Hermes acts on, with its execution state.
type Concern struct {
	ConcernID      string            `json:"concern_id"`
	ExecutionState ExecutionState    `json:"execution_state"`
	Revision       contract.Revision `json:"revision"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

// Instance is the runtime instance of a strategy as the default Runtime keeps
// it: the state it should be in and the state it was last driven to.
type Instance struct {
	StrategyID string    `json:"strategy_id"`
	Desired    Status    `json:"desired"`
	Actual     Status    `json:"actual"`
	RiskMode   string    `json:"risk_mode"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// ConcernID joins an account id and a market symbol into a concern id.
func ConcernID(account, market string) string { return account + ":" + market }

// SplitConcernID splits "account:market". ok is false unless the id has
// exactly one colon with a valid account id and market symbol on each side.
func SplitConcernID(id string) (account, market string, ok bool) {
	account, market, found := strings.Cut(id, ":")
	if !found || !validKey(account) || !validKey(market) {
		return "", "", false
	}
	return account, market, true
}

// DefaultRiskModes is the risk mode set used when none is configured; the
// first is the default of a new strategy.
var DefaultRiskModes = []string{"normal", "reduced", "defensive"}

var (
	keyRE      = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,64}$`)  // account id, market symbol
	refRE      = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)   // a strategy id in a request
	decisionRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`) // decision_id
	riskRE     = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)   // a risk mode name
	uuidRE     = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	rfc3339RE  = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$`)
)

func validKey(s string) bool { return keyRE.MatchString(s) }

// ValidDecisionID reports whether s is an acceptable decision_id.
func ValidDecisionID(s string) bool { return decisionRE.MatchString(s) }

// ValidStrategyID reports whether s is a strategy id (a UUID).
func ValidStrategyID(s string) bool { return uuidRE.MatchString(s) }

// microsecond precision is what the stores keep.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
