package trader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
)

// AuditApply is the audit action of a control decision attempt.
const AuditApply = "trader.apply"

// Apply is apply_control_decision: the one write entry point, shared by MCP,
// HTTP and CLI. raw is the request body as received.
//
// It checks, in this order: size, JSON and the request shape (unknown,
// duplicate, mistyped and missing fields), action-conditional fields and the
// risk mode, confidence finite in [0,1]; then, in one transaction, the
// idempotency lookup on decision_id (same canonical request: the stored
// response unchanged, its status included, plus replayed: true; a
// different one: rejected decision_id_conflict), concern/account/market match, target existence,
// runnability and concern, expected_active_strategy_id unless override,
// degraded execution unless override, already-in-state (noop), dry_run (a
// dry run that passes answers noop with mode_change would_apply, or none
// when there is nothing to change), and finally applies the change and reconciles the runtime. The state change,
// the reconcile, the stored decision, the attempt and its audit record commit
// together. A runtime or store failure rolls the decision back and answers
// failed; its attempt is recorded in a separate transaction afterwards.
//
// Every outcome — applied, noop, rejected, failed — is a Response with a nil
// error, and every call is recorded as one attempt with one audit record.
// Apply returns a deny *contract.Error, recording nothing, when the caller
// has no resolved identity or lacks the operate scope; and an internal
// *contract.Error (with the failed Response) only when even the record of a
// failed attempt could not be written.
func (s *Service) Apply(ctx context.Context, caller contract.Caller, raw []byte) (Response, error) {
	if err := authorize(caller, contract.ScopeOperate); err != nil {
		return Response{}, err
	}
	// A decision that started is finished and recorded even if the client
	// hangs up.
	ctx = context.WithoutCancel(ctx)
	att := Attempt{
		Identity: caller.Identity, KeyID: caller.KeyID,
		RequestSHA256: contract.SHA256(raw), RequestBytes: len(raw),
		ReceivedAt: stamp(s.now()),
	}
	if len(raw) <= MaxRequestBytes && json.Valid(raw) && unsafeJSON(raw) == nil {
		att.Request = json.RawMessage(raw)
	}
	req, issues := ParseRequest(raw)
	if len(issues) == 0 && req.RiskMode != "" && !s.knownRiskMode(req.RiskMode) {
		issues = append(issues, Issue{Code: CodeUnknownRiskMode, Field: "risk_mode",
			Message: fmt.Sprintf("risk_mode %q is not one of %s", req.RiskMode, strings.Join(s.risk, ", "))})
	}
	att.DecisionID, att.ConcernID, att.Action = req.DecisionID, req.ConcernID, string(req.Action)
	att.DryRun, att.Override = req.DryRun, req.Override
	if len(issues) > 0 {
		resp := newResponse(req)
		resp.Status = Rejected
		resp.Errors = issues
		return resp, s.recordApart(ctx, caller, att, resp)
	}
	fp, err := fingerprint(req)
	if err != nil {
		return s.failed(ctx, caller, att, newResponse(req), CodeStoreFailed, err)
	}

	var resp, partial Response
	err = s.inTx(ctx, caller.Identity.TenantSlot, func(tx Tx) error {
		partial = newResponse(req)
		var err error
		resp, err = s.decide(ctx, tx, caller, req, fp, att, &partial)
		return err
	})
	if err == nil {
		return resp, nil
	}
	code := CodeStoreFailed
	var rf *runtimeFailure
	switch {
	case errors.As(err, &rf):
		code = CodeRuntimeFailed
	case errors.Is(err, ErrConflict):
		code = CodeConcurrentUpdate
	}
	return s.failed(ctx, caller, att, partial, code, err)
}

// runtimeFailure marks an error of the Runtime, as opposed to the store.
type runtimeFailure struct{ err error }

func (f *runtimeFailure) Error() string { return "trader: reconcile: " + f.err.Error() }
func (f *runtimeFailure) Unwrap() error { return f.err }

// failed answers a failed attempt and records it apart.
func (s *Service) failed(ctx context.Context, caller contract.Caller, att Attempt, resp Response, code string, cause error) (Response, error) {
	s.log.Error("trader: decision failed", "decision_id", att.DecisionID, "code", code, "err", cause)
	msg := map[string]string{
		CodeRuntimeFailed:    "the runtime could not reconcile the change; nothing was changed",
		CodeStoreFailed:      "the change could not be stored; nothing was changed",
		CodeConcurrentUpdate: "the concern kept changing under concurrent decisions; nothing was changed, retry",
	}[code]
	resp.OK = false
	resp.Status = Failed
	resp.Errors = append(resp.Errors, Issue{Code: code, Message: msg})
	resp.Result = Result{ModeChange: ModeRolledBack}
	resp.AppliedAt = ""
	if err := s.recordApart(ctx, caller, att, resp); err != nil {
		return resp, err
	}
	return resp, nil
}

func newResponse(req Request) Response {
	return Response{
		ContractVersion: contract.Version,
		DecisionID:      req.DecisionID, ConcernID: req.ConcernID, Action: req.Action, DryRun: req.DryRun,
		Warnings: []Issue{}, Errors: []Issue{}, Result: Result{ModeChange: ModeNone},
	}
}

// RefusedBytes is the redaction of an attempt whose body was not a JSON
// request within the size limit: the record keeps its sha256 and size
// (request_sha256, request_bytes), not the bytes.
var RefusedBytes = contract.Redaction{Level: contract.RedactionPartial, Reason: "refused request bytes kept as their sha256 and size"}

// recordApart records an attempt in a transaction of its own (refused before
// the decision transaction, or failed and rolled back).
func (s *Service) recordApart(ctx context.Context, caller contract.Caller, att Attempt, resp Response) error {
	err := s.inTx(ctx, caller.Identity.TenantSlot, func(tx Tx) error {
		return s.record(ctx, tx, caller, att, resp)
	})
	if err != nil {
		return s.internal("record attempt", err)
	}
	return nil
}

// record writes one attempt and its audit record in tx (the attempt id is
// made here unless the caller made it).
func (s *Service) record(ctx context.Context, tx Tx, caller contract.Caller, att Attempt, resp Response) error {
	if att.ID == "" {
		att.ID = contract.NewID(contract.PrefixDecision)
	}
	att.Status = resp.Status
	att.Replay = resp.Replay()
	att.Response = resp
	att.DecidedAt = stamp(s.now())
	outcome, reason := contract.OutcomeAllow, string(resp.Status)
	switch resp.Status {
	case Rejected, Failed:
		outcome = contract.OutcomeDeny
		codes := resp.ErrorCodes()
		if len(codes) > 0 && codes[0] == CodeDecisionIDConflict {
			outcome = contract.OutcomeConflict
		}
		reason += ": " + strings.Join(codes, ", ")
	}
	if att.Replay {
		reason += " (replay)"
	} else if att.DryRun {
		reason += " (dry run)"
	}
	resource := "trader/decision"
	if att.DecisionID != "" {
		resource += "/" + att.DecisionID
	}
	e := s.entry(caller, AuditApply, resource, outcome, reason, att.DecidedAt, contract.ActorAssistant, att)
	if att.Request == nil {
		e.Redaction = &RefusedBytes
	}
	rec, err := tx.AppendAudit(ctx, e)
	if err != nil {
		return err
	}
	att.AuditID = rec.ID
	return tx.AddAttempt(ctx, att)
}

// change is one strategy row a decision rewrites.
type change struct{ before, after Strategy }

// decide runs one decision inside tx. partial receives the response as far
// as it got, for a failure to report.
func (s *Service) decide(ctx context.Context, tx Tx, caller contract.Caller, req Request, fp string, att Attempt, partial *Response) (Response, error) {
	// Lock the concern first: decisions on one concern then run one after
	// the other, each on what the previous one committed, in every process.
	var cs concernState
	if _, _, ok := SplitConcernID(req.ConcernID); ok {
		var err error
		if cs.concern, cs.found, err = tx.LockConcern(ctx, req.ConcernID); err != nil {
			return Response{}, err
		}
	}
	prev, found, err := tx.LookupDecision(ctx, req.DecisionID)
	if err != nil {
		return Response{}, err
	}
	if found {
		var resp Response
		if prev.Fingerprint == fp {
			resp = prev.Response
			resp.Replayed = true
		} else {
			resp = newResponse(req)
			resp.Status = Rejected
			resp.Errors = []Issue{{Code: CodeDecisionIDConflict, Field: "decision_id",
				Message: fmt.Sprintf("decision_id %s was already used for a different request (%s)", req.DecisionID, prev.Status)}}
		}
		return resp, s.record(ctx, tx, caller, att, resp)
	}

	resp, changes, err := s.evaluate(ctx, tx, req, cs)
	*partial = resp
	if err != nil {
		return Response{}, err
	}
	if resp.Status == Applied && !req.DryRun {
		now := stamp(s.now())
		reconciled := true
		for i := range changes {
			c := &changes[i]
			c.after.Revision = c.before.Revision + 1
			c.after.UpdatedAt = now
			if err := tx.UpdateStrategy(ctx, c.after, c.before.Revision); err != nil {
				return Response{}, err
			}
		}
		for _, c := range changes {
			ok, err := s.rt.Reconcile(ctx, tx, c.after)
			if err != nil {
				if errors.Is(err, ErrConflict) {
					return Response{}, err
				}
				return Response{}, &runtimeFailure{err}
			}
			reconciled = reconciled && ok
		}
		resp.Result = Result{ModeChange: ModeApplied, Reconciled: reconciled}
		if !reconciled {
			resp.Warnings = append(resp.Warnings, Issue{Code: CodeNotReconciled, Message: "the change is stored; the runtime has not reached it yet"})
		}
		resp.AppliedAt = contract.Timestamp(now)
		*partial = resp
	}
	if !req.DryRun {
		d := Decision{DecisionID: req.DecisionID, ConcernID: req.ConcernID, Fingerprint: fp, Status: resp.Status, Response: resp, CreatedAt: stamp(s.now())}
		if err := s.saveDecision(ctx, tx, caller, att, d); err != nil {
			return Response{}, err
		}
		return resp, nil
	}
	return resp, s.record(ctx, tx, caller, att, resp)
}

// saveDecision stores the decision and its attempt, linking the two.
func (s *Service) saveDecision(ctx context.Context, tx Tx, caller contract.Caller, att Attempt, d Decision) error {
	att.ID = contract.NewID(contract.PrefixDecision)
	d.AttemptID = att.ID
	if err := tx.SaveDecision(ctx, d); err != nil {
		return err
	}
	return s.record(ctx, tx, caller, att, d.Response)
}
