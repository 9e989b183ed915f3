package trader

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// ErrConflict is returned (wrapped or not) by a Tx method when a uniqueness
// rule or a conditional update lost to another writer: a duplicate
// (tenant, decision_id), a second current strategy on one concern, a stale
// revision, an existing id, or a serialization failure the database reports.
// The transaction is then aborted: fn must return the error, and InTx returns
// it so that errors.Is(err, ErrConflict) holds. Apply retries the whole
// decision on it; the management methods answer a conflict.
var ErrConflict = errors.New("trader: conflict")

// Store persists the trader's state for every tenant. Each transaction is
// bound to one tenant and no Tx method reads or writes another tenant's rows.
type Store interface {
	// InTx runs fn in one transaction of tenant's rows. When fn returns nil
	// everything fn wrote (state, decisions, attempts, instances, audit
	// records) commits together; when fn returns an error, or a Tx method
	// failed, none of it does, and InTx returns that error. fn may run more
	// than once only if the implementation says so; Apply itself retries on
	// ErrConflict.
	InTx(ctx context.Context, tenant contract.TenantSlot, fn func(Tx) error) error
}

// Tx is one tenant's transaction. Every method maps to one or two simple SQL
// statements; every "check-then-write" rule is enforced by the database:
//
//   - strategies: primary key (tenant, id); a unique partial index on
//     (tenant, account_id, market_symbol) WHERE status IN ('active','paused')
//     keeps at most one current strategy per concern;
//   - concerns: primary key (tenant, concern_id);
//   - decisions: primary key (tenant, decision_id);
//   - attempts: primary key (tenant, id), indexed by (tenant, concern_id) and
//     (tenant, decision_id);
//   - instances: primary key (tenant, strategy_id).
//
// A method that returns an error aborts the transaction.
type Tx interface {
	// Strategy returns a strategy by id; ok is false when there is none.
	Strategy(ctx context.Context, id string) (s Strategy, ok bool, err error)
	// Strategies returns the strategies matching f, ordered by id.
	Strategies(ctx context.Context, f StrategyFilter) ([]Strategy, error)
	// InsertStrategy inserts s (whose Revision is 1). ErrConflict when the id
	// exists or s would be a second current strategy of its concern.
	InsertStrategy(ctx context.Context, s Strategy) error
	// UpdateStrategy replaces the strategy s.ID if its stored revision is
	// expect (UPDATE ... WHERE tenant=? AND id=? AND revision=?); s.Revision
	// is the new revision. ErrConflict when no row matched (missing or stale)
	// or s would be a second current strategy of its concern.
	UpdateStrategy(ctx context.Context, s Strategy, expect contract.Revision) error

	// Concern returns a concern by id; ok is false when there is none.
	Concern(ctx context.Context, id string) (c Concern, ok bool, err error)
	// LockConcern is Concern, and locks the concern's row until the
	// transaction ends (SELECT ... FOR UPDATE on Postgres; a SQLite write
	// transaction holds the database lock already), so that writers of one
	// concern's decisions and strategies run one after the other and each
	// sees what the previous one committed. ok is false, and nothing is
	// locked, when there is no such concern.
	LockConcern(ctx context.Context, id string) (c Concern, ok bool, err error)
	// Concerns returns every concern of the tenant, ordered by concern_id.
	Concerns(ctx context.Context) ([]Concern, error)
	// InsertConcern inserts c (Revision 1). ErrConflict when it exists.
	InsertConcern(ctx context.Context, c Concern) error
	// UpdateConcern replaces c.ConcernID if its stored revision is expect.
	// ErrConflict when no row matched.
	UpdateConcern(ctx context.Context, c Concern, expect contract.Revision) error

	// LookupDecision returns the stored decision for decisionID.
	LookupDecision(ctx context.Context, decisionID string) (d Decision, ok bool, err error)
	// SaveDecision stores d. ErrConflict when (tenant, decision_id) exists.
	SaveDecision(ctx context.Context, d Decision) error

	// AddAttempt stores one attempt. ErrConflict when its id exists.
	AddAttempt(ctx context.Context, a Attempt) error
	// Attempts returns the attempts matching f, newest first (by id, which
	// sorts by time).
	Attempts(ctx context.Context, f AttemptFilter) ([]Attempt, error)

	// Instance returns a strategy's runtime instance.
	Instance(ctx context.Context, strategyID string) (in Instance, ok bool, err error)
	// PutInstance inserts or replaces a strategy's runtime instance.
	PutInstance(ctx context.Context, in Instance) error

	// AppendAudit appends e to the tenant's audit chain, in this transaction.
	// e.Outcome.Identity.TenantSlot is the transaction's tenant.
	AppendAudit(ctx context.Context, e audit.Entry) (audit.Record, error)
}

// StrategyFilter selects strategies; zero fields match everything. It is
// also the input of the MCP tool list_strategies.
type StrategyFilter struct {
	ConcernID    string `json:"concern_id,omitempty"`
	AccountID    string `json:"account_id,omitempty"`
	MarketSymbol string `json:"market_symbol,omitempty"`
	Status       Status `json:"status,omitempty"`
}

// Match reports whether s is selected by f.
func (f StrategyFilter) Match(s Strategy) bool {
	return (f.ConcernID == "" || f.ConcernID == s.ConcernID()) &&
		(f.AccountID == "" || f.AccountID == s.AccountID) &&
		(f.MarketSymbol == "" || f.MarketSymbol == s.MarketSymbol) &&
		(f.Status == "" || f.Status == s.Status)
}

// StrategyRef names one strategy: the input of the MCP tool get_strategy.
type StrategyRef struct {
	ID string `json:"strategy_id"`
}

// AttemptFilter selects attempts; zero fields match everything.
type AttemptFilter struct {
	ConcernID  string
	DecisionID string
	Limit      int // at most this many (0: no limit)
}

// Match reports whether a is selected by f (Limit aside).
func (f AttemptFilter) Match(a Attempt) bool {
	return (f.ConcernID == "" || f.ConcernID == a.ConcernID) &&
		(f.DecisionID == "" || f.DecisionID == a.DecisionID)
}

// Decision is the stored outcome of a decision_id: what a replay answers.
// Only applied, noop and rejected outcomes are stored; a failed attempt
// leaves no Decision, so the id may be retried.
type Decision struct {
	DecisionID  string    `json:"decision_id"`
	ConcernID   string    `json:"concern_id"`
	Fingerprint string    `json:"fingerprint"` // sha256:<hex> of the canonical request
	Status      Outcome   `json:"status"`
	Response    Response  `json:"response"`
	AttemptID   string    `json:"attempt_id"`
	CreatedAt   time.Time `json:"created_at"`
}

// Attempt is one call of Apply, whatever came of it: the request, the
// response (validation, status, result, errors, warnings), timestamps, the
// caller and whether it overrode. Every attempt is also the payload of one
// audit record (AuditID).
type Attempt struct {
	ID         string            `json:"id"` // dec_<ULID>
	DecisionID string            `json:"decision_id,omitempty"`
	ConcernID  string            `json:"concern_id,omitempty"`
	Action     string            `json:"action,omitempty"`
	Status     Outcome           `json:"status"`
	Replay     bool              `json:"replay,omitempty"`
	DryRun     bool              `json:"dry_run"`
	Override   bool              `json:"override"`
	Identity   contract.Identity `json:"identity"`
	KeyID      string            `json:"key_id,omitempty"`
	// Request is the request as received when it was JSON within the size
	// limit (stores may compact it); RequestSHA256 and RequestBytes describe
	// the raw body always.
	Request       json.RawMessage `json:"request,omitempty"`
	RequestSHA256 string          `json:"request_sha256"`
	RequestBytes  int             `json:"request_bytes"`
	Response      Response        `json:"response"`
	ReceivedAt    time.Time       `json:"received_at"`
	DecidedAt     time.Time       `json:"decided_at"`
	AuditID       string          `json:"audit_id,omitempty"`
}
