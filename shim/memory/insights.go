package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
)

// Insight thresholds: an error signature seen on at least minRecurringErrors
// turns, and a rule with at least minRetryErrors retry_error outcomes, become
// candidates.
const (
	minRecurringErrors = 2
	minRetryErrors     = 2
)

// Candidate kinds.
const (
	CandidateRecurringError = "recurring_error" // an error that keeps coming back, with the entities seen around it
	CandidateRetryingRule   = "retrying_rule"   // a rule whose firing keeps being followed by an error
)

// Candidate is one reviewable proposal: a shim.Provision with status candidate
// (valid against shim.provision.schema.json), the context entries it
// refers to that do not exist yet, why, and the evidence. Accepting it is
// an ordinary create of Context then Provision (with status set to active).
type Candidate struct {
	Kind         string                 `json:"kind"`
	Reason       string                 `json:"reason"`
	Provision    shim.Provision         `json:"provision"`
	Context      []shim.ContextEntry    `json:"context,omitempty"`
	EvidenceRefs []contract.EvidenceRef `json:"evidence_refs"`
}

// Insights is the answer of GET /v1/insights.
type Insights struct {
	Project             string      `json:"project,omitempty"`
	CandidateProvisions []Candidate `json:"candidate_provisions"`
}

// Insights synthesizes candidate provisions for the caller from its entity
// memory in project ("": every project) and its rule outcomes. It reads
// only: no provision or entry is written, so active rules never change.
// Errors: deny (missing_scope) without read scope.
func (m *Memory) Insights(ctx context.Context, caller contract.Caller, project string) (Insights, error) {
	if err := authorizeRead(caller); err != nil {
		return Insights{}, err
	}
	tenant, subject := caller.Identity.TenantSlot, caller.Identity.Subject
	es, err := m.cfg.Store.ListEntities(ctx, tenant, subject, project, 1000)
	if err != nil {
		return Insights{}, asErr(err)
	}
	os, err := m.cfg.Store.ListOutcomes(ctx, tenant, subject, 1000)
	if err != nil {
		return Insights{}, asErr(err)
	}
	out := Insights{Project: project, CandidateProvisions: []Candidate{}}
	for _, c := range recurringErrors(es, os) {
		out.CandidateProvisions = append(out.CandidateProvisions, c)
	}
	retrying, err := m.retryingRules(ctx, tenant, project, os)
	if err != nil {
		return Insights{}, err
	}
	out.CandidateProvisions = append(out.CandidateProvisions, retrying...)
	valid := out.CandidateProvisions[:0]
	for _, c := range out.CandidateProvisions {
		b, _ := json.Marshal(c.Provision)
		if _, err := shim.DecodeProvision(b); err != nil {
			m.cfg.Logf("shim: insights: dropped candidate %s: %v", c.Provision.ID, err)
			continue
		}
		valid = append(valid, c)
	}
	out.CandidateProvisions = valid
	return out, nil
}

func shortHash(parts ...string) string {
	h := contract.SHA256([]byte(strings.Join(parts, "\x00")))
	return strings.TrimPrefix(h, "sha256:")[:12]
}

func entityEvidence(e Entity) contract.EvidenceRef {
	return contract.EvidenceRef{Kind: contract.EvidenceMemory, ID: "entity:" + e.Project + ":" + e.Kind + ":" + shortHash(e.Value),
		Hash: contract.SHA256([]byte(e.Value))}
}

func receiptEvidence(id string) contract.EvidenceRef {
	return contract.EvidenceRef{Kind: contract.EvidenceReceipt, ID: id}
}

// errorType is the exception type of a signature ("KeyError: <str>" -> "KeyError").
func errorType(sig string) string {
	t, _, _ := strings.Cut(sig, ":")
	return strings.TrimSpace(t)
}

// recurringErrors: each error_signature seen at least minRecurringErrors
// times with at least one file_path or code_symbol of its project seen
// since it first appeared (the "fix entity": where the work went) becomes
// a shim candidate triggered by the error type, whose context names those
// entities.
func recurringErrors(es []Entity, os []shim.RuleOutcome) []Candidate {
	var out []Candidate
	for _, sig := range es {
		if sig.Kind != KindErrorSignature || sig.Count < minRecurringErrors {
			continue
		}
		first, _ := contract.ParseTimestamp(sig.FirstSeen)
		var fixes []Entity
		for _, e := range es { // most recent first
			if (e.Kind == KindFilePath || e.Kind == KindCodeSymbol) && e.Project == sig.Project {
				if last, err := contract.ParseTimestamp(e.LastSeen); err == nil && !last.Before(first) {
					fixes = append(fixes, e)
				}
			}
			if len(fixes) == 3 {
				break
			}
		}
		if len(fixes) == 0 {
			continue
		}
		h := shortHash(sig.Project, sig.Value)
		ref := "detail:memory/error-" + h
		typ := errorType(sig.Value)
		var body strings.Builder
		fmt.Fprintf(&body, "The error %q has come back %d times in project %s. Work around it last touched:\n", sig.Value, sig.Count, sig.Project)
		ev := []contract.EvidenceRef{entityEvidence(sig)}
		for _, f := range fixes {
			fmt.Fprintf(&body, "- %s %s (seen %d times)\n", f.Kind, f.Value, f.Count)
			ev = append(ev, entityEvidence(f))
		}
		body.WriteString("Check these before retrying the same change.")
		for _, o := range os {
			if o.ErrorSignature == sig.Value && len(ev) < 20 {
				ev = append(ev, receiptEvidence(o.NextReceipt))
			}
		}
		p := shim.Provision{ID: "CAND-ERR-" + h, Status: shim.StatusCandidate, Action: shim.ActionShim, ContextRefs: []string{ref},
			Triggers:            shim.Triggers{Mode: "any", Regex: []shim.Regex{{Pattern: regexp.QuoteMeta(typ) + `\s*:`}}},
			OncePerConversation: true}
		out = append(out, Candidate{Kind: CandidateRecurringError,
			Reason:       fmt.Sprintf("error signature seen %d times with %d related entities", sig.Count, len(fixes)),
			Provision:    p,
			Context:      []shim.ContextEntry{{Ref: ref, Kind: "detail", Title: "Recurring error: " + truncate(typ, 150), Body: body.String()}},
			EvidenceRefs: ev})
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// retryingRules: each provision with at least minRetryErrors retry_error
// outcomes becomes a candidate revision: a copy (id "<id>.candidate",
// status candidate, no version, not builtin) whose context adds a detail
// entry listing the errors that followed it.
func (m *Memory) retryingRules(ctx context.Context, tenant contract.TenantSlot, project string, os []shim.RuleOutcome) ([]Candidate, error) {
	type agg struct {
		fired, retries int
		sigs           []string
		receipts       []string
		builtin        bool
	}
	by := map[string]*agg{}
	for _, o := range os {
		if project != "" && o.Project != project {
			continue
		}
		a := by[o.Provision]
		if a == nil {
			a = &agg{}
			by[o.Provision] = a
		}
		a.fired++
		a.builtin = a.builtin || o.Builtin
		if o.Outcome == OutcomeRetryError {
			a.retries++
			if !slices.Contains(a.sigs, o.ErrorSignature) {
				a.sigs = append(a.sigs, o.ErrorSignature)
			}
			a.receipts = append(a.receipts, o.Receipt, o.NextReceipt)
		}
	}
	ids := make([]string, 0, len(by))
	for id, a := range by {
		if a.retries >= minRetryErrors {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []Candidate
	for _, id := range ids {
		a := by[id]
		p, err := m.cfg.Rules.GetProvision(ctx, tenant, id)
		if isNotFound(err) {
			p, err = m.cfg.Rules.GetProvision(ctx, m.cfg.BuiltinTenant, id)
		}
		if isNotFound(err) {
			continue // deleted since
		}
		if err != nil {
			return nil, asErr(err)
		}
		c := p
		c.ID = candidateID(p.ID)
		c.Status, c.Version, c.UpdatedAt, c.SystemBuiltin, c.FabricGovernance = shim.StatusCandidate, 0, "", false, nil
		c.Match = cloneMatch(p.Match)
		c.ContextRefs = slices.Clone(p.ContextRefs)
		cand := Candidate{Kind: CandidateRetryingRule,
			Reason: fmt.Sprintf("fired %d times, followed by an error %d times", a.fired, a.retries)}
		if c.Action == shim.ActionShim && len(c.ContextRefs) < 64 {
			ref := "detail:memory/retry-" + shortHash(tenantKey(tenant), p.ID)
			c.ContextRefs = append(c.ContextRefs, ref)
			var body strings.Builder
			fmt.Fprintf(&body, "After %s fired, the next turn failed with:\n", p.ID)
			for _, s := range a.sigs {
				fmt.Fprintf(&body, "- %s\n", s)
			}
			cand.Context = []shim.ContextEntry{{Ref: ref, Kind: "detail", Title: "Errors after " + truncate(p.ID, 150), Body: body.String()}}
		}
		cand.Provision = c
		for _, r := range a.receipts {
			if r != "" && len(cand.EvidenceRefs) < 20 && !slices.ContainsFunc(cand.EvidenceRefs, func(e contract.EvidenceRef) bool { return e.ID == r }) {
				cand.EvidenceRefs = append(cand.EvidenceRefs, receiptEvidence(r))
			}
		}
		out = append(out, cand)
	}
	slices.SortStableFunc(out, func(a, b Candidate) int { return cmp.Compare(a.Provision.ID, b.Provision.ID) })
	return out, nil
}

func tenantKey(t contract.TenantSlot) string { return string(t) }

// candidateID is "<id>.candidate", shortened to fit the 128-byte id limit.
func candidateID(id string) string {
	const suffix = ".candidate"
	if len(id)+len(suffix) > 128 {
		id = id[:128-len(suffix)-9] + "-" + shortHash(id)[:8]
	}
	return id + suffix
}

func cloneMatch(m *shim.Match) *shim.Match {
	if m == nil {
		return nil
	}
	c := *m
	c.Protocols, c.Models, c.Harnesses = slices.Clone(m.Protocols), slices.Clone(m.Models), slices.Clone(m.Harnesses)
	return &c
}
