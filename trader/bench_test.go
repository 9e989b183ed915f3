package trader_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/caduceus-dev/caduceus/trader"
)

// BenchmarkApplyDecision measures applied decisions on the in-memory store:
// each iteration is a new decision_id that pauses or resumes the current
// strategy, so every one changes state, reconciles and is audited.
func BenchmarkApplyDecision(b *testing.B) {
	e := newEnv(b, trader.Options{})
	bodies := [2]map[string]any{
		{"action": "pause", "target_strategy_id": nil, "expected_active_strategy_id": sA},
		{"action": "resume", "target_strategy_id": nil, "expected_active_strategy_id": sA},
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := bodies[i%2]
		m["decision_id"] = fmt.Sprintf("bench-%d", i)
		r, err := e.svc.Apply(ctx, hermes, body(m))
		if err != nil || r.Status != trader.Applied {
			b.Fatalf("%d: %s %v %v", i, r.Status, err, r.Errors)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// BenchmarkReplay measures a repeated decision_id: the idempotency lookup,
// the stored response, and the attempt's audit record.
func BenchmarkReplay(b *testing.B) {
	e := newEnv(b, trader.Options{})
	req := body(nil)
	ctx := context.Background()
	if r, _ := e.svc.Apply(ctx, hermes, req); r.Status != trader.Applied {
		b.Fatal(r.Errors)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := e.svc.Apply(ctx, hermes, req)
		if err != nil || !r.Replay() {
			b.Fatalf("%s %v", r.Status, err)
		}
	}
}

// BenchmarkParseRequest measures the parser alone (schema backstop included).
func BenchmarkParseRequest(b *testing.B) {
	req := body(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, issues := trader.ParseRequest(req); len(issues) > 0 {
			b.Fatal(issues)
		}
	}
}
