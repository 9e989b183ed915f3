package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/cli"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

var tickCaller = contract.Caller{
	Identity:   contract.Identity{TenantSlot: "slot-1", Subject: "usr_00000000000000000000000000000007", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
	KeyID:      "k1",
	Scopes:     []contract.Scope{contract.ScopeOperate},
	RunContext: contract.RunCron,
	Harness:    "autotrader",
}

// paperExecutor is one process's executor gate on db: the paper broker from
// the base scenario, kept in db (as `serve` builds it).
func paperExecutor(t testing.TB, db *store.DB) *executor.Executor {
	t.Helper()
	td := filepath.Join("..", "executor", "testdata")
	raw, err := os.ReadFile(filepath.Join(td, "brokers", "base.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	brokers, err := cli.PaperBrokers(db.ExecutorState(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return &executor.Executor{Brokers: brokers, Store: db.ExecutorState(), Audit: db.Audit(), Skills: filepath.Join(td, "skills")}
}

func buySPY(t testing.TB, key, message string) executor.TickInput {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "executor", "testdata", "payloads", "buy_spy.json"))
	if err != nil {
		t.Fatal(err)
	}
	return executor.TickInput{Payload: b, Message: message, IdempotencyKey: key}
}

// paperOrders reads the orders of the base scenario's default account
// through a fresh simulator on db (a third process).
func paperOrders(t *testing.T, db *store.DB) []broker.Order {
	t.Helper()
	b, err := paperExecutor(t, db).Brokers(t.Context(), "slot-1")
	if err != nil {
		t.Fatal(err)
	}
	os, err := b.Orders(t.Context(), "619508153")
	if err != nil {
		t.Fatal(err)
	}
	return os
}

// concurrentTicks runs n ticks with one key at once over the executors
// (round robin) and checks they all report one tick that placed once.
func concurrentTicks(t *testing.T, n int, exs ...*executor.Executor) {
	t.Helper()
	envs := make([]executor.Envelope, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			envs[i], errs[i] = exs[i%len(exs)].TickAs(context.Background(), tickCaller, buySPY(t, "dup-key-0001", ""))
		})
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("tick %d: %v", i, errs[i])
		}
		if envs[i].TickID != envs[0].TickID {
			t.Fatalf("tick %d is %s, tick 0 is %s: a duplicate ran", i, envs[i].TickID, envs[0].TickID)
		}
		if !envs[i].Replay {
			fresh++
		}
		if a := envs[i].Actions; len(a) != 1 || a[0].Status != executor.StatusPlaced {
			t.Fatalf("tick %d: %+v", i, envs[i])
		}
	}
	if fresh != 1 {
		t.Fatalf("%d envelopes are not replays; want exactly 1", fresh)
	}
}

// TestTickIdempotencyOnSQL: a keyed tick places once; its repeat replays
// the stored envelope without a broker call; the same key with another
// input is a conflict; 100 concurrent duplicates place once.
func TestTickIdempotencyOnSQL(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ex := paperExecutor(t, db)
		ctx := t.Context()
		first, err := ex.TickAs(ctx, tickCaller, buySPY(t, "retry-key-0001", ""))
		if err != nil || first.Replay || first.IdempotencyKey != "retry-key-0001" || first.Actions[0].Status != executor.StatusPlaced {
			t.Fatalf("first: %+v, %v", first, err)
		}
		again, err := ex.TickAs(ctx, tickCaller, buySPY(t, "retry-key-0001", ""))
		if err != nil || !again.Replay || again.TickID != first.TickID || *again.Actions[0].OrderID != *first.Actions[0].OrderID {
			t.Fatalf("replay: %+v, %v", again, err)
		}
		if n := len(paperOrders(t, db)); n != 1 {
			t.Fatalf("%d orders after a tick and its replay", n)
		}
		if _, err := ex.TickAs(ctx, tickCaller, buySPY(t, "retry-key-0001", "EXECUTE: buy SPY 1")); contract.KindOf(err) != contract.KindConflict {
			t.Fatalf("same key, other message: %v; want conflict", err)
		}
		// Keys are per tenant: slot-2's key of the same name is its own.
		other := tickCaller
		other.Identity.TenantSlot = "slot-2"
		if env, err := ex.TickAs(ctx, other, buySPY(t, "retry-key-0001", "x")); err != nil || env.Replay {
			t.Fatalf("other tenant, same key: %+v, %v", env, err)
		}
		// An invalid payload frees its key: the corrected retry runs.
		bad := executor.TickInput{Payload: []byte(`{"strategy": 7}`), IdempotencyKey: "fix-key-0001"}
		if _, err := ex.TickAs(ctx, tickCaller, bad); contract.KindOf(err) != contract.KindInvalid {
			t.Fatalf("bad payload: %v", err)
		}
		if _, err := ex.TickAs(ctx, tickCaller, executor.TickInput{Payload: []byte(`{"strategy":"momentum","intents":[]}`), IdempotencyKey: "fix-key-0001"}); err != nil {
			t.Fatalf("retry after an invalid payload: %v", err)
		}
		if _, err := ex.TickAs(ctx, tickCaller, buySPY(t, "bad key", "")); contract.KindOf(err) != contract.KindInvalid {
			t.Fatalf("malformed key: %v", err)
		}

		concurrentTicks(t, 100, ex)
		if n := len(paperOrders(t, db)); n != 2 {
			t.Fatalf("%d orders after 100 concurrent duplicates; want 2 (the first key's and one)", n)
		}
	})
}

// TestTickIdempotencyTwoProcessesPostgres: two stores on one Postgres (two
// serve processes) each with their own executor and paper simulator; 100
// duplicates split between them place exactly once.
func TestTickIdempotencyTwoProcessesPostgres(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("needs " + storetest.EnvPostgres)
	}
	a, b := twoPostgres(t, dsn)
	concurrentTicks(t, 100, paperExecutor(t, a), paperExecutor(t, b))
	if n := len(paperOrders(t, a)); n != 1 {
		t.Fatalf("%d orders after 100 duplicates over two processes; want 1", n)
	}
}

// twoPostgres opens two independent stores (connection pools) on one fresh
// schema.
func twoPostgres(t *testing.T, dsn string) (*store.DB, *store.DB) {
	t.Helper()
	schema := storetest.FreshSchema(t, dsn)
	open := func() *store.DB {
		db, err := store.Open(context.Background(), schema, "")
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	return open(), open()
}

// BenchmarkTickReplaySQLite: a tick whose idempotency key was used before
// with the same input (a client's retry): the input hashed, one read of the
// key, the stored envelope decoded, one audit record of the replay appended
// to the SQLite chain; no broker call. The keyread sub-benchmark is the same
// replay with the audit record kept in memory: the cost of the idempotency
// hit itself, without the audit write every call pays.
func BenchmarkTickReplaySQLite(b *testing.B) {
	for _, name := range []string{"full", "keyread"} {
		b.Run(name, func(b *testing.B) {
			db := storetest.OpenSQLite(b)
			ex := paperExecutor(b, db)
			if name == "keyread" {
				ex.Audit = audit.NewMemory()
			}
			in := buySPY(b, "bench-key-0001", "")
			if env, err := ex.TickAs(b.Context(), tickCaller, in); err != nil || env.Actions[0].Status != executor.StatusPlaced {
				b.Fatalf("first tick: %+v, %v", env, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				env, err := ex.TickAs(b.Context(), tickCaller, in)
				if err != nil || !env.Replay {
					b.Fatal(fmt.Sprint(env, err))
				}
			}
		})
	}
}

// TestPaperAccountTwoProcesses: two stores on one database (two processes),
// each with its own paper simulator on the same tenant's account, place
// buys concurrently. Every call is a compare-and-swap transaction on the
// stored state: no fill is lost or doubled, and cash never goes negative.
func TestPaperAccountTwoProcesses(t *testing.T) {
	const scenario = `accounts:
  - {account_number: "A1", is_default: true, agentic_allowed: true, portfolio: {total_value: 1500, buying_power: 1500, cash: 1500}}
quotes:
  SPY: {last_trade_price: 100, bid_price: 99.9, ask_price: 100}
`
	run := func(t *testing.T, a, b *store.DB) {
		var sims []broker.Broker
		for _, db := range []*store.DB{a, b} {
			brokers, err := cli.PaperBrokers(db.ExecutorState(), []byte(scenario))
			if err != nil {
				t.Fatal(err)
			}
			s, err := brokers(t.Context(), "slot-1")
			if err != nil {
				t.Fatal(err)
			}
			sims = append(sims, s)
		}
		const n = 40 // 20 per process; cash buys 15
		var wg sync.WaitGroup
		var mu sync.Mutex
		filled := map[string]bool{}
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				o, err := sims[i%2].Place(context.Background(), broker.OrderRequest{AccountNumber: "A1", Symbol: "SPY", Side: broker.SideBuy, Type: broker.TypeMarket, Quantity: 1, RefID: fmt.Sprintf("ref-%03d", i)})
				if err != nil {
					if broker.StatusOf(err) != 400 {
						t.Errorf("place %d: %v", i, err)
					}
					return
				}
				mu.Lock()
				if filled[o.ID] {
					t.Errorf("order id %s given twice", o.ID)
				}
				filled[o.ID] = true
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if len(filled) != 15 {
			t.Fatalf("%d fills; want 15 (cash 1500 at 100 a share)", len(filled))
		}
		// A third process reads the account: every fill is booked once.
		brokers, _ := cli.PaperBrokers(a.ExecutorState(), []byte(scenario))
		s, _ := brokers(t.Context(), "slot-1")
		p, err := s.Portfolio(t.Context(), "A1")
		if err != nil {
			t.Fatal(err)
		}
		pos, _ := s.Positions(t.Context(), "A1")
		orders, _ := s.Orders(t.Context(), "A1")
		if p.Cash != 0 || p.BuyingPower != 0 || len(pos) != 1 || pos[0].Quantity != 15 || len(orders) != 15 {
			t.Fatalf("after 15 fills: cash %v, buying power %v, positions %+v, %d orders", p.Cash, p.BuyingPower, pos, len(orders))
		}
		if p.Cash < 0 {
			t.Fatalf("cash went negative: %v", p.Cash)
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "shared.db")
		var dbs []*store.DB
		for range 2 {
			db, err := store.Open(context.Background(), "sqlite:"+path, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			dbs = append(dbs, db)
		}
		run(t, dbs[0], dbs[1])
	})
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) {
			a, b := twoPostgres(t, dsn)
			run(t, a, b)
		})
	}
}
