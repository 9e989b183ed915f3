//go:build !js

package shim

import (
	"fmt"
	"net/http"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/guardrail"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// CodeGuardrailBlocked refuses (400) a request holding a kind of secret or
// personal data its policy blocks (guard.CodeBlocked).
const CodeGuardrailBlocked = guard.CodeBlocked

// guardrailsOff checks nothing: this build applies the guardrails
// (guardrails_js.go is the edge's, which has none).
func guardrailsOff(Config) {}

// policy is the guardrails policy of caller's requests: shim.guardrails,
// with the override of the plan serving caller's tenant. Nil when it
// looks for nothing.
func (s *Service) policy(caller contract.Caller) guard.Policy {
	g := s.cfg.Guardrails
	if g == nil || s.cfg.Scanner == nil {
		return nil
	}
	plan := ""
	if len(g.Plans) > 0 && s.cfg.Gateway != nil {
		plan = s.cfg.Gateway.PlanName(caller.Identity.TenantSlot)
	}
	p := g.Policy(plan)
	if !p.Active() {
		return nil
	}
	return p
}

// guardRequest applies the caller's guardrails to t's request before
// anything reads its text (rules, the embedder, the gateway): it returns
// the request to go on with — redacted and parsed again when anything was
// redacted — and false when it refused the request (a blocked kind), in
// p's envelope, before any reservation or upstream call.
func (s *Service) guardRequest(w http.ResponseWriter, t *turn, p wire.Protocol) (*wire.Request, bool) {
	pol := s.policy(t.caller)
	if pol == nil {
		return t.req, true
	}
	r := guard.NewRedactor(s.cfg.Scanner, pol, guard.Request)
	t.guard = &guarding{policy: pol, request: r}
	out, changed := guard.RedactJSON(t.req.Raw, r)
	if len(r.Blocked) > 0 {
		s.refuse(w, t, http.StatusBadRequest, CodeGuardrailBlocked, guard.BlockedMessage(r.Blocked))
		return nil, false
	}
	if !changed {
		return t.req, true
	}
	req, err := wire.ParseChecked(p, out)
	if err != nil {
		// Placeholders are plain text in place of a JSON string's text:
		// the body stays what it was. Refuse rather than send the original.
		s.log.Error("shim: a redacted request does not parse", "receipt", t.rc.ID, "err", err)
		s.refuse(w, t, http.StatusBadRequest, CodeGuardrailBlocked, "guardrails: the request could not be redacted")
		return nil, false
	}
	return req, true
}

// answerFilter is the filter of t's answer in protocol p (nil when no
// policy applies): the same placeholders as its request.
func (t *turn) answerFilter(p wire.Protocol) gateway.AnswerFilter {
	g := t.guard
	if g == nil || p == wire.Embeddings {
		return nil
	}
	g.answer = guard.NewRedactor(g.request.Scanner(), g.policy, guard.Answer)
	g.answer.Share(g.request)
	shadow := guard.NewRedactor(g.request.Scanner(), g.policy, guard.Answer)
	shadow.Share(g.request)
	g.filter = guardrail.New(p, g.answer, shadow, 0)
	return g.filter
}

// guarding is a turn's guardrails: the policy that applies to it and what
// its request and answer redactors found (guardRequest, answerFilter).
type guarding struct {
	policy  guard.Policy
	request *guard.Redactor
	answer  *guard.Redactor
	filter  *guardrail.Answer
}

// guardRecords fills the receipt's guardrails list and its HUX sensitivity and
// redaction from what t's redactors found.
func (t *turn) guardRecords() {
	g := t.guard
	if g == nil {
		return
	}
	recs := g.request.Records()
	if g.answer != nil {
		recs = append(recs, g.answer.Records()...)
	}
	t.rc.Guardrails = recs
	redacted := 0
	for _, r := range recs {
		if r.Action == guard.Redact || (r.Action == guard.Block && r.Direction == guard.Answer) {
			redacted += r.Count
		}
	}
	t.rc.Sensitivity = guard.Sensitivity(recs)
	if t.rc.Sensitivity == "" {
		t.rc.Sensitivity = contract.SensitivityPersonal // the shim's own (audit.Sensitivities)
	}
	lvl := contract.RedactionNone
	reason := "guardrails found nothing to redact"
	if redacted > 0 {
		lvl = contract.RedactionPartial
		reason = fmt.Sprintf("guardrails replaced %s with placeholders", plural(redacted, "value"))
	}
	t.rc.Redaction = &contract.Redaction{Level: lvl, Reason: reason}
}
