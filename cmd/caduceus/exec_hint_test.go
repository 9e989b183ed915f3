package main

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

// TestRunTickCronByHint: seed 001's run-context rule 1 — a local run is cron
// when HERMES_CRON_RUN_ID is set or the strategist's context_hint is "cron",
// and standard input is not a terminal. The hint alone never loosens a run
// that has a terminal.
func TestRunTickCronByHint(t *testing.T) {
	payload := `{"strategy":"momentum","mode":"live","context_hint":"%s","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.6,"max_slippage_pct":1}]}`
	o := tickOptions(executortest.NewMemory(), audit.NewMemory())
	o.PayloadFile = ""
	o.Env = tickEnv("HERMES_PROFILE", "autotrader") // no HERMES_CRON_RUN_ID

	o.Payload = []byte(strings.Replace(payload, "%s", "cron", 1))
	env, err := runTick(t.Context(), o)
	if err != nil || env.Context != executor.ContextCron || env.Actions[0].Status != executor.StatusPlaced {
		t.Fatalf("context_hint cron without a terminal: %+v, %v; want cron, placed", env, err)
	}

	o.IsTTY = true
	o.IdempotencyKey = "hint-with-a-tty"
	env, err = runTick(t.Context(), o)
	if err != nil || env.Context != executor.ContextClaudeCode || env.Actions[0].Status != executor.StatusReviewed {
		t.Fatalf("context_hint cron with a terminal: %+v, %v; want claude-code, reviewed", env, err)
	}

	o.IsTTY = false
	o.IdempotencyKey = "hint-chat-no-tty"
	o.Payload = []byte(strings.Replace(payload, "%s", "chat", 1))
	env, err = runTick(t.Context(), o)
	if err != nil || env.Context != executor.ContextClaudeCode || env.Actions[0].Status != executor.StatusReviewed {
		t.Fatalf("context_hint chat without a terminal: %+v, %v; want claude-code, reviewed", env, err)
	}
}
