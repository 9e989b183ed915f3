package trader_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

type applyCase struct {
	name     string
	setup    func(t *testing.T, e *env)
	body     []byte
	status   trader.Outcome
	errors   []string // codes, in order
	fields   []string // the errors' fields, when checked
	warnings []string // codes, in order
	changed  bool     // the strategies changed
	check    func(t *testing.T, e *env, r trader.Response)
}

func pausedA(t *testing.T, e *env) {
	e.set(t, sA, func(s *trader.Strategy) { s.Status = trader.StatusPaused })
}

func applyCases() []applyCase {
	var cases []applyCase
	add := func(c applyCase) { cases = append(cases, c) }

	// The four actions: applied.
	add(applyCase{name: "switch_applied", body: body(nil), status: trader.Applied, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			a, b := e.strategy(t, sA), e.strategy(t, sB)
			if a.Status != trader.StatusInactive || b.Status != trader.StatusActive || a.Revision != 2 || b.Revision != 2 {
				t.Errorf("after switch: A %s r%d, B %s r%d", a.Status, a.Revision, b.Status, b.Revision)
			}
			if r.FromStrategyID != sA || r.ToStrategyID != sB || r.AppliedAt == "" || !r.Result.Reconciled || r.Result.ModeChange != trader.ModeApplied {
				t.Errorf("response: %+v", r)
			}
		}})
	add(applyCase{name: "switch_sets_risk_mode", body: body(map[string]any{"risk_mode": "reduced"}), status: trader.Applied, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if b := e.strategy(t, sB); b.RiskMode != "reduced" || r.RiskMode != "reduced" {
				t.Errorf("risk mode: strategy %s, response %s", b.RiskMode, r.RiskMode)
			}
		}})
	add(applyCase{name: "switch_from_nothing", setup: func(t *testing.T, e *env) {
		e.set(t, sA, func(s *trader.Strategy) { s.Status = trader.StatusInactive })
	}, body: body(nil, "expected_active_strategy_id"), status: trader.Applied, warnings: []string{trader.CodeExpectedActiveUnset}, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if r.FromStrategyID != "" || e.strategy(t, sB).Status != trader.StatusActive {
				t.Errorf("switch with no current: from %q", r.FromStrategyID)
			}
		}})
	add(applyCase{name: "switch_to_paused_current", setup: pausedA,
		body: body(map[string]any{"target_strategy_id": sA}), status: trader.Applied, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if e.strategy(t, sA).Status != trader.StatusActive {
				t.Error("switching to the paused current strategy did not activate it")
			}
		}})
	add(applyCase{name: "pause_applied", body: body(map[string]any{"action": "pause"}, "target_strategy_id", "risk_mode"), status: trader.Applied, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if a := e.strategy(t, sA); a.Status != trader.StatusPaused || r.FromStrategyID != sA || r.ToStrategyID != sA {
				t.Errorf("pause: A %s, from %s to %s", a.Status, r.FromStrategyID, r.ToStrategyID)
			}
		}})
	add(applyCase{name: "pause_with_target", body: body(map[string]any{"action": "pause", "target_strategy_id": sA}), status: trader.Applied, changed: true})
	add(applyCase{name: "resume_applied", setup: pausedA, body: body(map[string]any{"action": "resume"}, "target_strategy_id"), status: trader.Applied, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if e.strategy(t, sA).Status != trader.StatusActive {
				t.Error("resume did not activate")
			}
		}})
	add(applyCase{name: "set_risk_mode_applied", body: body(map[string]any{"action": "set_risk_mode", "risk_mode": "defensive"}, "target_strategy_id"), status: trader.Applied, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if a := e.strategy(t, sA); a.RiskMode != "defensive" || a.Status != trader.StatusActive {
				t.Errorf("set_risk_mode: %+v", a)
			}
		}})
	add(applyCase{name: "set_risk_mode_on_paused", setup: pausedA, body: body(map[string]any{"action": "set_risk_mode", "risk_mode": "reduced"}, "target_strategy_id"), status: trader.Applied, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if a := e.strategy(t, sA); a.RiskMode != "reduced" || a.Status != trader.StatusPaused {
				t.Errorf("set_risk_mode on paused: %+v", a)
			}
		}})

	// Noop: the requested state already exists.
	add(applyCase{name: "switch_noop", body: body(map[string]any{"target_strategy_id": sA}), status: trader.Noop})
	add(applyCase{name: "resume_noop", body: body(map[string]any{"action": "resume"}, "target_strategy_id"), status: trader.Noop})
	add(applyCase{name: "pause_noop", setup: pausedA, body: body(map[string]any{"action": "pause"}, "target_strategy_id"), status: trader.Noop})
	add(applyCase{name: "set_risk_mode_noop", body: body(map[string]any{"action": "set_risk_mode", "risk_mode": "normal"}, "target_strategy_id"), status: trader.Noop})

	// keep and unknown actions.
	add(applyCase{name: "keep_unsupported", body: body(map[string]any{"action": "keep"}), status: trader.Rejected, errors: []string{trader.CodeUnsupportedAction}, fields: []string{"action"}})
	add(applyCase{name: "unknown_action", body: body(map[string]any{"action": "liquidate"}), status: trader.Rejected, errors: []string{trader.CodeUnsupportedAction}})

	// Required fields, one by one.
	for _, f := range []string{"decision_id", "concern_id", "account_id", "market_symbol", "action", "reason", "confidence"} {
		add(applyCase{name: "missing_" + f, body: body(nil, f), status: trader.Rejected, errors: []string{trader.CodeMissingField}, fields: []string{f}})
	}
	add(applyCase{name: "empty_reason", body: body(map[string]any{"reason": ""}), status: trader.Rejected, errors: []string{trader.CodeMissingField}, fields: []string{"reason"}})
	add(applyCase{name: "null_decision_id", body: body(map[string]any{"decision_id": nil}), status: trader.Rejected, errors: []string{trader.CodeWrongType}, fields: []string{"decision_id"}})

	// Conditionally required fields.
	add(applyCase{name: "switch_without_target", body: body(nil, "target_strategy_id"), status: trader.Rejected, errors: []string{trader.CodeMissingField}, fields: []string{"target_strategy_id"}})
	add(applyCase{name: "switch_with_null_target", body: body(map[string]any{"target_strategy_id": nil}), status: trader.Rejected, errors: []string{trader.CodeMissingField}, fields: []string{"target_strategy_id"}})
	add(applyCase{name: "set_risk_mode_without_risk_mode", body: body(map[string]any{"action": "set_risk_mode"}, "risk_mode", "target_strategy_id"), status: trader.Rejected, errors: []string{trader.CodeMissingField}, fields: []string{"risk_mode"}})
	add(applyCase{name: "unknown_risk_mode", body: body(map[string]any{"action": "set_risk_mode", "risk_mode": "yolo"}, "target_strategy_id"), status: trader.Rejected, errors: []string{trader.CodeUnknownRiskMode}, fields: []string{"risk_mode"}})
	add(applyCase{name: "pause_null_optionals", body: body(map[string]any{"action": "pause", "target_strategy_id": nil, "risk_mode": nil, "dry_run": nil, "override": nil, "requested_at": nil}), status: trader.Applied, changed: true})

	// Confidence.
	for _, c := range []struct {
		name string
		v    string
	}{{"above_one", "1.5"}, {"negative", "-0.1"}, {"overflow", "1e999"}, {"just_above_one", "1.0000000000000000001"}, {"huge_exponent", "1e-999999999"}} {
		raw := strings.Replace(string(body(nil)), `"confidence":0.83`, `"confidence":`+c.v, 1)
		add(applyCase{name: "confidence_" + c.name, body: []byte(raw), status: trader.Rejected, errors: []string{trader.CodeConfidenceOutOfRange}, fields: []string{"confidence"}})
	}
	add(applyCase{name: "confidence_bounds_ok", body: body(map[string]any{"confidence": 1}), status: trader.Applied, changed: true})
	add(applyCase{name: "confidence_zero_ok", body: []byte(strings.Replace(string(body(nil)), `"confidence":0.83`, `"confidence":0e5`, 1)), status: trader.Applied, changed: true})
	add(applyCase{name: "confidence_string", body: body(map[string]any{"confidence": "0.83"}), status: trader.Rejected, errors: []string{trader.CodeWrongType}, fields: []string{"confidence"}})

	// Not a request at all, and malformed ones.
	add(applyCase{name: "bad_json", body: []byte(`{"decision_id": "x",`), status: trader.Rejected, errors: []string{trader.CodeBadJSON}})
	add(applyCase{name: "not_an_object", body: []byte(`["switch"]`), status: trader.Rejected, errors: []string{trader.CodeNotAnObject}})
	add(applyCase{name: "trailing_data", body: append(body(nil), []byte(` {}`)...), status: trader.Rejected, errors: []string{trader.CodeBadJSON}})
	add(applyCase{name: "oversized", body: body(map[string]any{"reason": strings.Repeat("x", trader.MaxRequestBytes)}), status: trader.Rejected, errors: []string{trader.CodeBodyTooLarge}})
	add(applyCase{name: "unknown_field", body: body(map[string]any{"leverage": 10}), status: trader.Rejected, errors: []string{trader.CodeUnknownField}, fields: []string{"leverage"}})
	add(applyCase{name: "duplicate_field", body: []byte(strings.Replace(string(body(nil)), `"action":"switch"`, `"action":"pause","action":"switch"`, 1)), status: trader.Rejected, errors: []string{trader.CodeDuplicateField}, fields: []string{"action"}})
	add(applyCase{name: "wrong_types", body: body(map[string]any{"decision_id": 17, "dry_run": "yes", "override": 1}), status: trader.Rejected,
		errors: []string{trader.CodeWrongType, trader.CodeWrongType, trader.CodeWrongType}, fields: []string{"decision_id", "dry_run", "override"}})
	add(applyCase{name: "bad_formats", body: body(map[string]any{"decision_id": "has space", "account_id": "a:b", "requested_at": "yesterday", "reason": strings.Repeat("é", trader.MaxReasonChars+1)}), status: trader.Rejected,
		errors: []string{trader.CodeInvalidField, trader.CodeInvalidField, trader.CodeInvalidField, trader.CodeInvalidField}, fields: []string{"decision_id", "account_id", "reason", "requested_at"}})

	// Validation rules against the state.
	add(applyCase{name: "concern_mismatch", body: body(map[string]any{"concern_id": "someone:xrpusd"}), status: trader.Rejected,
		errors: []string{trader.CodeConcernMismatch, trader.CodeAccountMismatch, trader.CodeExpectedActiveMismatch}, fields: []string{"concern_id", "account_id", "expected_active_strategy_id"}})
	add(applyCase{name: "concern_not_found", body: body(map[string]any{"concern_id": tradertest.Account + ":dogeusd", "market_symbol": "dogeusd"}), status: trader.Rejected,
		errors: []string{trader.CodeConcernNotFound, trader.CodeMarketMismatch, trader.CodeExpectedActiveMismatch}, fields: []string{"concern_id", "target_strategy_id", "expected_active_strategy_id"}})
	add(applyCase{name: "market_mismatch", body: body(map[string]any{"market_symbol": "btcusd"}), status: trader.Rejected,
		errors: []string{trader.CodeConcernMismatch, trader.CodeMarketMismatch}, fields: []string{"concern_id", "target_strategy_id"}})
	add(applyCase{name: "target_not_found", body: body(map[string]any{"target_strategy_id": "00000000-0000-4000-8000-000000000000"}), status: trader.Rejected,
		errors: []string{trader.CodeTargetNotFound}, fields: []string{"target_strategy_id"}})
	add(applyCase{name: "target_not_runnable", body: body(map[string]any{"target_strategy_id": sX}), status: trader.Rejected,
		errors: []string{trader.CodeTargetNotRunnable}, fields: []string{"target_strategy_id"}})
	add(applyCase{name: "resume_not_runnable", setup: func(t *testing.T, e *env) {
		e.set(t, sA, func(s *trader.Strategy) { s.Status, s.Runnable = trader.StatusPaused, false })
	}, body: body(map[string]any{"action": "resume"}, "target_strategy_id"), status: trader.Rejected, errors: []string{trader.CodeTargetNotRunnable}})
	add(applyCase{name: "pause_not_runnable_is_fine", setup: func(t *testing.T, e *env) {
		e.set(t, sA, func(s *trader.Strategy) { s.Runnable = false })
	}, body: body(map[string]any{"action": "pause"}, "target_strategy_id"), status: trader.Applied, changed: true})
	add(applyCase{name: "target_of_other_concern", setup: func(t *testing.T, e *env) {
		other := trader.Strategy{ID: "5b90be62-4fb2-4e99-9342-915b6e7f8091", AccountID: tradertest.Account, MarketSymbol: "btcusd", Name: "btc", Status: trader.StatusInactive, Runnable: true, RiskMode: "normal"}
		if _, err := e.svc.PutStrategy(context.Background(), operator, other, 0); err != nil {
			t.Fatal(err)
		}
	}, body: body(map[string]any{"target_strategy_id": "5b90be62-4fb2-4e99-9342-915b6e7f8091"}), status: trader.Rejected,
		errors: []string{trader.CodeMarketMismatch}, fields: []string{"target_strategy_id"}})
	add(applyCase{name: "pause_target_not_current", body: body(map[string]any{"action": "pause", "target_strategy_id": sB}), status: trader.Rejected,
		errors: []string{trader.CodeTargetNotCurrent}, fields: []string{"target_strategy_id"}})
	add(applyCase{name: "pause_no_current", setup: func(t *testing.T, e *env) {
		e.set(t, sA, func(s *trader.Strategy) { s.Status = trader.StatusInactive })
	}, body: body(map[string]any{"action": "pause"}, "target_strategy_id", "expected_active_strategy_id"), status: trader.Rejected,
		errors: []string{trader.CodeNoCurrentStrategy}, warnings: []string{trader.CodeExpectedActiveUnset}})

	// Guarded gates and override.
	add(applyCase{name: "expected_active_mismatch", body: body(map[string]any{"expected_active_strategy_id": sC}), status: trader.Rejected,
		errors: []string{trader.CodeExpectedActiveMismatch}, fields: []string{"expected_active_strategy_id"}})
	add(applyCase{name: "expected_active_override", body: body(map[string]any{"expected_active_strategy_id": sC, "override": true}), status: trader.Applied,
		warnings: []string{trader.CodeOverride}, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if r.Validation.ExpectedActiveMatch || !slices.Equal(r.Warnings[0].Bypassed, []string{trader.CodeExpectedActiveMismatch}) {
				t.Errorf("override: validation %+v warnings %+v", r.Validation, r.Warnings)
			}
		}})
	add(applyCase{name: "degraded", setup: func(t *testing.T, e *env) { e.degrade(t) }, body: body(nil), status: trader.Rejected,
		errors: []string{trader.CodeExecutionDegraded}})
	add(applyCase{name: "degraded_pause", setup: func(t *testing.T, e *env) { e.degrade(t) }, body: body(map[string]any{"action": "pause"}, "target_strategy_id"), status: trader.Rejected,
		errors: []string{trader.CodeExecutionDegraded}})
	add(applyCase{name: "degraded_override", setup: func(t *testing.T, e *env) { e.degrade(t) }, body: body(map[string]any{"override": true}), status: trader.Applied,
		warnings: []string{trader.CodeOverride}, changed: true})
	add(applyCase{name: "override_both_gates", setup: func(t *testing.T, e *env) { e.degrade(t) }, body: body(map[string]any{"override": true, "expected_active_strategy_id": sC}), status: trader.Applied,
		warnings: []string{trader.CodeOverride}, changed: true,
		check: func(t *testing.T, e *env, r trader.Response) {
			if !slices.Equal(r.Warnings[0].Bypassed, []string{trader.CodeExpectedActiveMismatch, trader.CodeExecutionDegraded}) {
				t.Errorf("bypassed %v", r.Warnings[0].Bypassed)
			}
		}})
	add(applyCase{name: "override_unused", body: body(map[string]any{"override": true}), status: trader.Applied, warnings: []string{trader.CodeOverride}, changed: true})
	add(applyCase{name: "override_not_for_runnable", body: body(map[string]any{"override": true, "target_strategy_id": sX}), status: trader.Rejected,
		errors: []string{trader.CodeTargetNotRunnable}, warnings: []string{trader.CodeOverride}})
	add(applyCase{name: "degraded_noop_is_rejected", setup: func(t *testing.T, e *env) { e.degrade(t) }, body: body(map[string]any{"target_strategy_id": sA}), status: trader.Rejected,
		errors: []string{trader.CodeExecutionDegraded}})
	add(applyCase{name: "no_expected_active", body: body(nil, "expected_active_strategy_id"), status: trader.Applied, warnings: []string{trader.CodeExpectedActiveUnset}, changed: true})

	// Dry run: answers what would happen, changes nothing.
	add(applyCase{name: "dry_run_switch", body: body(map[string]any{"dry_run": true}), status: trader.Noop, warnings: []string{trader.CodeDryRun},
		check: func(t *testing.T, e *env, r trader.Response) {
			if !r.DryRun || r.Result.ModeChange != trader.ModeWouldApply || r.Result.Reconciled || r.AppliedAt != "" {
				t.Errorf("dry run response: %+v", r)
			}
			// The id was not consumed: the real decision applies.
			real := e.apply(t, body(nil))
			if real.Status != trader.Applied || real.Replay() || real.DryRun {
				t.Errorf("real decision after a dry run: %s replay=%v", real.Status, real.Replay())
			}
		}})
	add(applyCase{name: "dry_run_rejected", body: body(map[string]any{"dry_run": true, "target_strategy_id": sX}), status: trader.Rejected,
		errors: []string{trader.CodeTargetNotRunnable}, warnings: []string{trader.CodeDryRun}})
	add(applyCase{name: "dry_run_noop", body: body(map[string]any{"dry_run": true, "action": "resume"}, "target_strategy_id"), status: trader.Noop, warnings: []string{trader.CodeDryRun}})
	return cases
}

func TestApply(t *testing.T) {
	for _, c := range applyCases() {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, trader.Options{})
			if c.setup != nil {
				c.setup(t, e)
			}
			before, err := e.svc.ListStrategies(context.Background(), t1, trader.StrategyFilter{})
			if err != nil {
				t.Fatal(err)
			}
			auditBefore := len(e.mem.Records(t1))
			r := e.apply(t, c.body)
			if r.Status != c.status {
				t.Errorf("status %s, want %s (errors %v)", r.Status, c.status, r.Errors)
			}
			if r.OK != (c.status == trader.Applied || c.status == trader.Noop) {
				t.Errorf("ok=%v for %s", r.OK, r.Status)
			}
			if got := r.ErrorCodes(); !slices.Equal(got, c.errors) && !(len(got) == 0 && len(c.errors) == 0) {
				t.Errorf("errors %v, want %v: %+v", got, c.errors, r.Errors)
			}
			if c.fields != nil {
				var fields []string
				for _, e := range r.Errors {
					fields = append(fields, e.Field)
				}
				if !slices.Equal(fields, c.fields) {
					t.Errorf("error fields %v, want %v", fields, c.fields)
				}
			}
			var warnings []string
			for _, w := range r.Warnings {
				warnings = append(warnings, w.Code)
			}
			if !slices.Equal(warnings, c.warnings) {
				t.Errorf("warnings %v, want %v", warnings, c.warnings)
			}
			for _, e := range r.Errors {
				if e.Message == "" {
					t.Errorf("error %s has no message", e.Code)
				}
			}
			if r.Status == trader.Applied && !r.DryRun && (r.AppliedAt == "" || r.Result.ModeChange != trader.ModeApplied || !r.Result.Reconciled) {
				t.Errorf("applied without applied_at/result: %+v", r)
			}
			dryRunWouldApply := r.Status == trader.Noop && r.DryRun && r.Result.ModeChange == trader.ModeWouldApply
			if r.Status != trader.Applied && r.Result.ModeChange != trader.ModeNone && !dryRunWouldApply {
				t.Errorf("%s with mode_change %s", r.Status, r.Result.ModeChange)
			}
			after, err := e.svc.ListStrategies(context.Background(), t1, trader.StrategyFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if changed := !sameJSON(before, after); changed != c.changed && c.check == nil {
				t.Errorf("strategies changed=%v, want %v", changed, c.changed)
			} else if changed != c.changed && !strings.HasPrefix(c.name, "dry_run_switch") {
				t.Errorf("strategies changed=%v, want %v", changed, c.changed)
			}
			// One attempt, one audit record, whatever the outcome.
			recs := e.mem.Records(t1)
			if len(recs)-auditBefore < 1 {
				t.Fatalf("no audit record for the attempt")
			}
			last := recs[auditBefore]
			if last.Outcome.Action != trader.AuditApply {
				t.Errorf("audit action %s", last.Outcome.Action)
			}
			var att trader.Attempt
			if err := json.Unmarshal(last.Payload, &att); err != nil {
				t.Fatal(err)
			}
			if att.Status != r.Status || !sameJSON(att.Response, r) || att.AuditID != "" || att.RequestBytes != len(c.body) {
				t.Errorf("audit payload: status %s bytes %d response %+v", att.Status, att.RequestBytes, att.Response)
			}
			wantOutcome := contract.OutcomeAllow
			if r.Status == trader.Rejected {
				wantOutcome = contract.OutcomeDeny
			}
			if last.Outcome.Outcome != wantOutcome {
				t.Errorf("audit outcome %s, want %s", last.Outcome.Outcome, wantOutcome)
			}
			if c.check != nil {
				c.check(t, e, r)
			}
			golden(t, "apply/"+c.name+".json", r)
		})
	}
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestApplyOversizedStoresOnlyTheAttempt: a refused body leaves nothing but
// its attempt and audit record, and the record does not hold the body.
func TestApplyOversizedStoresOnlyTheAttempt(t *testing.T) {
	e := newEnv(t, trader.Options{})
	big := body(map[string]any{"reason": strings.Repeat("x", trader.MaxRequestBytes)})
	r := e.apply(t, big)
	if !r.NotARequest() || r.Status != trader.Rejected {
		t.Fatalf("oversized: %+v", r)
	}
	hist, err := e.svc.History(context.Background(), t1, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 || hist[0].Request != nil || hist[0].RequestBytes != len(big) || hist[0].RequestSHA256 != contract.SHA256(big) {
		t.Errorf("attempt of an oversized body: %+v", hist)
	}
	if recs := e.mem.Records(t1); len(recs) != 1 || len(recs[0].Body) > 8<<10 {
		t.Errorf("%d audit records, first %d bytes", len(recs), len(recs[0].Body))
	}
	if _, err := e.svc.Decision(context.Background(), t1, "dec_2026_04_16_001"); contract.KindOf(err) != contract.KindNotFound {
		t.Errorf("an oversized body left a decision: %v", err)
	}
	for _, ok := range []trader.Response{e.apply(t, []byte(`{"a":1}`))} {
		if ok.NotARequest() {
			t.Error("an object with unknown fields is a request, wrongly refused as not one")
		}
	}
}

func TestReplay(t *testing.T) {
	e := newEnv(t, trader.Options{})
	first := e.apply(t, body(nil))
	if first.Status != trader.Applied {
		t.Fatal(first.Errors)
	}
	// The state moves on; a replay still answers the stored response, not a
	// stale-view rejection.
	e.apply(t, body(map[string]any{"decision_id": "dec-2", "target_strategy_id": sC, "expected_active_strategy_id": sB}))
	again := e.apply(t, body(nil))
	if again.Status != trader.Applied || !again.Replay() || again.AppliedAt != first.AppliedAt {
		t.Errorf("replay after the state moved: %s replay=%v applied_at %s/%s %v", again.Status, again.Replay(), again.AppliedAt, first.AppliedAt, again.Errors)
	}
	if e.strategy(t, sC).Status != trader.StatusActive {
		t.Error("a replay reapplied the switch")
	}
	// requested_at and dry_run are not part of the decision.
	restamped := e.apply(t, body(map[string]any{"requested_at": "2026-04-16T20:16:00Z", "dry_run": true}))
	if !restamped.Replay() {
		t.Errorf("a restamped retry is not a replay: %s %v", restamped.Status, restamped.Errors)
	}
	// Field order and spelling of numbers do not matter: canonical payload.
	reordered := `{"reason":"trend strategy still fits the directional narrative","confidence":0.830,"concern_id":"` + concern + `","decision_id":"dec_2026_04_16_001","account_id":"qndd8o9ppop6","market_symbol":"xrpusd","action":"switch","target_strategy_id":"` + sB + `","expected_active_strategy_id":"` + sA + `","risk_mode":"normal"}`
	if r := e.apply(t, []byte(reordered)); !r.Replay() {
		t.Errorf("a reordered copy is not a replay: %s %v", r.Status, r.Errors)
	}
	// A different payload under the same id is a conflict, and is not stored.
	conflict := e.apply(t, body(map[string]any{"reason": "changed my mind"}))
	if conflict.Status != trader.Rejected || !slices.Equal(conflict.ErrorCodes(), []string{trader.CodeDecisionIDConflict}) {
		t.Errorf("conflict: %s %v", conflict.Status, conflict.ErrorCodes())
	}
	if recs := e.mem.Records(t1); recs[len(recs)-1].Outcome.Outcome != contract.OutcomeConflict {
		t.Errorf("conflict audited as %s", recs[len(recs)-1].Outcome.Outcome)
	}

	// Rejected and noop outcomes replay as they were.
	rej := e.apply(t, body(map[string]any{"decision_id": "dec-rej", "target_strategy_id": sX}))
	e.set(t, sX, func(s *trader.Strategy) { s.Runnable = true })
	rej2 := e.apply(t, body(map[string]any{"decision_id": "dec-rej", "target_strategy_id": sX}))
	if rej.Status != trader.Rejected || rej2.Status != trader.Rejected || !rej2.Replay() {
		t.Errorf("rejected replay: %s then %s replay=%v", rej.Status, rej2.Status, rej2.Replay())
	}
	noop := e.apply(t, body(map[string]any{"decision_id": "dec-noop", "action": "resume"}, "target_strategy_id", "expected_active_strategy_id"))
	noop2 := e.apply(t, body(map[string]any{"decision_id": "dec-noop", "action": "resume"}, "target_strategy_id", "expected_active_strategy_id"))
	if noop.Status != trader.Noop || noop2.Status != trader.Noop || !noop2.Replay() {
		t.Errorf("noop replay: %s then %s replay=%v", noop.Status, noop2.Status, noop2.Replay())
	}
	// Schema-level refusals are not stored: the id stays free.
	bad := e.apply(t, body(map[string]any{"decision_id": "dec-free", "confidence": 2}))
	good := e.apply(t, body(map[string]any{"decision_id": "dec-free", "target_strategy_id": sA, "expected_active_strategy_id": sC}))
	if bad.Status != trader.Rejected || good.Replay() || good.Status != trader.Applied {
		t.Errorf("after a shape refusal the id is not free: %s then %s %v", bad.Status, good.Status, good.Errors)
	}

	view, err := e.svc.Decision(context.Background(), t1, "dec_2026_04_16_001")
	if err != nil {
		t.Fatal(err)
	}
	if len(view.Attempts) != 5 || view.Decision.Status != trader.Applied {
		t.Errorf("decision view: %d attempts, %+v", len(view.Attempts), view.Decision)
	}
	replays := 0
	for _, a := range view.Attempts {
		if a.Replay {
			replays++
		}
	}
	if replays != 3 {
		t.Errorf("%d replays recorded, want 3", replays)
	}
}

func TestApplyStoreFailure(t *testing.T) {
	for _, op := range []string{"LookupDecision", "Strategies", "UpdateStrategy", "PutInstance", "SaveDecision", "AppendAudit", "AddAttempt"} {
		t.Run(op, func(t *testing.T) {
			e := newEnv(t, trader.Options{})
			broken := true
			e.mem.Fail = func(got string) error {
				if broken && got == op {
					broken = false // fail once: the record of the failure goes through
					return errors.New("disk on fire")
				}
				return nil
			}
			r := e.apply(t, body(nil))
			code := trader.CodeStoreFailed
			if op == "PutInstance" { // the default runtime's own write
				code = trader.CodeRuntimeFailed
			}
			if r.Status != trader.Failed || !slices.Equal(r.ErrorCodes(), []string{code}) || r.Result.ModeChange != trader.ModeRolledBack {
				t.Fatalf("%s failing: %+v", op, r)
			}
			if strings.Contains(fmt.Sprint(r), "disk on fire") {
				t.Error("the internal cause leaked into the response")
			}
			if a := e.strategy(t, sA); a.Status != trader.StatusActive || a.Revision != 1 {
				t.Errorf("state changed by a failed decision: %+v", a)
			}
			hist, _ := e.svc.History(context.Background(), t1, concern, 0)
			if len(hist) != 1 || hist[0].Status != trader.Failed {
				t.Errorf("history after failure: %+v", hist)
			}
			if r := e.apply(t, body(nil)); r.Status != trader.Applied || r.Replay() {
				t.Errorf("retry after a failure: %s %v", r.Status, r.Errors)
			}
		})
	}
	t.Run("record fails too", func(t *testing.T) {
		e := newEnv(t, trader.Options{})
		e.mem.Fail = func(op string) error {
			if op == "AppendAudit" {
				return errors.New("disk gone")
			}
			return nil
		}
		r, err := e.svc.Apply(context.Background(), hermes, body(nil))
		// KindOf(nil) is internal too: the error must be there.
		if err == nil || contract.KindOf(err) != contract.KindInternal || r.Status != trader.Failed {
			t.Errorf("Apply = %s, %v; want failed and an internal error", r.Status, err)
		}
	})
}

func TestApplyNotReconciled(t *testing.T) {
	lazy := trader.RuntimeFunc(func(ctx context.Context, tx trader.Tx, s trader.Strategy) (bool, error) { return false, nil })
	e := newEnv(t, trader.Options{Runtime: lazy})
	r := e.apply(t, body(nil))
	if r.Status != trader.Applied || r.Result.Reconciled || r.Warnings[len(r.Warnings)-1].Code != trader.CodeNotReconciled {
		t.Errorf("unreconciled apply: %+v", r)
	}
}

func TestApplyCallers(t *testing.T) {
	e := newEnv(t, trader.Options{})
	for _, c := range []struct {
		name   string
		caller contract.Caller
	}{
		{"no operate scope", tradertest.Caller(t1, "reader", contract.ScopeRoute, contract.ScopeConfigure)},
		{"no identity", contract.Caller{Scopes: []contract.Scope{contract.ScopeOperate}}},
	} {
		_, err := e.svc.Apply(context.Background(), c.caller, body(nil))
		if contract.KindOf(err) != contract.KindDeny {
			t.Errorf("%s: %v, want deny", c.name, err)
		}
	}
	if n := len(e.mem.Records(t1)); n != 0 {
		t.Errorf("refused callers left %d audit records", n)
	}
	// Another tenant's caller acts on its own (empty) tenant only.
	r, err := e.svc.Apply(context.Background(), tradertest.Caller("slot-7", "hermes", contract.ScopeOperate), body(nil))
	if err != nil || r.Status != trader.Rejected || r.ErrorCodes()[0] != trader.CodeConcernNotFound {
		t.Errorf("other tenant: %v %s %v", err, r.Status, r.ErrorCodes())
	}
	if e.strategy(t, sA).Status != trader.StatusActive {
		t.Error("another tenant's decision changed this tenant")
	}
}

func TestConfiguredRiskModes(t *testing.T) {
	e := newEnv(t, trader.Options{RiskModes: []string{"normal", "aggressive"}})
	if r := e.apply(t, body(map[string]any{"action": "set_risk_mode", "risk_mode": "aggressive"}, "target_strategy_id")); r.Status != trader.Applied {
		t.Errorf("configured mode refused: %v", r.Errors)
	}
	if r := e.apply(t, body(map[string]any{"decision_id": "d2", "action": "set_risk_mode", "risk_mode": "defensive"}, "target_strategy_id")); r.ErrorCodes()[0] != trader.CodeUnknownRiskMode {
		t.Errorf("unconfigured mode: %v", r.ErrorCodes())
	}
	for _, bad := range [][]string{{"Normal"}, {"a", "a"}} {
		if _, err := trader.New(tradertest.NewMemory(), trader.Options{RiskModes: bad}); contract.KindOf(err) != contract.KindInvalid {
			t.Errorf("risk modes %v: %v", bad, err)
		}
	}
}

// TestDecisionRecordsAreSensitive: every decision attempt's record is
// sensitive (seed 002: finance); one whose body was refused as bytes (not
// JSON, or over the limit) says its payload was reduced to their sha256
// and size; one with a JSON request has no redaction.
func TestDecisionRecordsAreSensitive(t *testing.T) {
	e := newEnv(t, trader.Options{})
	e.apply(t, []byte("not json at all"))
	e.apply(t, body(map[string]any{"reason": strings.Repeat("x", trader.MaxRequestBytes)}))
	e.apply(t, []byte(`{"a":1}`))
	recs := e.mem.Records(t1)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for i, r := range recs {
		if r.Sensitivity != contract.SensitivitySensitive {
			t.Errorf("record %d: sensitivity %q", i, r.Sensitivity)
		}
		refused := i < 2
		if refused != (r.Redaction != nil && *r.Redaction == trader.RefusedBytes) {
			t.Errorf("record %d: redaction %+v", i, r.Redaction)
		}
	}
}
