package executor_test

import (
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

func TestTickAs(t *testing.T) {
	f := &fixture{}
	sc := f.scenario(t)
	now, _, _ := sc.NowTime()
	sc.Now = ""
	sim, err := paper.New(sc, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: audit.NewMemory(), Skills: "testdata/skills", Now: func() time.Time { return now }}
	in := executor.TickInput{Payload: []byte(`{"strategy":"momentum","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1}]}`)}
	caller := contract.Caller{Identity: identity("slot-4"), Scopes: []contract.Scope{contract.ScopeOperate}}

	if _, err := ex.TickAs(t.Context(), contract.Caller{Identity: identity("slot-4"), Scopes: []contract.Scope{contract.ScopeRoute}}, in); contract.KindOf(err) != contract.KindDeny {
		t.Fatalf("without operate: %v", err)
	}
	if _, err := ex.TickAs(t.Context(), caller, executor.TickInput{}); contract.KindOf(err) != contract.KindInvalid {
		t.Fatalf("without payload: %v", err)
	}
	// A key without a run context is claude-code: reviewed, never placed.
	env, err := ex.TickAs(t.Context(), caller, in)
	if err != nil || env.Context != executor.ContextClaudeCode || env.Actions[0].Status != executor.StatusReviewed {
		t.Fatalf("no run context: %+v, %v", env, err)
	}
	// A cron key places.
	caller.RunContext = contract.RunCron
	caller.Harness = "autotrader"
	env, err = ex.TickAs(t.Context(), caller, in)
	if err != nil || env.Context != executor.ContextCron || env.Profile != "autotrader" || env.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("cron key: %+v, %v", env, err)
	}
	// A chat key places only on the directive.
	caller.RunContext = contract.RunChat
	in.Message = "EXECUTE: buy SPY 1"
	env, err = ex.TickAs(t.Context(), caller, in)
	if err != nil || env.Context != executor.ContextChat || env.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("chat key with directive: %+v, %v", env, err)
	}
	// The MCP tool's shape: arguments in, envelope out.
	out, err := ex.ExecuteIntents(t.Context(), caller, []byte(`{"payload":{"strategy":"momentum","intents":[]},"message":"hi"}`))
	if e, ok := out.(executor.Envelope); err != nil || !ok || !e.Audited || e.Context != executor.ContextChat {
		t.Fatalf("ExecuteIntents: %#v, %v", out, err)
	}
	for _, bad := range []string{`{"payload":{},"extra":1}`, `[]`, `{"payload":{"strategy":"x","intents":[]}} {}`, `{"message":"no payload"}`} {
		if out, err := ex.ExecuteIntents(t.Context(), caller, []byte(bad)); contract.KindOf(err) != contract.KindInvalid || out != nil {
			t.Errorf("ExecuteIntents(%s) = %v, %v; want invalid", bad, out, err)
		}
	}
	if s, err := contract.UnmarshalInstance(executor.TickInputSchema); err != nil || s == nil {
		t.Fatalf("TickInputSchema is not JSON: %v", err)
	}
}
