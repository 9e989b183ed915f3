package trader

import (
	"context"
	"fmt"
	"strings"
)

// concernState is the request's concern as LockConcern read it.
type concernState struct {
	concern Concern
	found   bool
}

// evaluation is one request checked against the current state: what was
// read, the response taking shape, and the gates an override bypassed.
type evaluation struct {
	req             Request
	resp            Response
	cs              concernState
	account, market string // the concern id's parts
	okID            bool   // the concern id is account_id:market_symbol
	current, target *Strategy
	bypassed, why   []string
}

func (e *evaluation) fail(code, field, format string, args ...any) {
	e.resp.Errors = append(e.resp.Errors, Issue{Code: code, Field: field, Message: fmt.Sprintf(format, args...)})
}

// gate fails a guarded check, or records that the override bypassed it.
func (e *evaluation) gate(code, field, format string, args ...any) {
	if e.req.Override {
		e.bypassed = append(e.bypassed, code)
		e.why = append(e.why, code+" ("+fmt.Sprintf(format, args...)+")")
		return
	}
	e.fail(code, field, format, args...)
}

// evaluate computes the validation map, the gates, and the outcome of req
// against the current state, without writing: the validation rules of seed
// 000 in its order (rule 7, confidence, is ParseRequest's), one function
// each. The response's Status is Applied when the change should (or, for a
// dry run, would) be applied.
func (s *Service) evaluate(ctx context.Context, tx Tx, req Request, cs concernState) (Response, []change, error) {
	e := &evaluation{req: req, resp: newResponse(req), cs: cs}
	e.checkConcern()
	if err := e.readStrategies(ctx, tx); err != nil {
		return e.resp, nil, err
	}
	e.checkAccount()        // rule 1
	e.checkMarket()         // rule 2
	e.checkTarget()         // rules 3 and 4
	e.checkExpectedActive() // rule 5
	e.checkRuntimeSafe()    // rule 6
	e.noteOverrideAndDryRun()
	if len(e.resp.Errors) > 0 {
		e.resp.Status = Rejected
		if e.current != nil {
			e.resp.RiskMode = e.current.RiskMode
		}
		return e.resp, nil, nil
	}
	changes := e.plan()
	return e.resp, changes, nil
}

// checkConcern: the concern id is account_id:market_symbol of the request,
// and Trader knows the concern.
func (e *evaluation) checkConcern() {
	req := e.req
	e.account, e.market, e.okID = SplitConcernID(req.ConcernID)
	idMatches := e.okID && e.account == req.AccountID && e.market == req.MarketSymbol
	e.resp.Validation.ConcernMatch = idMatches && e.cs.found
	switch {
	case !idMatches:
		e.fail(CodeConcernMismatch, "concern_id", "concern_id %s is not account_id:market_symbol (%s)", req.ConcernID, ConcernID(req.AccountID, req.MarketSymbol))
	case !e.cs.found:
		e.fail(CodeConcernNotFound, "concern_id", "concern %s is not known to Trader", req.ConcernID)
	}
}

// readStrategies reads the concern's current strategy and the one acted on:
// the target of a request that names one, else (but for a switch, which
// must name one) the current strategy.
func (e *evaluation) readStrategies(ctx context.Context, tx Tx) error {
	if e.okID {
		list, err := tx.Strategies(ctx, StrategyFilter{AccountID: e.account, MarketSymbol: e.market})
		if err != nil {
			return err
		}
		for i := range list {
			if list[i].Status.Current() {
				e.current = &list[i]
				break
			}
		}
	}
	if e.req.TargetStrategyID != "" {
		t, ok, err := tx.Strategy(ctx, e.req.TargetStrategyID)
		if err != nil {
			return err
		}
		if ok {
			e.target = &t
		}
	} else if e.req.Action != ActionSwitch {
		e.target = e.current
	}
	if e.current != nil {
		e.resp.FromStrategyID = e.current.ID
	}
	e.resp.ToStrategyID = e.req.TargetStrategyID
	if e.target != nil {
		e.resp.ToStrategyID = e.target.ID
	}
	return nil
}

// checkAccount is rule 1: account_id matches the target strategy or concern.
func (e *evaluation) checkAccount() {
	req, target := e.req, e.target
	v := &e.resp.Validation
	v.AccountMatch = e.okID && e.account == req.AccountID && (target == nil || target.AccountID == req.AccountID)
	switch {
	case v.AccountMatch:
	case target != nil && target.AccountID != req.AccountID:
		e.fail(CodeAccountMismatch, "target_strategy_id", "strategy %s belongs to account %s, not %s", target.ID, target.AccountID, req.AccountID)
	default:
		e.fail(CodeAccountMismatch, "account_id", "account_id %s does not match concern %s", req.AccountID, req.ConcernID)
	}
}

// checkMarket is rule 2: market_symbol matches the target strategy or
// concern.
func (e *evaluation) checkMarket() {
	req, target := e.req, e.target
	v := &e.resp.Validation
	v.MarketMatch = e.okID && e.market == req.MarketSymbol && (target == nil || target.MarketSymbol == req.MarketSymbol)
	switch {
	case v.MarketMatch:
	case target != nil && target.MarketSymbol != req.MarketSymbol:
		e.fail(CodeMarketMismatch, "target_strategy_id", "strategy %s trades %s, not %s", target.ID, target.MarketSymbol, req.MarketSymbol)
	default:
		e.fail(CodeMarketMismatch, "market_symbol", "market_symbol %s does not match concern %s", req.MarketSymbol, req.ConcernID)
	}
}

// checkTarget is rules 3 and 4: the target exists, belongs to the request's
// concern (its account-market pair), is runnable when it is to run, and,
// unless switching, is the current strategy.
func (e *evaluation) checkTarget() {
	req, target, v := e.req, e.target, &e.resp.Validation
	v.TargetExists = target != nil
	switch {
	case target == nil && req.TargetStrategyID != "":
		e.fail(CodeTargetNotFound, "target_strategy_id", "strategy %s does not exist", req.TargetStrategyID)
		return
	case target == nil:
		e.fail(CodeNoCurrentStrategy, "concern_id", "concern %s has no active or paused strategy to %s", req.ConcernID, req.Action)
		return
	}
	v.TargetRunnable = target.Runnable
	if target.ConcernID() != req.ConcernID && v.AccountMatch && v.MarketMatch {
		e.fail(CodeConcernMismatch, "target_strategy_id", "strategy %s belongs to concern %s, not %s", target.ID, target.ConcernID(), req.ConcernID)
	}
	if (req.Action == ActionSwitch || req.Action == ActionResume) && !target.Runnable {
		e.fail(CodeTargetNotRunnable, "target_strategy_id", "strategy %s is not runnable", target.ID)
	}
	if req.Action != ActionSwitch && (e.current == nil || e.current.ID != target.ID) {
		e.fail(CodeTargetNotCurrent, "target_strategy_id", "strategy %s is not the current strategy of %s; %s acts on the current one", target.ID, req.ConcernID, req.Action)
	}
}

// checkExpectedActive is rule 5: expected_active_strategy_id, when given,
// is the current strategy unless override; without it the answer warns that
// the decision was not guarded.
func (e *evaluation) checkExpectedActive() {
	v := &e.resp.Validation
	v.ExpectedActiveMatch = true
	expected := e.req.ExpectedActiveStrategyID
	if expected == "" {
		e.resp.Warnings = append(e.resp.Warnings, Issue{Code: CodeExpectedActiveUnset, Field: "expected_active_strategy_id",
			Message: "expected_active_strategy_id was not provided; the decision was not guarded against a stale view"})
		return
	}
	v.ExpectedActiveMatch = e.current != nil && e.current.ID == expected
	if v.ExpectedActiveMatch {
		return
	}
	actual := "none"
	if e.current != nil {
		actual = e.current.ID
	}
	e.gate(CodeExpectedActiveMismatch, "expected_active_strategy_id", "expected active strategy %s, but the current strategy is %s", expected, actual)
}

// checkRuntimeSafe is rule 6, the runtime guardrail: a concern whose
// execution is degraded takes no decision unless override.
func (e *evaluation) checkRuntimeSafe() {
	if e.cs.found && e.cs.concern.ExecutionState == Degraded {
		e.gate(CodeExecutionDegraded, "concern_id", "execution of concern %s is degraded", e.req.ConcernID)
	}
}

// noteOverrideAndDryRun records an override (first among the warnings, with
// the gates it bypassed: the seed's "always record it") and a dry run.
func (e *evaluation) noteOverrideAndDryRun() {
	if e.req.Override {
		msg := "override requested; no gate needed bypassing"
		if len(e.bypassed) > 0 {
			msg = "override bypassed: " + strings.Join(e.why, "; ")
		}
		e.resp.Warnings = append([]Issue{{Code: CodeOverride, Message: msg, Bypassed: e.bypassed}}, e.resp.Warnings...)
	}
	if e.req.DryRun {
		e.resp.Warnings = append(e.resp.Warnings, Issue{Code: CodeDryRun, Message: "dry run: validated and simulated; nothing was changed"})
	}
}

// plan computes the changes of a request that passed every check: a switch
// retires the current strategy; the target takes the action's status and
// the risk mode. None is a noop (the requested state already exists).
func (e *evaluation) plan() []change {
	req, current, target := e.req, e.current, e.target
	risk := target.RiskMode
	if req.RiskMode != "" {
		risk = req.RiskMode
	}
	e.resp.RiskMode = risk
	want := target.Status
	switch req.Action {
	case ActionSwitch, ActionResume:
		want = StatusActive
	case ActionPause:
		want = StatusPaused
	}
	var changes []change
	if req.Action == ActionSwitch && current != nil && current.ID != target.ID {
		after := *current
		after.Status = StatusInactive
		changes = append(changes, change{before: *current, after: after})
	}
	if want != target.Status || risk != target.RiskMode {
		after := *target
		after.Status, after.RiskMode = want, risk
		changes = append(changes, change{before: *target, after: after})
	}
	e.resp.OK = true
	if len(changes) == 0 {
		e.resp.Status = Noop
		return nil
	}
	e.resp.Status = Applied
	if req.DryRun {
		// Applied means Trader changed state (seed 000); a dry run changes
		// nothing: noop, saying what it would have done.
		e.resp.Status = Noop
		e.resp.Result = Result{ModeChange: ModeWouldApply}
	}
	return changes
}
