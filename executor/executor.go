// Package executor is the broker gate (seed 001): it takes a strategist's
// intents, re-reads the strategist's manifest as the only source of truth,
// runs pre-flight (1.0-1.6), per-intent validation (2.0-2.7), review
// (3.1-3.5) and, where the routing table allows, placement (4), and returns
// the envelope (5). Every tick is one audit record.
//
// Refusals are results: an abort is an Envelope with Aborted set, a refused
// intent is an Action with its status and reason. Tick returns an error only
// for input that is not a payload at all (invalid) or for a failure of the
// executor's own store or audit log (internal).
//
// The package depends on the broker.Broker port only; broker/paper and
// broker/robinhood implement it.
//
// Choices made where the seed and DESIGN §6 are silent:
//   - A manifest whose front matter does not parse aborts manifest_invalid.
//   - A failing get_accounts, get_realized_pnl, get_equity_quotes or
//     get_equity_positions (after one retry on 5xx) aborts
//     broker_unavailable, like get_portfolio; nothing was placed yet.
//   - no_buying_power (total value, buying power or cash missing or zero)
//     skips every action, sells and cancels too, as 1.2 says ("mark every
//     action"); a buy the breaker already dropped keeps that reason.
//   - The per-name cap (2.4) applies to buys; a sell reduces the position.
//   - A review that fails (4xx, or 5xx twice) or returns no usable price is
//     a review_anomaly with a REVIEW_REFUSED / REVIEW_UNAVAILABLE /
//     NO_REVIEW_QUOTE alert, and counts toward the day's halt on cron ticks.
//   - The anomaly halt turns would-be placements into status reviewed,
//     reason review_anomaly_halt; cancels are not halted.
//   - A chat tick without a matching directive is reviewed with reason
//     execute_directive_mismatch; a cancel's directive is
//     "EXECUTE: cancel <order_id>".
//   - An option intent under the options-trader profile with a compatible
//     manifest is skipped options_unsupported (no options path exists).
//   - Cancels that are sent end cancelled or cancel_failed; one not found
//     in the account (or for another symbol) is skipped order_not_found,
//     one no longer open order_not_open.
//   - A placement that timed out twice is looked up by its ref_id in the
//     account's orders before it is reported place_failed.
//   - payload.context_hint names cron for a local run without a TTY (seed
//     001, DetectContext); otherwise the detected or key's context stays
//     authoritative and a disagreeing hint can only make it stricter, with
//     a note naming both (HintedContext); an unknown hint is noted.
//   - When the run context keeps an intent from being placed, the envelope
//     notes the context and what it was detected from.
//   - ref_ids are uuid4(), one per intent of a tick; a keyed tick records
//     them with its key, so a run that takes over the key's expired claim
//     places under the same ones (see idempotency.go). When the broker
//     answers a placement with an order it already held for the ref_id
//     (broker.Order.Existing, or found in the account's orders before a
//     takeover places), the action is already_placed, reason
//     ref_id_exists, with that order's id: never placed for an order this
//     run did not place.
//   - A missing skills root is a not_found error (the operator's to fix).
package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/internal/keyowner"
)

// Executor runs ticks. Its fields are set once and then only read, so one
// Executor may serve concurrent ticks (for different tenants or accounts).
type Executor struct {
	Broker broker.Broker // required unless Brokers is set
	// Brokers, when set, picks the broker of each tick by tenant (e.g. one
	// paper account per tenant) and takes precedence over Broker.
	Brokers func(ctx context.Context, tenant contract.TenantSlot) (broker.Broker, error)
	Store   Store     // required: day-start values and anomaly counters
	Audit   audit.Log // required: one record per tick
	Skills  string    // required: the skills root holding skills/investing/strategists/<name>/SKILL.md

	// Now is the wall clock (audit timestamps, and the tick's clock unless
	// the request fixes one). Nil means time.Now.
	Now func() time.Time
	// NewRef returns a fresh ref_id. Nil means a random UUID version 4
	// (NewUUIDv4). A keyed tick takes one per intent when it claims its key
	// and records them with it (Store.TickRefs); an unkeyed tick takes one
	// per placement.
	NewRef func() string
	// NewTickID returns a tick id. Nil means contract.NewID("tick").
	NewTickID func() string

	manifests manifestCache
	inflight  keyowner.Set
}

// TickRequest is one tick as every surface (CLI, HTTP, MCP) hands it over.
type TickRequest struct {
	// Payload is the strategist's raw JSON payload.
	Payload json.RawMessage
	// Identity is the resolved caller; its tenant keys all stored state.
	Identity contract.Identity
	// Provenance, when set, is attached to the audit record.
	Provenance *contract.Provenance
	// Context is the detected run context (DetectContext for local runs,
	// ContextFromCaller over HTTP and MCP). Empty means claude-code.
	Context RunContext
	// ContextSource says what Context was decided from (DetectContextSource,
	// or the calling key); it is noted in the envelope when the context keeps
	// an intent from being placed.
	ContextSource string
	// Profile is the loaded profile (DetectProfile); empty means "claude-code".
	Profile string
	// ProfileAccount is HERMES_PROFILE_ACCOUNT, if set (over HTTP and MCP:
	// the calling key's bound account, else the tick's account).
	ProfileAccount string
	// BoundAccount, when set, is the only account the tick may trade (the
	// calling key's binding): a manifest whose account_lock names another
	// aborts account_lock_failed.
	BoundAccount string
	// Message is the latest user message (chat: its EXECUTE: directive).
	Message string
	// Now, when not zero, is the tick's market clock (a rehearsal's --now).
	Now time.Time
	// IdempotencyKey, when set, makes the tick run at most once per tenant
	// and key (see idempotency.go); it must match ^[A-Za-z0-9._:-]{8,120}$.
	IdempotencyKey string
}

// Tick runs one tick. It returns an invalid *contract.Error, without any
// broker call and without recording anything, when the payload or identity
// is not valid at all. It returns an internal error when the store or the
// audit log fails; if that happens after the broker was called, the
// envelope is returned alongside the error so nothing that happened is
// hidden. Every other outcome, aborts included, is a nil error.
func (e *Executor) Tick(ctx context.Context, req TickRequest) (Envelope, error) {
	if (e.Broker == nil && e.Brokers == nil) || e.Store == nil || e.Audit == nil || e.Skills == "" {
		return Envelope{}, contract.Internal(fmt.Errorf("executor: Broker, Store, Audit and Skills are required"))
	}
	if !contract.ValidTenantSlot(string(req.Identity.TenantSlot)) {
		return Envelope{}, contract.FieldError("identity.tenant_slot", "bad_identity", "executor: tenant slot %q is not valid", req.Identity.TenantSlot)
	}
	if req.IdempotencyKey != "" && !contract.ValidIdempotencyKey(req.IdempotencyKey) {
		return Envelope{}, contract.FieldError("idempotency_key", "bad_idempotency_key", "executor: idempotency key %q must match ^[A-Za-z0-9._:-]{8,120}$", req.IdempotencyKey)
	}
	p, err := ParsePayload(req.Payload)
	if err != nil {
		return Envelope{}, err
	}
	if req.IdempotencyKey != "" {
		return e.idempotentTick(ctx, req, p)
	}
	return e.tick(ctx, req, p, tickRefs{})
}

// tickRefs are the ref_ids of a keyed tick (one per intent, recorded with
// its key); reused is true when an earlier run of the key recorded them.
// Without them (no key) each placement gets a fresh one.
type tickRefs struct {
	ids    []string
	reused bool
}

// tick runs one tick whose request and payload were checked.
func (e *Executor) tick(ctx context.Context, req TickRequest, p *Payload, refs tickRefs) (Envelope, error) {
	var err error
	b := e.Broker
	if e.Brokers != nil {
		if b, err = e.Brokers(ctx, req.Identity.TenantSlot); err != nil {
			return Envelope{}, contract.AsError(fmt.Errorf("executor: broker for %s: %w", req.Identity.TenantSlot, err))
		}
	}
	wall := time.Now
	if e.Now != nil {
		wall = e.Now
	}
	t := &tick{
		e:   e,
		req: req,
		p:   p,
		b:   &recorder{b: b},
		now: req.Now,

		refs:       refs.ids,
		refsReused: refs.reused,
	}
	if t.now.IsZero() {
		t.now = wall()
	}
	t.day = broker.Day(t.now)
	if req.Context == "" {
		t.req.Context = ContextClaudeCode
	}
	if req.Profile == "" {
		t.req.Profile = "claude-code"
	}
	hinted, hintNote := HintedContext(t.req.Context, t.req.ContextSource, p.ContextHint)
	if hinted != t.req.Context {
		t.req.ContextSource += "; context_hint " + p.ContextHint + " made " + string(t.req.Context) + " stricter"
		t.req.Context = hinted
	}
	t.env = Envelope{ContractVersion: contract.Version, Actions: []Action{}, Context: t.req.Context, Profile: t.req.Profile}
	if e.NewTickID != nil {
		t.env.TickID = e.NewTickID()
	} else {
		t.env.TickID = contract.NewID(contract.PrefixTick)
	}
	t.directives, t.badDirectives = ParseDirectives(req.Message)
	if req.IdempotencyKey == "" {
		t.note("%s", NotIdempotentNote)
	} else {
		t.env.IdempotencyKey = req.IdempotencyKey
	}
	if hintNote != "" {
		t.note("%s", hintNote)
	}

	reason, ferr := t.preflight(ctx)
	if ferr == nil {
		if reason != "" {
			t.env.Aborted = &reason
			t.env.Actions = []Action{}
			if t.env.AccountNumber != "" {
				t.note("resolved account: %s", t.env.AccountNumber)
			}
		} else {
			ferr = t.run(ctx)
			t.noteContext()
		}
	}
	if ferr != nil && len(t.b.calls) == 0 {
		return Envelope{}, contract.AsError(ferr)
	}
	if err := t.record(ctx, wall()); err != nil {
		return t.env, contract.AsError(err)
	}
	t.env.Audited = true
	if ferr != nil {
		return t.env, contract.AsError(ferr)
	}
	return t.env, nil
}

// tick is the state of one run through the phases.
type tick struct {
	e   *Executor
	req TickRequest
	p   *Payload
	b   *recorder
	now time.Time
	day string
	env Envelope

	m             *Manifest
	manifestSHA   string
	acct          broker.Account
	port          broker.Portfolio
	quotes        map[string]broker.Quote
	positions     map[string]broker.Position
	anomalies     int
	directives    []Directive
	badDirectives []string
	actions       []Action
	orderList     []broker.Order
	ordersLoaded  bool
	heldByContext int // intents the run context kept from being placed

	refs       []string // the keyed tick's ref_ids, by intent index
	refsReused bool     // recorded by an earlier run of the key (a takeover)

	refOrders       []broker.Order // the account's orders, read once when refsReused
	refOrdersLoaded bool
}

func (t *tick) tenant() contract.TenantSlot { return t.req.Identity.TenantSlot }

func (t *tick) note(format string, args ...any) {
	t.env.Notes = append(t.env.Notes, fmt.Sprintf(format, args...))
}

// noteContext says, in the envelope, which run context kept intents from
// being placed and what that context was detected from.
func (t *tick) noteContext() {
	if t.heldByContext == 0 {
		return
	}
	src := t.req.ContextSource
	if src == "" {
		src = "the caller's request"
	}
	rule := "claude-code never places"
	if t.req.Context == ContextChat {
		rule = "chat places only on a matching EXECUTE: directive"
	}
	t.note("run context %s (detected from: %s) kept %d intent(s) from being placed: %s", t.req.Context, src, t.heldByContext, rule)
}

// record writes the tick's one audit record.
func (t *tick) record(ctx context.Context, at time.Time) error {
	outcome := contract.OutcomeAllow
	reason := ""
	if t.env.Aborted != nil {
		outcome, reason = contract.OutcomeDeny, *t.env.Aborted
	}
	resource := "strategist:" + t.p.Strategy
	if len(resource) > 200 {
		resource = resource[:200]
	}
	rec := TickRecord{
		TickID:         t.env.TickID,
		Strategy:       t.p.Strategy,
		ManifestSHA256: t.manifestSHA,
		Context:        t.req.Context,
		Profile:        t.req.Profile,
		Message:        t.req.Message,
		Now:            t.now.Format(time.RFC3339),
		Payload:        t.req.Payload,
		BrokerCalls:    t.b.calls,
		Envelope:       t.env,
	}
	_, err := t.e.Audit.Append(context.WithoutCancel(ctx), audit.Entry{
		Outcome: contract.AuditOutcome{
			At: contract.Timestamp(at), Identity: t.req.Identity, Action: AuditAction,
			Resource: resource, Outcome: outcome, Reason: reason,
		},
		Provenance: t.req.Provenance,
		Payload:    rec,
	})
	if err != nil {
		return fmt.Errorf("executor: audit: %w", err)
	}
	return nil
}

// AuditAction is the audit action of a tick.
const AuditAction = "executor.tick"

// TickRecord is the audit payload of one tick.
type TickRecord struct {
	TickID         string          `json:"tick_id"`
	Strategy       string          `json:"strategy"`
	ManifestSHA256 string          `json:"manifest_sha256,omitempty"`
	Context        RunContext      `json:"context"`
	Profile        string          `json:"profile"`
	Message        string          `json:"message,omitempty"`
	Now            string          `json:"now"`
	Payload        json.RawMessage `json:"payload"`
	BrokerCalls    []Call          `json:"broker_calls"`
	Envelope       Envelope        `json:"envelope"`
}

// sortActions orders the actions by intent index.
func sortActions(as []Action) {
	slices.SortStableFunc(as, func(a, b Action) int { return a.IntentIndex - b.IntentIndex })
}
