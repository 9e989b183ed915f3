package executor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// TickInput is the body of POST /v1/executor/ticks and the arguments of the
// MCP tool execute_intents.
type TickInput struct {
	Payload json.RawMessage `json:"payload"`           // the strategist's payload object
	Message string          `json:"message,omitempty"` // the latest user message (chat keys: its EXECUTE: directive)
	// IdempotencyKey makes the tick run at most once per tenant and key
	// (HTTP also takes it from the Idempotency-Key header).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Account is the broker account to trade when the strategist's
	// manifest does not pin one (seed 001: HERMES_PROFILE_ACCOUNT, else the
	// default account). A key bound to an account trades that one: a tick
	// naming another is refused account_not_bound.
	Account string `json:"account,omitempty"`
}

// TickInputSchema is the JSON Schema of TickInput, for the MCP tool's input
// schema and for validating HTTP bodies at the edge.
var TickInputSchema = json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["payload"],
  "properties": {
    "payload": {"type": "object", "description": "the strategist payload: {strategy, mode, context_hint, intents[]}"},
    "message": {"type": "string", "description": "the latest user message; chat places only on a matching EXECUTE: directive"},
    "idempotency_key": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{8,120}$", "description": "run the tick at most once for this key (per tenant, kept at least 24 hours): a repeat with the same payload, message and account returns the stored envelope with replay true and calls no broker; with anything else it is a conflict. Without a key a retry runs again."},
    "account": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,64}$", "description": "the broker account to trade when the strategist's manifest does not pin one (as HERMES_PROFILE_ACCOUNT for a local run); without it, the calling key's bound account, else the default account. A key bound to an account may name only that one (else 403 account_not_bound)."}
  }
}`)

// TickAs runs a tick for an authenticated HTTP or MCP caller. The run
// context is the calling key's (ContextFromCaller: a key without one is
// claude-code and never places); the profile is the key's harness, or
// "claude-code" when it has none; the profile account is the key's bound
// account, else in.Account; the clock is the wall clock. A tick naming an
// account other than the key's bound one is refused with a deny error
// account_not_bound (403), before any broker call and recording nothing. The operate
// scope a tick needs is checked once, at the edge that admits the caller
// (the route's scope of POST /v1/executor/ticks, the MCP tool's scope,
// which hides execute_intents from other keys). It returns an invalid
// *contract.Error when the input is not a payload, and otherwise what Tick
// returns.
func (e *Executor) TickAs(ctx context.Context, c contract.Caller, in TickInput) (Envelope, error) {
	if len(in.Payload) == 0 {
		return Envelope{}, contract.FieldError("/payload", "missing_field", "executor: payload is required")
	}
	account, err := TickAccount(c, in.Account)
	if err != nil {
		return Envelope{}, err
	}
	profile := c.Harness
	if profile == "" {
		profile = "claude-code"
	}
	src := "the calling key's run context " + string(c.RunContext)
	if c.RunContext == "" {
		src = "the calling key has no run context"
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	return e.Tick(ctx, TickRequest{
		Payload:        in.Payload,
		Identity:       c.Identity,
		Provenance:     c.Provenance(contract.ActorAssistant, contract.Timestamp(now())),
		Context:        ContextFromCaller(c),
		ContextSource:  src,
		Profile:        profile,
		Message:        in.Message,
		IdempotencyKey: in.IdempotencyKey,
		ProfileAccount: account,
		BoundAccount:   c.Account,
	})
}

// TickAccount is the account a caller's tick trades when its manifest pins
// none: the key's bound account, else named (empty: the default account).
// A malformed named account is invalid bad_account; one other than the
// key's bound account is a deny account_not_bound.
func TickAccount(c contract.Caller, named string) (string, error) {
	if named != "" && !contract.ValidAccount(named) {
		return "", contract.FieldError("/account", "bad_account", "executor: account %q must be 1 to 64 of A-Z a-z 0-9 . _ : -", named)
	}
	if c.Account == "" {
		return named, nil
	}
	if named != "" && named != c.Account {
		e := contract.Denyf("account_not_bound", "executor: the calling key is bound to account %s; this tick names account %s", c.Account, named)
		e.Field = "/account"
		return "", e
	}
	return c.Account, nil
}

// ExecuteIntents is the MCP tool execute_intents (server.Tool.Call's
// shape): args is a TickInput, decoded strictly; the result is the
// Envelope. Errors are those of TickAs, plus invalid for arguments that do
// not decode.
func (e *Executor) ExecuteIntents(ctx context.Context, c contract.Caller, args json.RawMessage) (any, error) {
	in, err := DecodeTickInput(args)
	if err != nil {
		return nil, err
	}
	env, err := e.TickAs(ctx, c, in)
	if err != nil && !env.Audited {
		return nil, err
	}
	return env, err
}

// DecodeTickInput decodes an HTTP body or MCP arguments into a TickInput,
// refusing unknown fields and trailing data with an invalid error.
func DecodeTickInput(b []byte) (TickInput, error) {
	var in TickInput
	if err := contract.CheckJSON(b); err != nil {
		return TickInput{}, err
	}
	switch err := contract.DecodeStrict(b, &in); {
	case errors.Is(err, contract.ErrTrailingData):
		return TickInput{}, contract.Invalidf("bad_json", "executor: tick input has data after the JSON object")
	case err != nil:
		return TickInput{}, contract.Invalidf("bad_json", "executor: tick input must be {\"payload\": {...}, \"message\": \"...\", \"idempotency_key\": \"...\", \"account\": \"...\"}: %v", err)
	}
	return in, nil
}
