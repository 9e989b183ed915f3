// Package executorgate is the executor gate's module (package gate): its
// tick route and MCP tool over executor.Executor, which runs the tick and
// writes its audit record.
package executorgate

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/server"
)

// Gate is the executor gate.
type Gate struct{ ex *executor.Executor }

// New returns the executor gate over ex.
func New(ex *executor.Executor) *Gate { return &Gate{ex: ex} }

var _ gate.Gate = (*Gate)(nil)

// Name implements gate.Gate.
func (g *Gate) Name() string { return "executor" }

// Jobs implements gate.Gate: the executor has none.
func (g *Gate) Jobs() []gate.Job { return nil }

// Routes implements gate.Gate: one tick through the broker gate (seed 001).
func (g *Gate) Routes() []server.Route {
	return []server.Route{{Pattern: "POST /v1/executor/ticks", Action: "executor.tick", Scope: contract.ScopeOperate, OwnIdempotency: true, Handler: g.tick}}
}

func (g *Gate) tick(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	body, err := server.ReadBody(r)
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
	env, err := g.ex.TickAs(r.Context(), c.Caller, in)
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
	return server.WriteJSON(w, http.StatusOK, env)
}

// Tools implements gate.Gate.
func (g *Gate) Tools() []server.Tool {
	return []server.Tool{{
		Name:        "execute_intents",
		Description: "Run one executor tick: a strategist payload {strategy, mode, context_hint, intents[]} passes pre-flight, per-intent checks, broker review and the routing rules of the strategist's manifest before any order is placed. The run context is the calling key's; an abort is a normal envelope. Give idempotency_key to make a retry safe: a repeat with the same key and input returns the stored envelope (replay true) and places nothing.",
		Scope:       contract.ScopeOperate,
		InputSchema: executor.TickInputSchema,
		Audited:     true,
		Call:        g.ex.ExecuteIntents,
	}}
}

// NotConfigured returns the executor gate of a server whose executor was
// not configured: its tick route and MCP tool answer err (a problem naming
// what to configure, never a 5xx).
func NotConfigured(err error) gate.Gate { return unconfigured{err} }

type unconfigured struct{ err error }

func (u unconfigured) Name() string     { return "executor" }
func (u unconfigured) Jobs() []gate.Job { return nil }

func (u unconfigured) Routes() []server.Route {
	return []server.Route{{Pattern: "POST /v1/executor/ticks", Action: "executor.tick", Scope: contract.ScopeOperate, OwnIdempotency: true,
		Handler: func(http.ResponseWriter, *http.Request, *server.Call) error { return u.err }}}
}

func (u unconfigured) Tools() []server.Tool {
	return []server.Tool{{
		Name: "execute_intents", Description: "The executor gate is not configured on this server; every call answers what to configure.",
		Scope: contract.ScopeOperate, InputSchema: executor.TickInputSchema,
		Call: func(context.Context, contract.Caller, json.RawMessage) (any, error) { return nil, u.err },
	}}
}
