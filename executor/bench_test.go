package executor_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

// BenchmarkTick20Intents is one cron tick of 20 buy intents against the
// in-process paper broker: manifest read and parse, pre-flight, validation,
// 20 reviews, 20 placements, the envelope and the audit record (DESIGN §9
// budget: <= 1 ms).
func BenchmarkTick20Intents(b *testing.B) {
	b.Run("audit=memory", func(b *testing.B) { benchTick(b, audit.NewMemory()) })
	// The same tick with an audit log that only validates the entry: the
	// difference is the cost of sealing the record (canonical JSON + hash).
	b.Run("audit=check-only", func(b *testing.B) { benchTick(b, nopLog{}) })
}

func benchTick(b *testing.B, log audit.Log) {
	var sc strings.Builder
	sc.WriteString("accounts:\n  - {account_number: \"1\", is_default: true, agentic_allowed: true, portfolio: {total_value: 1.0e+12, buying_power: 1.0e+12, cash: 1.0e+12}}\nquotes:\n")
	var intents []string
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&sc, "  S%02d: {last_trade_price: 100, bid_price: 99.99, ask_price: 100.01}\n", i)
		intents = append(intents, fmt.Sprintf(`{"symbol":"S%02d","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":100.01,"max_slippage_pct":1}`, i))
	}
	s, err := paper.ParseScenario([]byte(sc.String()))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 6, 26, 14, 0, 0, 0, time.UTC)
	sim, err := paper.New(s, func() time.Time { return now })
	if err != nil {
		b.Fatal(err)
	}
	ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: log, Skills: "testdata/skills", Now: func() time.Time { return now }}
	refs := 0 // a fresh ref_id per placement: every iteration places its orders
	ex.NewRef = func() string { refs++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", refs) }
	req := executor.TickRequest{
		Payload:  []byte(`{"strategy":"bench","mode":"live","intents":[` + strings.Join(intents, ",") + `]}`),
		Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_00000000000000000000000000000001", Surface: contract.SurfaceWorker, Trust: contract.TrustRouter},
		Context:  executor.ContextCron, Profile: "autotrader",
	}
	env, err := ex.Tick(b.Context(), req)
	if err != nil || env.Aborted != nil || len(env.Actions) != 20 || env.Actions[19].Status != executor.StatusPlaced {
		b.Fatalf("warm-up tick: %v %s", err, pretty(env))
	}
	b.ReportAllocs()
	for b.Loop() {
		env, err := ex.Tick(b.Context(), req)
		if err != nil || env.Actions[19].Status != executor.StatusPlaced {
			b.Fatal(err)
		}
	}
}
