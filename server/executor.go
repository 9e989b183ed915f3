package server

import (
	"net/http"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

// The executor gate's HTTP handler and MCP tool: thin layers over
// executor.Executor, which runs the tick and writes its audit record.

func (s *Server) executorTick(w http.ResponseWriter, r *http.Request, c *Call) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	in, err := executor.DecodeTickInput(body)
	if err != nil {
		return err
	}
	// Stripe's convention: the key in the Idempotency-Key header. A key in
	// the body is accepted too; the two must not disagree.
	if h := r.Header.Get("Idempotency-Key"); h != "" {
		if in.IdempotencyKey != "" && in.IdempotencyKey != h {
			return contract.FieldError("Idempotency-Key", "bad_idempotency_key", "the Idempotency-Key header %q and the body's idempotency_key %q differ", h, in.IdempotencyKey)
		}
		in.IdempotencyKey = h
	}
	env, err := s.cfg.Executor.TickAs(r.Context(), c.Caller, in)
	c.Audited = env.Audited
	if env.TickID != "" {
		c.Resource = "tick/" + env.TickID
	}
	if err != nil {
		return err
	}
	if env.Aborted != nil {
		c.Outcome, c.Reason = contract.OutcomeDeny, *env.Aborted
	}
	if env.Replay {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	// An abort is a normal outcome: 200 with the envelope.
	return WriteJSON(w, http.StatusOK, env)
}

func (s *Server) executorTools() []Tool {
	return []Tool{{
		Name:        "execute_intents",
		Description: "Run one executor tick: a strategist payload {strategy, mode, context_hint, intents[]} passes pre-flight, per-intent checks, broker review and the routing rules of the strategist's manifest before any order is placed. The run context is the calling key's; an abort is a normal envelope. Give idempotency_key to make a retry safe: a repeat with the same key and input returns the stored envelope (replay true) and places nothing.",
		Scope:       contract.ScopeOperate,
		InputSchema: executor.TickInputSchema,
		Audited:     true,
		Call:        s.cfg.Executor.ExecuteIntents,
	}}
}
