package shim

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// DryRunResult is what the proxy would do with a request. Nothing is
// persisted and no provider is called to get it.
type DryRunResult struct {
	Persisted      bool            `json:"persisted"` // always false
	Protocol       wire.Protocol   `json:"protocol"`
	Model          string          `json:"model,omitempty"`
	ConversationID string          `json:"conversation_id,omitempty"`
	Decision       Decision        `json:"decision"`
	Refusal        *Refusal        `json:"refusal,omitempty"`
	Evaluated      int             `json:"evaluated"`
	Fired          []Fired         `json:"fired"`
	Skipped        []Skipped       `json:"skipped"`
	Shimmed        []Shimmed       `json:"shimmed"`
	MissingRefs    []string        `json:"missing_refs,omitempty"`
	Forwarded      json.RawMessage `json:"forwarded,omitempty"` // the body as it would go upstream
	Response       json.RawMessage `json:"response,omitempty"`  // the direct answer, non-streaming form
}

// DryRun evaluates body as a protocol request against the caller's
// provisions and the builtins, and returns the decision, the fired and
// skipped rules and the request as it would be forwarded. It persists
// nothing (the once-per-conversation ledger is only read) and never calls
// a provider (tier 2 uses the local embedder, tier 3 is skipped). A
// contributor-tier model is a refused result, not an error. Errors: deny
// without route or configure scope; invalid when the protocol is unknown or
// the body does not parse.
func (s *Service) DryRun(ctx context.Context, caller contract.Caller, protocol wire.Protocol, body []byte) (DryRunResult, error) {
	if !caller.Has(contract.ScopeRoute) && !caller.Has(contract.ScopeConfigure) {
		return DryRunResult{}, contract.Denyf(contract.CodeMissingScope, "shim: a dry run needs the route or configure scope")
	}
	return s.dryRun(ctx, caller, protocol, body, false)
}

// Preview is DryRun for anyone (POST /api/preview, MCP shim_preview): it
// evaluates builtin provisions only, as an anonymous caller, and answers
// persisted: false. Errors: invalid when the protocol is unknown or the
// body does not parse.
func (s *Service) Preview(ctx context.Context, protocol wire.Protocol, body []byte) (DryRunResult, error) {
	anon := contract.Caller{Identity: contract.Identity{TenantSlot: s.cfg.BuiltinTenant, Subject: "", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter}}
	return s.dryRun(ctx, anon, protocol, body, true)
}

func (s *Service) dryRun(ctx context.Context, caller contract.Caller, p wire.Protocol, body []byte, builtinOnly bool) (DryRunResult, error) {
	if !p.Valid() {
		return DryRunResult{}, contract.FieldError("protocol", "bad_protocol", "shim: unknown protocol %q (want chat_completions, responses or messages)", p)
	}
	out := DryRunResult{Protocol: p, Fired: []Fired{}, Skipped: []Skipped{}, Shimmed: []Shimmed{}}
	req, err := wire.Parse(p, body)
	if err == nil {
		out.Model = req.Model
	} else {
		out.Model = wire.PeekModel(body) // the contributor refusal wins whatever else is wrong
	}
	if IsContributorModel(out.Model) {
		out.Decision = DecisionRefused
		out.Refusal = &Refusal{Code: CodeContributorRefused, Message: "shim: contributor-tier models are refused"}
		return out, nil
	}
	if err != nil {
		return DryRunResult{}, contract.Invalidf(CodeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), "wire: "))
	}
	tenant := s.Scope(caller).Slot()
	out.ConversationID = conversationID("", caller, req)
	rs, err := s.ruleset(ctx, tenant, builtinOnly)
	if err != nil {
		return DryRunResult{}, asErr(err)
	}
	ev := s.evaluate(ctx, rs, caller, req, modeOffline)
	pl, err := s.act(ctx, tenant, req, out.ConversationID, &ev, false)
	if err != nil {
		return DryRunResult{}, asErr(err)
	}
	out.Evaluated = ev.Evaluated
	out.Fired = append(out.Fired, ev.Fired...)
	out.Skipped = append(append(out.Skipped, ev.Skipped...), pl.Skipped...)
	out.Shimmed = append(out.Shimmed, pl.Shimmed...)
	out.MissingRefs = pl.Missing
	if pl.direct != nil {
		out.Decision = DecisionDirect
		out.Response = wire.DirectJSON(p, wire.Direct{ID: "dryrun", Model: req.Model, Text: pl.direct.p.Response.Text,
			StopReason: pl.direct.p.Response.StopReason, Created: s.now().Unix()})
		return out, nil
	}
	out.Decision = DecisionForward
	forwarded := req.Body()
	if pl.shim != "" {
		if forwarded, err = forwarded.Inject(p, pl.shim); err != nil {
			return DryRunResult{}, contract.Invalidf(CodeInvalidRequest, "%s", strings.TrimPrefix(err.Error(), "wire: "))
		}
	}
	if json.Valid(forwarded.Raw) {
		out.Forwarded = forwarded.Raw
	}
	return out, nil
}
