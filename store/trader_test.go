package store_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

// TestTraderStore runs the trader.Store conformance suite on SQLite and, when
// CADUCEUS_TEST_POSTGRES is set, on Postgres.
func TestTraderStore(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		tradertest.TestStore(t, func(t *testing.T) (trader.Store, audit.Source) {
			db := storetest.OpenSQLite(t)
			return db.Trader(), db.Audit()
		})
	})
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			tradertest.TestStore(t, func(t *testing.T) (trader.Store, audit.Source) {
				db := storetest.OpenPostgres(t, dsn)
				return db.Trader(), db.Audit()
			})
		})
	}
}

// TestTraderTwoProcesses: two stores on one database (as two processes
// would be) receive the same decision concurrently; exactly one applies.
func TestTraderTwoProcesses(t *testing.T) {
	run := func(t *testing.T, dsn string) {
		ctx := context.Background()
		var dbs [2]*store.DB
		for i := range dbs {
			db, err := store.Open(ctx, dsn, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			dbs[i] = db
		}
		tradertest.Seed(t, dbs[0].Trader(), tradertest.T1)
		var svcs [2]*trader.Service
		for i, db := range dbs {
			svc, err := trader.New(db.Trader(), trader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			svcs[i] = svc
		}
		body := tradertest.Request(map[string]any{
			"decision_id": "two-procs", "concern_id": tradertest.Concern, "account_id": tradertest.Account, "market_symbol": tradertest.Market,
			"action": "switch", "target_strategy_id": tradertest.StrategyB, "expected_active_strategy_id": tradertest.StrategyA,
			"reason": "two processes", "confidence": 0.7,
		})
		const n = 20
		resps := make([]trader.Response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r, err := svcs[i%2].Apply(ctx, tradertest.Caller(tradertest.T1, "hermes"), body)
				if err != nil {
					t.Errorf("apply %d: %v", i, err)
				}
				resps[i] = r
			})
		}
		wg.Wait()
		fresh := 0
		for i, r := range resps {
			switch {
			case r.Status == trader.Applied && !r.Replay():
				fresh++
			case r.Status == trader.Applied:
			default:
				t.Errorf("apply %d: %s %v", i, r.Status, r.Errors)
			}
		}
		if fresh != 1 {
			t.Errorf("%d fresh applications, want 1", fresh)
		}
		rep, err := audit.Verify(ctx, dbs[1].Audit(), nil)
		if err != nil || rep.Break != nil || rep.Records != n {
			t.Errorf("audit: %+v %v, want %d whole records", rep, err, n)
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, "sqlite:"+t.TempDir()+"/two.db") })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { run(t, storetest.FreshSchema(t, dsn)) })
	}
}

// BenchmarkTraderApplySQLite: applied decisions committed to SQLite (WAL,
// synchronous=NORMAL), each a new decision_id pausing or resuming.
func BenchmarkTraderApplySQLite(b *testing.B) {
	db := storetest.OpenSQLite(b)
	benchApply(b, db)
}

// BenchmarkTraderReplaySQLite: the cost of a repeated decision_id on SQLite.
func BenchmarkTraderReplaySQLite(b *testing.B) {
	db := storetest.OpenSQLite(b)
	tradertest.Seed(b, db.Trader(), tradertest.T1)
	svc, _ := trader.New(db.Trader(), trader.Options{})
	caller := tradertest.Caller(tradertest.T1, "hermes")
	body := benchBody("replay", "pause")
	if r, err := svc.Apply(context.Background(), caller, body); err != nil || r.Status != trader.Applied {
		b.Fatal(r.Errors, err)
	}
	for b.Loop() {
		if r, err := svc.Apply(context.Background(), caller, body); err != nil || !r.Replay() {
			b.Fatal(r.Status, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replays/s")
}

func benchBody(id, action string) []byte {
	return tradertest.Request(map[string]any{
		"decision_id": id, "concern_id": tradertest.Concern, "account_id": tradertest.Account, "market_symbol": tradertest.Market,
		"action": action, "expected_active_strategy_id": tradertest.StrategyA, "reason": "bench", "confidence": 0.5,
	})
}

func benchApply(b *testing.B, db *store.DB) {
	tradertest.Seed(b, db.Trader(), tradertest.T1)
	svc, _ := trader.New(db.Trader(), trader.Options{})
	caller := tradertest.Caller(tradertest.T1, "hermes")
	i := 0
	for b.Loop() {
		action := "pause"
		if i%2 == 1 {
			action = "resume"
		}
		r, err := svc.Apply(context.Background(), caller, benchBody(fmt.Sprintf("bench-%d", i), action))
		if err != nil || r.Status != trader.Applied {
			b.Fatalf("%d: %s %v %v", i, r.Status, r.Errors, err)
		}
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
