package trader

import (
	"context"
	"errors"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Audit actions of the management writes.
const (
	AuditPutStrategy = "trader.put_strategy"
	AuditPutConcern  = "trader.put_concern"
	AuditImport      = "trader.import"
)

// checkStrategy validates an operator-supplied strategy.
func (s *Service) checkStrategy(st Strategy) error {
	switch {
	case !ValidStrategyID(st.ID):
		return contract.FieldError("id", CodeInvalidField, "trader: strategy id %q is not a UUID", clip(st.ID, 64))
	case !validKey(st.AccountID):
		return contract.FieldError("account_id", CodeInvalidField, "trader: account_id %q must be 1 to 64 characters of A-Z a-z 0-9 . _ / -", clip(st.AccountID, 64))
	case !validKey(st.MarketSymbol):
		return contract.FieldError("market_symbol", CodeInvalidField, "trader: market_symbol %q must be 1 to 64 characters of A-Z a-z 0-9 . _ / -", clip(st.MarketSymbol, 64))
	case st.Name == "" || len(st.Name) > 120:
		return contract.FieldError("name", CodeInvalidField, "trader: strategy name must be 1 to 120 bytes")
	case !st.Status.Valid():
		return contract.FieldError("status", CodeInvalidField, "trader: status %q is not active, paused or inactive", clip(string(st.Status), 32))
	case !s.knownRiskMode(st.RiskMode):
		return contract.FieldError("risk_mode", CodeUnknownRiskMode, "trader: risk_mode %q is not one of %v", clip(st.RiskMode, 32), s.risk)
	}
	return nil
}

func checkConcern(c Concern) error {
	if _, _, ok := SplitConcernID(c.ConcernID); !ok {
		return contract.FieldError("concern_id", CodeInvalidField, "trader: concern_id %q is not account_id:market_symbol", clip(c.ConcernID, 130))
	}
	if !c.ExecutionState.Valid() {
		return contract.FieldError("execution_state", CodeInvalidField, "trader: execution_state %q is not healthy or degraded", clip(string(c.ExecutionState), 32))
	}
	return nil
}

// PutStrategy creates or replaces a strategy (PUT /v1/trader/strategies/{id}).
// ifMatch 0 creates a strategy that must not exist yet; ifMatch n replaces
// the strategy only if its revision is n. Revision and UpdatedAt of st are
// ignored. Its concern is created (healthy) if missing. A change of status or
// risk mode is reconciled through the Runtime in the same transaction, and
// the write is audited (trader.put_strategy).
//
// It returns the stored strategy, or: a deny Error without the configure
// scope; an invalid Error for a malformed strategy or a change of its
// account_id or market_symbol; a precondition Error (code if_match_required)
// when the strategy exists and ifMatch is 0; a conflict Error (code
// revision_mismatch) when ifMatch does not match, or (code
// concern_has_current) when st would be a second active or paused strategy of
// its concern; an internal Error when the store or runtime fails.
func (s *Service) PutStrategy(ctx context.Context, caller contract.Caller, st Strategy, ifMatch contract.Revision) (Strategy, error) {
	if err := authorize(caller, contract.ScopeConfigure); err != nil {
		return Strategy{}, err
	}
	ctx = context.WithoutCancel(ctx)
	out, err := s.putStrategy(ctx, caller, st, ifMatch)
	return out, s.finishWrite(ctx, caller, AuditPutStrategy, "trader/strategy/"+st.ID, err)
}

func (s *Service) putStrategy(ctx context.Context, caller contract.Caller, st Strategy, ifMatch contract.Revision) (Strategy, error) {
	if err := s.checkStrategy(st); err != nil {
		return Strategy{}, err
	}
	var out Strategy
	var refusal error
	err := s.store.InTx(ctx, caller.Identity.TenantSlot, func(tx Tx) error {
		refusal = nil
		now := stamp(s.now())
		if err := ensureConcern(ctx, tx, st.ConcernID(), now); err != nil {
			return err
		}
		old, exists, err := tx.Strategy(ctx, st.ID)
		if err != nil {
			return err
		}
		refusal = revisionMismatch("strategy", st.ID, exists, old.Revision, ifMatch)
		if refusal == nil && exists && (old.AccountID != st.AccountID || old.MarketSymbol != st.MarketSymbol) {
			refusal = contract.FieldError("account_id", "immutable_field", "trader: a strategy's account_id and market_symbol cannot change (%s)", old.ConcernID())
		}
		if refusal != nil {
			return refusal
		}
		if refusal, err = s.checkCurrent(ctx, tx, st); err != nil {
			return err
		}
		if refusal != nil {
			return refusal
		}
		st.UpdatedAt = now
		if exists {
			st.Revision = old.Revision + 1
			err = tx.UpdateStrategy(ctx, st, old.Revision)
		} else {
			st.Revision = 1
			err = tx.InsertStrategy(ctx, st)
		}
		if err != nil {
			return err
		}
		if !exists || old.Status != st.Status || old.RiskMode != st.RiskMode {
			if _, err := s.rt.Reconcile(ctx, tx, st); err != nil {
				return err
			}
		}
		out = st
		_, err = tx.AppendAudit(ctx, s.entry(caller, AuditPutStrategy, "trader/strategy/"+st.ID, contract.OutcomeAllow, "put", now, contract.ActorOperator, putPayload("strategy", st, old, exists)))
		return err
	})
	if refusal != nil {
		return Strategy{}, refusal
	}
	return out, err
}

// checkCurrent refuses st when another strategy of its concern is current
// and st would be too. The unique partial index is the real guard; this
// names the culprit.
func (s *Service) checkCurrent(ctx context.Context, tx Tx, st Strategy) (error, error) {
	if !st.Status.Current() {
		return nil, nil
	}
	list, err := tx.Strategies(ctx, StrategyFilter{AccountID: st.AccountID, MarketSymbol: st.MarketSymbol})
	if err != nil {
		return nil, err
	}
	for _, o := range list {
		if o.ID != st.ID && o.Status.Current() {
			return contract.Conflictf("concern_has_current", "trader: concern %s already has a current strategy %s (%s); make it inactive first or switch", st.ConcernID(), o.ID, o.Status), nil
		}
	}
	return nil, nil
}

// ensureConcern locks the concern, creating it healthy if it does not exist.
func ensureConcern(ctx context.Context, tx Tx, id string, now time.Time) error {
	_, ok, err := tx.LockConcern(ctx, id)
	if err != nil || ok {
		return err
	}
	return tx.InsertConcern(ctx, Concern{ConcernID: id, ExecutionState: Healthy, Revision: 1, UpdatedAt: now})
}

// PutConcern creates or replaces a concern (PUT /v1/trader/concerns/{id}),
// typically to mark its execution healthy or degraded. ifMatch works as for
// PutStrategy. The write is audited (trader.put_concern).
//
// It returns the stored concern, or: a deny Error without the configure
// scope; an invalid Error for a malformed concern; a precondition Error
// (code if_match_required) when the concern exists and ifMatch is 0; a
// conflict Error (code revision_mismatch) when ifMatch does not match; an
// internal Error when the store fails.
func (s *Service) PutConcern(ctx context.Context, caller contract.Caller, c Concern, ifMatch contract.Revision) (Concern, error) {
	if err := authorize(caller, contract.ScopeConfigure); err != nil {
		return Concern{}, err
	}
	ctx = context.WithoutCancel(ctx)
	out, err := s.putConcern(ctx, caller, c, ifMatch)
	return out, s.finishWrite(ctx, caller, AuditPutConcern, "trader/concern/"+c.ConcernID, err)
}

func (s *Service) putConcern(ctx context.Context, caller contract.Caller, c Concern, ifMatch contract.Revision) (Concern, error) {
	if err := checkConcern(c); err != nil {
		return Concern{}, err
	}
	var out Concern
	var refusal error
	err := s.store.InTx(ctx, caller.Identity.TenantSlot, func(tx Tx) error {
		refusal = nil
		now := stamp(s.now())
		old, exists, err := tx.LockConcern(ctx, c.ConcernID)
		if err != nil {
			return err
		}
		if refusal = revisionMismatch("concern", c.ConcernID, exists, old.Revision, ifMatch); refusal != nil {
			return refusal
		}
		c.UpdatedAt = now
		if exists {
			c.Revision = old.Revision + 1
			err = tx.UpdateConcern(ctx, c, old.Revision)
		} else {
			c.Revision = 1
			err = tx.InsertConcern(ctx, c)
		}
		if err != nil {
			return err
		}
		out = c
		_, err = tx.AppendAudit(ctx, s.entry(caller, AuditPutConcern, "trader/concern/"+c.ConcernID, contract.OutcomeAllow, "put", now, contract.ActorOperator, putPayload("concern", c, old, exists)))
		return err
	})
	if refusal != nil {
		return Concern{}, refusal
	}
	return out, err
}

// revisionMismatch is the refusal of a put of noun id whose If-Match
// (ifMatch; 0: none) does not fit what is stored (whether it exists, at
// which revision), or nil when it fits.
func revisionMismatch(noun, id string, exists bool, stored, ifMatch contract.Revision) error {
	switch {
	case exists && ifMatch == 0:
		return contract.PreconditionRequiredf(contract.CodeIfMatchRequired, "trader: %s %s exists at revision %d; send If-Match", noun, id, stored)
	case !exists && ifMatch != 0:
		return contract.Conflictf(contract.CodeRevisionMismatch, "trader: %s %s does not exist; send no If-Match to create it", noun, id)
	case exists && stored != ifMatch:
		return contract.Conflictf(contract.CodeRevisionMismatch, "trader: %s %s is at revision %d, not %d", noun, id, stored, ifMatch)
	}
	return nil
}

// putPayload is the audit payload of a put: the value written under noun
// and, when it replaced one, the previous value.
func putPayload(noun string, written, previous any, replaced bool) map[string]any {
	payload := map[string]any{noun: written}
	if replaced {
		payload["previous"] = previous
	}
	return payload
}

// finishWrite turns a management write's error into the error returned,
// auditing a refusal (conflict, invalid) in a transaction of its own. A
// store conflict that got past the checks (a concurrent writer) is a
// conflict.
func (s *Service) finishWrite(ctx context.Context, caller contract.Caller, action, resource string, err error) error {
	if err == nil {
		return nil
	}
	ce, ok := errors.AsType[*contract.Error](err)
	switch {
	case ok && ce.Kind != contract.KindInternal:
	case errors.Is(err, ErrConflict):
		ce = contract.Conflictf("concurrent_update", "trader: %s changed concurrently; read it again and retry", resource)
	default:
		return s.internal(action, err)
	}
	now := stamp(s.now())
	aerr := s.inTx(ctx, caller.Identity.TenantSlot, func(tx Tx) error {
		_, err := tx.AppendAudit(ctx, s.entry(caller, action, resource, ce.Kind.Outcome(), ce.Code, now, contract.ActorOperator, map[string]any{"error": ce.Message}))
		return err
	})
	if aerr != nil {
		return s.internal("audit refusal", aerr)
	}
	return ce
}

// GetStrategy returns one strategy of tenant (MCP get_strategy). It returns a
// not_found Error when there is none, an invalid Error for a malformed tenant
// and an internal Error when the store fails.
func (s *Service) GetStrategy(ctx context.Context, tenant contract.TenantSlot, id string) (Strategy, error) {
	var st Strategy
	var ok bool
	err := s.view(ctx, tenant, "get strategy", func(tx Tx) (err error) {
		st, ok, err = tx.Strategy(ctx, id)
		return err
	})
	if err == nil && !ok {
		err = contract.NotFoundf("strategy_not_found", "trader: no strategy %s", clip(id, 64))
	}
	return st, err
}

// ListStrategies returns the strategies of tenant matching f, ordered by id
// (MCP list_strategies). It returns an invalid Error for a malformed tenant
// or status filter and an internal Error when the store fails.
func (s *Service) ListStrategies(ctx context.Context, tenant contract.TenantSlot, f StrategyFilter) ([]Strategy, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, contract.FieldError("status", CodeInvalidField, "trader: status %q is not active, paused or inactive", clip(string(f.Status), 32))
	}
	var list []Strategy
	err := s.view(ctx, tenant, "list strategies", func(tx Tx) (err error) {
		list, err = tx.Strategies(ctx, f)
		return err
	})
	if err == nil && list == nil {
		list = []Strategy{}
	}
	return list, err
}

// StrategyList is the answer of the MCP tool list_strategies: an object, as
// MCP structured content must be.
type StrategyList struct {
	Strategies []Strategy `json:"strategies"`
}

// GetConcern returns one concern of tenant. It returns a not_found Error when
// there is none, an invalid Error for a malformed tenant and an internal
// Error when the store fails.
func (s *Service) GetConcern(ctx context.Context, tenant contract.TenantSlot, id string) (Concern, error) {
	var c Concern
	var ok bool
	err := s.view(ctx, tenant, "get concern", func(tx Tx) (err error) {
		c, ok, err = tx.Concern(ctx, id)
		return err
	})
	if err == nil && !ok {
		err = contract.NotFoundf("concern_not_found", "trader: no concern %s", clip(id, 130))
	}
	return c, err
}

// ListConcerns returns every concern of tenant, ordered by id. It returns an
// invalid Error for a malformed tenant and an internal Error when the store
// fails.
func (s *Service) ListConcerns(ctx context.Context, tenant contract.TenantSlot) ([]Concern, error) {
	var list []Concern
	err := s.view(ctx, tenant, "list concerns", func(tx Tx) (err error) {
		list, err = tx.Concerns(ctx)
		return err
	})
	return list, err
}

// DecisionView is a decision_id read back: the stored decision (nil when no
// attempt with that id was ever applied, noop or rejected after lookup) and
// every attempt that carried the id, newest first.
type DecisionView struct {
	Decision *Decision `json:"decision"`
	Attempts []Attempt `json:"attempts"`
}

// Decision reads a decision_id back (GET /v1/trader/decisions/{id}). It
// returns a not_found Error when neither a stored decision nor any attempt
// has that id, an invalid Error for a malformed tenant and an internal Error
// when the store fails.
func (s *Service) Decision(ctx context.Context, tenant contract.TenantSlot, decisionID string) (DecisionView, error) {
	var v DecisionView
	err := s.view(ctx, tenant, "read decision", func(tx Tx) error {
		d, ok, err := tx.LookupDecision(ctx, decisionID)
		if err != nil {
			return err
		}
		if ok {
			v.Decision = &d
		}
		v.Attempts, err = tx.Attempts(ctx, AttemptFilter{DecisionID: decisionID})
		return err
	})
	if v.Attempts == nil {
		v.Attempts = []Attempt{}
	}
	if err == nil && v.Decision == nil && len(v.Attempts) == 0 {
		err = contract.NotFoundf("decision_not_found", "trader: no decision %s", clip(decisionID, 128))
	}
	return v, err
}

// History returns the attempts of tenant, newest first, of one concern when
// concernID is not empty, at most limit of them when limit > 0 (caduceus
// trader history). It returns an invalid Error for a malformed tenant and an
// internal Error when the store fails.
func (s *Service) History(ctx context.Context, tenant contract.TenantSlot, concernID string, limit int) ([]Attempt, error) {
	var list []Attempt
	err := s.view(ctx, tenant, "read history", func(tx Tx) (err error) {
		list, err = tx.Attempts(ctx, AttemptFilter{ConcernID: concernID, Limit: max(limit, 0)})
		return err
	})
	if err == nil && list == nil {
		list = []Attempt{}
	}
	return list, err
}

// view runs a read in a transaction.
func (s *Service) view(ctx context.Context, tenant contract.TenantSlot, op string, fn func(Tx) error) error {
	if err := checkTenant(tenant); err != nil {
		return err
	}
	if err := s.store.InTx(ctx, tenant, fn); err != nil {
		return s.internal(op, err)
	}
	return nil
}
