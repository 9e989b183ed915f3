package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

const execTestdata = "../../executor/testdata"

func tickOptions(store executor.Store, log audit.Log) execOptions {
	return execOptions{
		PayloadFile:  filepath.Join(execTestdata, "payloads", "buy_spy.json"),
		SkillsDir:    filepath.Join(execTestdata, "skills"),
		ScenarioFile: filepath.Join(execTestdata, "brokers", "base.yaml"),
		Env:          tickEnv("HERMES_CRON_RUN_ID", "run-1", "HERMES_PROFILE", "autotrader"),
		Store:        store, Audit: log, Identity: operatorCaller("slot-1").Identity,
	}
}

func tickEnv(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestRunTickPaperEndToEnd(t *testing.T) {
	store, log := executortest.NewMemory(), audit.NewMemory()
	o := tickOptions(store, log)
	env1, err := runTick(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if env1.Context != executor.ContextCron || env1.Profile != "autotrader" || len(env1.Actions) != 1 || env1.Actions[0].Status != executor.StatusPlaced || *env1.Actions[0].OrderID != "paper-000001" {
		t.Fatalf("first run: %+v", env1)
	}
	// The same intent sent again without a key is another tick: it places
	// its own order under its own ref_id (seed 001: ref_id = uuid4()).
	env2, err := runTick(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if env2.Actions[0].Status != executor.StatusPlaced || *env2.Actions[0].OrderID != "paper-000002" || env2.Actions[0].RefID == env1.Actions[0].RefID {
		t.Fatalf("a second identical tick did not place its own order: %+v", env2)
	}
	// The paper account is kept in the store: a run under its own key
	// continues it.
	o.IdempotencyKey = "cron-run-0002"
	env3, err := runTick(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if *env3.Actions[0].OrderID != "paper-000003" || env3.BuyingPower >= env2.BuyingPower {
		t.Fatalf("keyed run did not continue the simulated account: %+v", env3)
	}
	// Its repeat is a replay: the stored envelope, no new order.
	again, err := runTick(t.Context(), o)
	if err != nil || !again.Replay || again.TickID != env3.TickID || *again.Actions[0].OrderID != "paper-000003" {
		t.Fatalf("repeat of a keyed run: %+v, %v", again, err)
	}
	o.Message = "something else"
	if _, err := runTick(t.Context(), o); contract.KindOf(err) != contract.KindConflict {
		t.Fatalf("same key, other input: %v; want conflict", err)
	}
	o.Message, o.IdempotencyKey = "", ""
	if n := len(log.Records(o.Identity.TenantSlot)); n != 4 {
		t.Fatalf("%d audit records, want 4 (three ticks and a replay)", n)
	}

	// Chat: a TTY and a chat session; the directive decides.
	o.Env = tickEnv("HERMES_SESSION_TYPE", "chat", "HERMES_PROFILE", "autotrader")
	o.IsTTY = true
	o.Message = "EXECUTE: buy SPY 2"
	env3, err = runTick(t.Context(), o)
	if err != nil || env3.Context != executor.ContextChat || env3.Actions[0].Status != executor.StatusReviewed || env3.Actions[0].Reason != executor.ReasonExecuteMismatch {
		t.Fatalf("chat, mismatching directive: %+v, %v", env3, err)
	}
	// --context can only make it stricter.
	o.Message, o.Context = "EXECUTE: buy SPY 1", "cron"
	env4, err := runTick(t.Context(), o)
	if err != nil || env4.Context != executor.ContextChat || env4.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("chat with directive and a looser --context: %+v, %v", env4, err)
	}
	o.Context = "claude-code"
	env5, err := runTick(t.Context(), o)
	if err != nil || env5.Context != executor.ContextClaudeCode || env5.Actions[0].Status != executor.StatusReviewed {
		t.Fatalf("--context claude-code: %+v, %v", env5, err)
	}
}

func TestRunTickNowAndAbort(t *testing.T) {
	o := tickOptions(executortest.NewMemory(), audit.NewMemory())
	// The payload says momentum; point it at the windowed strategist by writing a payload.
	p := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(p, []byte(`{"strategy":"windowed","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.6,"max_slippage_pct":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	o.PayloadFile = p
	o.Now = "2026-06-26T20:00:00-04:00"
	env, err := runTick(t.Context(), o)
	if err != nil || env.Aborted == nil || *env.Aborted != executor.AbortOutsideTimeWindow {
		t.Fatalf("--now outside the window must abort (a normal envelope): %+v, %v", env, err)
	}
}

func TestRunTickInvalid(t *testing.T) {
	base := tickOptions(executortest.NewMemory(), audit.NewMemory())
	for name, mut := range map[string]func(*execOptions){
		"no payload flag":  func(o *execOptions) { o.PayloadFile = "" },
		"missing payload":  func(o *execOptions) { o.PayloadFile = "nope.json" },
		"bad payload":      func(o *execOptions) { o.Payload = []byte("{") },
		"no skills":        func(o *execOptions) { o.SkillsDir = "" },
		"skills not a dir": func(o *execOptions) { o.SkillsDir = o.ScenarioFile },
		"bad now":          func(o *execOptions) { o.Now = "noon" },
		"bad context":      func(o *execOptions) { o.Context = "yolo" },
		"bad broker":       func(o *execOptions) { o.Broker = "etrade" },
		"no scenario":      func(o *execOptions) { o.ScenarioFile = "" },
		"missing scenario": func(o *execOptions) { o.ScenarioFile = "nope.yaml" },
		"bad scenario":     func(o *execOptions) { o.ScenarioFile = filepath.Join(execTestdata, "payloads", "buy_spy.json") },
		"robinhood no url": func(o *execOptions) { o.Broker = "robinhood" },
	} {
		o := base
		mut(&o)
		env, err := runTick(t.Context(), o)
		if contract.KindOf(err) != contract.KindInvalid || err == nil {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
		if env.TickID != "" {
			t.Errorf("%s: an envelope came back with an invalid error", name)
		}
	}
}
