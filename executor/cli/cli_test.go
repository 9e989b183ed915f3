package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/cli"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

const td = "../testdata"

func opts(store executor.Store, log audit.Log) cli.Options {
	return cli.Options{
		PayloadFile:  filepath.Join(td, "payloads", "buy_spy.json"),
		SkillsDir:    filepath.Join(td, "skills"),
		ScenarioFile: filepath.Join(td, "brokers", "base.yaml"),
		Env:          env("HERMES_CRON_RUN_ID", "run-1", "HERMES_PROFILE", "autotrader"),
		Store:        store, Audit: log,
	}
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestExecPaperEndToEnd(t *testing.T) {
	store, log := executortest.NewMemory(), audit.NewMemory()
	o := opts(store, log)
	env1, err := cli.Exec(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if env1.Context != executor.ContextCron || env1.Profile != "autotrader" || len(env1.Actions) != 1 || env1.Actions[0].Status != executor.StatusPlaced || *env1.Actions[0].OrderID != "paper-000001" {
		t.Fatalf("first run: %+v", env1)
	}
	// The same intent re-sent the same New York day without a key: the
	// derived ref_id lets the broker return the first order, not a second.
	env2, err := cli.Exec(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if *env2.Actions[0].OrderID != "paper-000001" || env2.Actions[0].RefID != env1.Actions[0].RefID {
		t.Fatalf("a re-sent identical intent placed again: %+v", env2)
	}
	// The paper account is kept in the store: a run under its own key
	// continues it.
	o.IdempotencyKey = "cron-run-0002"
	env3, err := cli.Exec(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if *env3.Actions[0].OrderID != "paper-000002" || env3.BuyingPower >= env1.BuyingPower {
		t.Fatalf("keyed run did not continue the simulated account: %+v", env3)
	}
	// Its repeat is a replay: the stored envelope, no new order.
	again, err := cli.Exec(t.Context(), o)
	if err != nil || !again.Replay || again.TickID != env3.TickID || *again.Actions[0].OrderID != "paper-000002" {
		t.Fatalf("repeat of a keyed run: %+v, %v", again, err)
	}
	o.Message = "something else"
	if _, err := cli.Exec(t.Context(), o); contract.KindOf(err) != contract.KindConflict {
		t.Fatalf("same key, other input: %v; want conflict", err)
	}
	o.Message, o.IdempotencyKey = "", ""
	if n := len(log.Records(cli.LocalIdentity.TenantSlot)); n != 4 {
		t.Fatalf("%d audit records, want 4 (three ticks and a replay)", n)
	}

	// Chat: a TTY and a chat session; the directive decides.
	o.Env = env("HERMES_SESSION_TYPE", "chat", "HERMES_PROFILE", "autotrader")
	o.IsTTY = true
	o.Message = "EXECUTE: buy SPY 2"
	env3, err = cli.Exec(t.Context(), o)
	if err != nil || env3.Context != executor.ContextChat || env3.Actions[0].Status != executor.StatusReviewed || env3.Actions[0].Reason != executor.ReasonExecuteMismatch {
		t.Fatalf("chat, mismatching directive: %+v, %v", env3, err)
	}
	// --context can only make it stricter.
	o.Message, o.Context = "EXECUTE: buy SPY 1", "cron"
	env4, err := cli.Exec(t.Context(), o)
	if err != nil || env4.Context != executor.ContextChat || env4.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("chat with directive and a looser --context: %+v, %v", env4, err)
	}
	o.Context = "claude-code"
	env5, err := cli.Exec(t.Context(), o)
	if err != nil || env5.Context != executor.ContextClaudeCode || env5.Actions[0].Status != executor.StatusReviewed {
		t.Fatalf("--context claude-code: %+v, %v", env5, err)
	}
}

func TestExecNowAndAbort(t *testing.T) {
	o := opts(executortest.NewMemory(), audit.NewMemory())
	// The payload says momentum; point it at the windowed strategist by writing a payload.
	p := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(p, []byte(`{"strategy":"windowed","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.6,"max_slippage_pct":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	o.PayloadFile = p
	o.Now = "2026-06-26T20:00:00-04:00"
	env, err := cli.Exec(t.Context(), o)
	if err != nil || env.Aborted == nil || *env.Aborted != executor.AbortOutsideTimeWindow {
		t.Fatalf("--now outside the window must abort (a normal envelope): %+v, %v", env, err)
	}
}

func TestExecInvalid(t *testing.T) {
	base := opts(executortest.NewMemory(), audit.NewMemory())
	for name, mut := range map[string]func(*cli.Options){
		"no payload flag":  func(o *cli.Options) { o.PayloadFile = "" },
		"missing payload":  func(o *cli.Options) { o.PayloadFile = "nope.json" },
		"bad payload":      func(o *cli.Options) { o.Payload = []byte("{") },
		"no skills":        func(o *cli.Options) { o.SkillsDir = "" },
		"skills not a dir": func(o *cli.Options) { o.SkillsDir = o.ScenarioFile },
		"bad now":          func(o *cli.Options) { o.Now = "noon" },
		"bad context":      func(o *cli.Options) { o.Context = "yolo" },
		"bad broker":       func(o *cli.Options) { o.Broker = "etrade" },
		"no scenario":      func(o *cli.Options) { o.ScenarioFile = "" },
		"missing scenario": func(o *cli.Options) { o.ScenarioFile = "nope.yaml" },
		"bad scenario":     func(o *cli.Options) { o.ScenarioFile = filepath.Join(td, "payloads", "buy_spy.json") },
		"robinhood no url": func(o *cli.Options) { o.Broker = "robinhood" },
	} {
		o := base
		mut(&o)
		env, err := cli.Exec(t.Context(), o)
		if contract.KindOf(err) != contract.KindInvalid || err == nil {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
		if env.TickID != "" {
			t.Errorf("%s: an envelope came back with an invalid error", name)
		}
	}
}

func TestPaperBrokers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(td, "brokers", "base.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	store, log := executortest.NewMemory(), audit.NewMemory()
	brokers, err := cli.PaperBrokers(store, raw)
	if err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{Brokers: brokers, Store: store, Audit: log, Skills: filepath.Join(td, "skills")}
	payload, _ := os.ReadFile(filepath.Join(td, "payloads", "buy_spy.json"))
	id := func(slot string) contract.Identity {
		return contract.Identity{TenantSlot: contract.TenantSlot(slot), Subject: "usr_00000000000000000000000000000009", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter}
	}
	for i, tc := range []struct{ slot, key, order string }{{"slot-1", "", "paper-000001"}, {"slot-1", "tick-key-0002", "paper-000002"}, {"slot-2", "", "paper-000001"}} {
		env, err := ex.Tick(t.Context(), executor.TickRequest{Payload: payload, Identity: id(tc.slot), Context: executor.ContextCron, IdempotencyKey: tc.key})
		if err != nil || env.Actions[0].Status != executor.StatusPlaced || *env.Actions[0].OrderID != tc.order {
			t.Fatalf("tick %d (%s): %+v, %v; want order %s (one paper account per tenant)", i, tc.slot, env, err, tc.order)
		}
	}
	// A new process (new PaperBrokers) continues each tenant's account from the store.
	brokers2, _ := cli.PaperBrokers(store, raw)
	b, err := brokers2(t.Context(), "slot-1")
	if err != nil {
		t.Fatal(err)
	}
	os, err := b.Orders(t.Context(), "619508153")
	if err != nil || len(os) != 2 {
		t.Fatalf("reloaded slot-1 account has %d orders, %v", len(os), err)
	}
	if _, err := cli.PaperBrokers(store, []byte("nope: 1")); contract.KindOf(err) != contract.KindInvalid {
		t.Fatalf("bad scenario: %v", err)
	}
}
