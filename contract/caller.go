package contract

import (
	"context"
	"slices"
	"strings"
)

// Scope is a permission a key carries.
type Scope string

// Scopes of a key.
const (
	ScopeRoute     Scope = "route"     // use the gates (LLM routes, reads)
	ScopeConfigure Scope = "configure" // manage provisions, strategies, manifests
	ScopeOperate   Scope = "operate"   // trader decisions, executor ticks
	ScopeAdmin     Scope = "admin"     // keys, builtins, audit
)

// Scopes lists every scope, in order.
var Scopes = []Scope{ScopeRoute, ScopeConfigure, ScopeOperate, ScopeAdmin}

// RunContext is the run context a key is bound to, if any.
type RunContext string

// Run contexts of a key. A key without one is treated as RunAnalyst, the
// strictest, by every gate that cares.
const (
	RunNone    RunContext = ""
	RunCron    RunContext = "cron"
	RunChat    RunContext = "chat"
	RunAnalyst RunContext = "analyst"
)

// Caller is an authenticated caller as the gates see it: the HUX identity
// plus what the key says about it. Gates receive it from the server through
// the context and never see key material.
type Caller struct {
	Identity   Identity
	KeyID      string
	Scopes     []Scope
	Harness    string     // optional harness name the key attests ("claude-code", ...)
	RunContext RunContext // optional
	// Account, when set, is the one broker account the key may trade: its
	// executor ticks use it (as HERMES_PROFILE_ACCOUNT does for a local
	// run) and a tick naming another is refused.
	Account string
	// Grants are the exact provider/model pairs ("openai/gpt-4.1") the
	// caller may use for operator-funded LLM turns.
	Grants []string
	// Trace ties the records the call causes to a conversation and a run
	// (from the request, not the key).
	Trace Trace
}

// Granted reports whether the caller holds a grant of identity: that
// exact provider/model pair, or a pattern the operator granted that it
// matches (MatchModel: "openai/gpt-4.1*").
func (c Caller) Granted(identity string) bool {
	for _, g := range c.Grants {
		if MatchModel(g, identity) {
			return true
		}
	}
	return false
}

// Has reports whether the caller holds scope s. Admin does not imply other
// scopes: a key holds exactly what it was given.
func (c Caller) Has(s Scope) bool { return slices.Contains(c.Scopes, s) }

// CodeMissingScope is the one code of a refusal for a missing scope, on
// every gate and surface.
const CodeMissingScope = "missing_scope"

// RequireScope returns nil when c has any of scopes, else a deny error
// (CodeMissingScope) saying that what needs one of them.
func (c Caller) RequireScope(what string, scopes ...Scope) error {
	for _, s := range scopes {
		if c.Has(s) {
			return nil
		}
	}
	names := make([]string, len(scopes))
	for i, s := range scopes {
		names[i] = string(s)
	}
	return Denyf(CodeMissingScope, "%s needs the %s scope", what, strings.Join(names, " or "))
}

type callerKey struct{}

// WithCaller returns a context carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller carried by ctx.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
