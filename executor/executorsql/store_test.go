package executorsql_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executorsql"
	"github.com/caduceus-dev/caduceus/executor/executortest"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

func TestExecutorStateConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		executortest.TestStore(t, func(t *testing.T) executor.Store { return executorsql.New(storetest.OpenSQLite(t)) })
	})
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			executortest.TestStore(t, func(t *testing.T) executor.Store { return executorsql.New(storetest.OpenPostgres(t, dsn)) })
		})
	}
}

// TestExecutorTicksOnSQL runs two cron ticks on one SQL store, each in an
// executor of its own (as two `caduceus exec` runs or two processes would):
// the paper account, the day-start value and the audit chain all live in
// the database and survive between runs.
func TestExecutorTicksOnSQL(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		td := filepath.Join("..", "..", "executor", "testdata")
		scenario, err := os.ReadFile(filepath.Join(td, "brokers", "base.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		payload, err := os.ReadFile(filepath.Join(td, "payloads", "buy_spy.json"))
		if err != nil {
			t.Fatal(err)
		}
		id := contract.Identity{TenantSlot: "slot-3", Subject: "usr_00000000000000000000000000000003", Surface: contract.SurfaceWorker, Trust: contract.TrustWorker}
		now := time.Date(2026, 6, 26, 10, 0, 0, 0, broker.NewYork)
		for i, want := range []string{"paper-000001", "paper-000002"} {
			brokers, err := paper.Brokers(executorsql.New(db), scenario)
			if err != nil {
				t.Fatal(err)
			}
			ex := &executor.Executor{Brokers: brokers, Store: executorsql.New(db), Audit: db.Audit(), Skills: filepath.Join(td, "skills")}
			env, err := ex.Tick(t.Context(), executor.TickRequest{
				Payload: payload, Identity: id, Context: executor.ContextCron, Profile: "autotrader", Now: now,
				IdempotencyKey: fmt.Sprintf("sql-run-%04d", i), // two distinct runs: each places
			})
			if err != nil {
				t.Fatal(err)
			}
			if env.Aborted != nil || env.Actions[0].Status != executor.StatusPlaced || *env.Actions[0].OrderID != want {
				t.Fatalf("run %d: %+v", i, env)
			}
		}
		day := "2026-06-26"
		if v, err := executorsql.New(db).CaptureDayStart(t.Context(), id.TenantSlot, "619508153", day, 1); err != nil || v != 10000 {
			t.Fatalf("day start kept in SQL = %v, %v; want the first tick's 10000", v, err)
		}
		var n int
		if err := db.QueryRow(t.Context(), `SELECT COUNT(*) FROM audit_records WHERE tenant = ? AND action = ?`, string(id.TenantSlot), executor.AuditAction).Scan(&n); err != nil || n != 2 {
			t.Fatalf("%d executor.tick audit records, %v", n, err)
		}
		var src audit.Source = db.Audit()
		rep, err := audit.Verify(t.Context(), src, nil, id.TenantSlot)
		if err != nil || rep.Break != nil || rep.Records != 2 {
			t.Fatalf("audit chain: %v %+v", err, rep)
		}
	})
}

// BenchmarkExecutorTickSQLite is BenchmarkTick20Intents with the SQL
// backends: the executor's state and the audit chain in SQLite (WAL,
// synchronous=NORMAL), the paper broker in process.
func BenchmarkExecutorTickSQLite(b *testing.B) {
	db := storetest.OpenSQLite(b)
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
	ex := &executor.Executor{Broker: sim, Store: executorsql.New(db), Audit: db.Audit(), Skills: filepath.Join("..", "..", "executor", "testdata", "skills"), Now: func() time.Time { return now }}
	refs := 0 // a fresh ref_id per placement: every iteration places 20 orders
	ex.NewRef = func() string { refs++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", refs) }
	req := executor.TickRequest{
		Payload:  []byte(`{"strategy":"bench","intents":[` + strings.Join(intents, ",") + `]}`),
		Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_00000000000000000000000000000001", Surface: contract.SurfaceWorker, Trust: contract.TrustRouter},
		Context:  executor.ContextCron,
	}
	b.ReportAllocs()
	for b.Loop() {
		env, err := ex.Tick(b.Context(), req)
		if err != nil || env.Actions[19].Status != executor.StatusPlaced {
			b.Fatal(err)
		}
	}
}
