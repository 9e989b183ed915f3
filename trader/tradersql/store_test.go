package tradersql_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradersql"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

// TestTraderStore runs the trader.Store conformance suite on SQLite and, when
// CADUCEUS_TEST_POSTGRES is set, on Postgres.
func TestTraderStore(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		tradertest.TestStore(t, func(t *testing.T) (trader.Store, audit.Source) {
			db := storetest.OpenSQLite(t)
			return tradersql.New(db), db.Audit()
		})
	})
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			tradertest.TestStore(t, func(t *testing.T) (trader.Store, audit.Source) {
				db := storetest.OpenPostgres(t, dsn)
				return tradersql.New(db), db.Audit()
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
		tradertest.Seed(t, tradersql.New(dbs[0]), tradertest.T1)
		var svcs [2]*trader.Service
		for i, db := range dbs {
			svc, err := trader.New(tradersql.New(db), trader.Options{})
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

// BenchmarkTraderApplyPostgres: the same on Postgres, when
// CADUCEUS_TEST_POSTGRES is set.
func BenchmarkTraderApplyPostgres(b *testing.B) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		b.Skip(storetest.EnvPostgres + " is not set")
	}
	benchApply(b, storetest.OpenPostgres(b, dsn))
}

// BenchmarkTraderReplaySQLite: the cost of a repeated decision_id on SQLite.
func BenchmarkTraderReplaySQLite(b *testing.B) {
	db := storetest.OpenSQLite(b)
	tradertest.Seed(b, tradersql.New(db), tradertest.T1)
	svc, _ := trader.New(tradersql.New(db), trader.Options{})
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
	tradertest.Seed(b, tradersql.New(db), tradertest.T1)
	svc, _ := trader.New(tradersql.New(db), trader.Options{})
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

// envCrashChild names the SQLite file the crash child applies decisions to.
const envCrashChild = "CADUCEUS_TRADER_CRASH_CHILD"

// TestTraderCrashChild is the child of TestTraderCrash: it applies decisions
// in a loop and prints the id of each one answered applied, until killed.
func TestTraderCrashChild(t *testing.T) {
	path := os.Getenv(envCrashChild)
	if path == "" {
		t.Skip("run by TestTraderCrash only")
	}
	db, err := store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := trader.New(tradersql.New(db), trader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	caller := tradertest.Caller(tradertest.T1, "hermes")
	for i := 0; ; i++ {
		action := "pause"
		if i%2 == 1 {
			action = "resume"
		}
		id := fmt.Sprintf("crash-%d", i)
		r, err := svc.Apply(context.Background(), caller, benchBody(id, action))
		if err != nil || r.Status != trader.Applied {
			fmt.Printf("error %s %s %v %v\n", id, r.Status, r.Errors, err)
			os.Exit(1)
		}
		fmt.Printf("applied %s\n", id) // unbuffered: written before the next decision starts
	}
}

// TestTraderCrash: a child process applying decisions is killed with SIGKILL;
// every decision it had answered applied is in the store afterwards, the
// strategy's state agrees with the last one, and the audit chain verifies.
func TestTraderCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	db, err := store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	tradertest.Seed(t, tradersql.New(db), tradertest.T1)
	db.Close()

	acked := storetest.KillAfterAcks(t, "TestTraderCrashChild", envCrashChild+"="+path, "applied", 150, 10, 20*time.Second)

	db, err = store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	svc, _ := trader.New(tradersql.New(db), trader.Options{})
	for _, id := range acked {
		v, err := svc.Decision(context.Background(), tradertest.T1, id)
		if err != nil || v.Decision == nil || v.Decision.Status != trader.Applied {
			t.Fatalf("acknowledged decision %s lost after SIGKILL: %+v %v", id, v.Decision, err)
		}
	}
	// The strategy is where the last stored decision left it.
	hist, err := svc.History(context.Background(), tradertest.T1, tradertest.Concern, 1)
	if err != nil || len(hist) != 1 {
		t.Fatal(hist, err)
	}
	a, err := svc.GetStrategy(context.Background(), tradertest.T1, tradertest.StrategyA)
	if err != nil {
		t.Fatal(err)
	}
	want := trader.StatusPaused
	if hist[0].Action == "resume" {
		want = trader.StatusActive
	}
	if a.Status != want {
		t.Errorf("after the crash A is %s, but the last stored decision (%s) left it %s", a.Status, hist[0].Action, want)
	}
	rep, err := audit.Verify(context.Background(), db.Audit(), nil)
	if err != nil || rep.Break != nil {
		t.Errorf("audit verify after SIGKILL: %+v %v", rep.Break, err)
	}
	if rep.Records < int64(len(acked)) {
		t.Errorf("%d audit records for %d acknowledged decisions", rep.Records, len(acked))
	}
	t.Logf("%d decisions acknowledged before SIGKILL, %d audit records survive", len(acked), rep.Records)
}

// BenchmarkTraderApplySQLiteParallel: 16 callers, each pausing and resuming
// the strategy of its own tenant, concurrently (a busy server). Group commit
// lets decisions that arrive together share one SQLite commit.
func BenchmarkTraderApplySQLiteParallel(b *testing.B) {
	db := storetest.OpenSQLite(b)
	callers := max(16, runtime.GOMAXPROCS(0))
	for i := range callers {
		tradertest.Seed(b, tradersql.New(db), contract.TenantSlot(fmt.Sprint("slot-", i+1)))
	}
	svc, _ := trader.New(tradersql.New(db), trader.Options{})
	var next atomic.Int32
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		g := int(next.Add(1))
		caller := tradertest.Caller(contract.TenantSlot(fmt.Sprint("slot-", (g-1)%callers+1)), "hermes")
		i := 0
		for pb.Next() {
			action := "pause"
			if i%2 == 1 {
				action = "resume"
			}
			r, err := svc.Apply(context.Background(), caller, benchBody(fmt.Sprintf("bench-%d-%d", g, i), action))
			if err != nil || r.Status != trader.Applied {
				b.Fatalf("%d: %s %v %v", i, r.Status, r.Errors, err)
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}
