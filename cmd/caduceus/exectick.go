package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/broker/robinhood"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

// The wiring of `caduceus exec`: the command's parsed flags into one
// executor tick against the paper or the Robinhood broker. With the
// executor gate's (gates.go) it is the only place that picks a broker
// implementation; the executor itself sees the broker.Broker port only.

// execOptions are the flags of `caduceus exec` plus what the command wires in.
type execOptions struct {
	PayloadFile  string // --payload FILE ("-" is not special; the command may read stdin into Payload)
	Payload      []byte // used instead of PayloadFile when not nil
	SkillsDir    string // --skills DIR
	Broker       string // --broker: "paper" (default) or "robinhood"
	ScenarioFile string // --scenario FILE (paper)
	MCPURL       string // --mcp-url URL (robinhood)
	MCPToken     string // bearer token for the Robinhood MCP server (from the environment, never a flag)
	Message      string // --message TEXT: the latest user message
	Now          string // --now RFC3339: the tick's clock (else the scenario's now, else the wall clock)
	Context      string // --context: may only make the detected context stricter
	// IdempotencyKey (--idempotency-key) makes the tick run at most once
	// per tenant and key: a repeat prints the stored envelope (a replay).
	IdempotencyKey string

	Env   func(string) string // the process environment (os.Getenv)
	IsTTY bool                // whether stdin is a terminal

	Store    executor.Store    // required: the executor's state (and the paper broker's)
	Audit    audit.Log         // required
	Identity contract.Identity // required: the tenant and caller the tick runs as
	// Provenance is attached to the tick's audit record: the conversation
	// and run the tick belongs to, its route and build.
	Provenance *contract.Provenance
}

// runTick runs the one tick of `caduceus exec`. It returns an invalid
// *contract.Error (exit 2) when a file or flag is not valid at all:
// unreadable payload, scenario or skills directory, a malformed payload or
// scenario, a bad --now, --context or --broker, a missing --mcp-url. Any envelope, aborted or not, comes back
// with a nil error (exit 0). Other errors (the store, the audit log, an MCP
// connection that cannot be made) are internal or carry the broker's status.
func runTick(ctx context.Context, o execOptions) (executor.Envelope, error) {
	if o.Store == nil || o.Audit == nil || o.Identity == (contract.Identity{}) {
		return executor.Envelope{}, contract.Internal(errors.New("exec: Store, Audit and Identity are required"))
	}
	payload := o.Payload
	if payload == nil {
		if o.PayloadFile == "" {
			return executor.Envelope{}, contract.FieldError("--payload", "missing_flag", "exec: --payload FILE is required")
		}
		b, err := os.ReadFile(o.PayloadFile)
		if err != nil {
			return executor.Envelope{}, contract.FieldError("--payload", "bad_file", "exec: cannot read payload file: %v", err)
		}
		payload = b
	}
	if o.SkillsDir == "" {
		return executor.Envelope{}, contract.FieldError("--skills", "missing_flag", "exec: --skills DIR is required")
	}
	if st, err := os.Stat(o.SkillsDir); err != nil || !st.IsDir() {
		return executor.Envelope{}, contract.FieldError("--skills", "bad_file", "exec: skills directory %q is not a readable directory", o.SkillsDir)
	}
	// Validate the payload before any broker is opened or dialed; its
	// context_hint is one of the run context's signals.
	parsed, err := executor.ParsePayload(payload)
	if err != nil {
		return executor.Envelope{}, err
	}
	rc, rcSource, err := executor.DetectContextSource(o.Env, o.IsTTY, o.Context, parsed.ContextHint)
	if err != nil {
		ce := contract.AsError(err)
		ce.Field = "--context"
		return executor.Envelope{}, ce
	}
	var now time.Time
	if o.Now != "" {
		if now, err = time.Parse(time.RFC3339, o.Now); err != nil {
			return executor.Envelope{}, contract.FieldError("--now", "bad_value", "exec: --now %q is not RFC 3339", o.Now)
		}
	}
	id := o.Identity

	var b broker.Broker
	switch o.Broker {
	case "", "paper":
		sim, fixed, err := openPaper(ctx, o, id.TenantSlot, now)
		if err != nil {
			return executor.Envelope{}, err
		}
		if now.IsZero() {
			now = fixed
		}
		b = sim
	case "robinhood":
		if o.MCPURL == "" {
			return executor.Envelope{}, contract.FieldError("--mcp-url", "missing_flag", "exec: --broker robinhood needs --mcp-url URL")
		}
		c, err := robinhood.Dial(ctx, o.MCPURL, o.MCPToken, nil)
		if err != nil {
			return executor.Envelope{}, err
		}
		defer c.Close()
		b = c
	default:
		return executor.Envelope{}, contract.FieldError("--broker", "bad_value", "exec: --broker %q is not paper or robinhood", o.Broker)
	}
	ex := &executor.Executor{Broker: b, Store: o.Store, Audit: o.Audit, Skills: o.SkillsDir}
	return ex.Tick(ctx, executor.TickRequest{
		Payload:        payload,
		Identity:       id,
		Provenance:     o.Provenance,
		Context:        rc,
		ContextSource:  rcSource,
		Profile:        executor.DetectProfile(o.Env),
		ProfileAccount: lookupEnv(o.Env, "HERMES_PROFILE_ACCOUNT"),
		Message:        o.Message,
		Now:            now,
		IdempotencyKey: o.IdempotencyKey,
	})
}

// lookupEnv is env(k), "" without env.
func lookupEnv(env func(string) string, k string) string {
	if env == nil {
		return ""
	}
	return env(k)
}

// openPaper loads the scenario and opens the simulator whose state the
// store keeps under a name derived from the scenario's bytes: re-running
// the same scenario continues its simulated account (orders, fills,
// consumed faults); a changed scenario starts fresh. It returns the
// scenario's fixed now, if any.
func openPaper(ctx context.Context, o execOptions, tenant contract.TenantSlot, now time.Time) (*paper.Sim, time.Time, error) {
	if o.ScenarioFile == "" {
		return nil, time.Time{}, contract.FieldError("--scenario", "missing_flag", "exec: --broker paper needs --scenario FILE")
	}
	raw, err := os.ReadFile(o.ScenarioFile)
	if err != nil {
		code := "bad_file"
		if errors.Is(err, fs.ErrNotExist) {
			code = "missing_file"
		}
		return nil, time.Time{}, contract.FieldError("--scenario", code, "exec: cannot read scenario file: %v", err)
	}
	sc, err := paper.ParseScenario(raw)
	if err != nil {
		return nil, time.Time{}, contract.FieldError("--scenario", "bad_scenario", "%v", err)
	}
	fixed, _, _ := sc.NowTime()
	clock := now
	if clock.IsZero() {
		clock = fixed
	}
	var clk func() time.Time
	if !clock.IsZero() {
		clk = func() time.Time { return clock }
		sc.Now = "" // --now wins over the scenario's now
	}
	p := paper.StorePersister{Store: o.Store, Tenant: tenant, Name: paper.AccountName(raw)}
	sim, err := paper.Open(ctx, p, sc, clk)
	if err != nil {
		return nil, time.Time{}, err
	}
	return sim, fixed, nil
}
