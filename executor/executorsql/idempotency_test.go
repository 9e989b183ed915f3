package executorsql_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executorsql"
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
	td := filepath.Join("..", "..", "executor", "testdata")
	raw, err := os.ReadFile(filepath.Join(td, "brokers", "base.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	brokers, err := paper.Brokers(executorsql.New(db), raw)
	if err != nil {
		t.Fatal(err)
	}
	return &executor.Executor{Brokers: brokers, Store: executorsql.New(db), Audit: db.Audit(), Skills: filepath.Join(td, "skills")}
}

func buySPY(t testing.TB, key, message string) executor.TickInput {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "executor", "testdata", "payloads", "buy_spy.json"))
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

// gatedBroker holds every Place until release is closed, and says on
// placing when the first one arrived.
type gatedBroker struct {
	broker.Broker
	placing chan struct{}
	once    *sync.Once
	release chan struct{}
}

func (g gatedBroker) Place(ctx context.Context, o broker.OrderRequest) (broker.Order, error) {
	g.once.Do(func() { close(g.placing) })
	<-g.release
	return g.Broker.Place(ctx, o)
}

// tickRecords decodes the tenant's audit chain after checking it
// verifies, and returns the payloads of its executor records.
func tickRecords(t *testing.T, db *store.DB, tenant contract.TenantSlot) (ticks []executor.TickRecord, replays []executor.ReplayRecord) {
	t.Helper()
	rep, err := audit.Verify(context.Background(), db.Audit(), nil, tenant)
	if err != nil || rep.Break != nil {
		t.Fatalf("audit chain of %s: %v, break %v", tenant, err, rep.Break)
	}
	err = db.Audit().Scan(context.Background(), tenant, func(r audit.Row) error {
		rec, err := audit.Decode(r.Body)
		if err != nil {
			return err
		}
		if rec.Outcome.Action != executor.AuditAction {
			return nil
		}
		var probe struct {
			Replay bool `json:"replay"`
		}
		if err := json.Unmarshal(rec.Payload, &probe); err != nil {
			return err
		}
		if probe.Replay {
			var rr executor.ReplayRecord
			err = json.Unmarshal(rec.Payload, &rr)
			replays = append(replays, rr)
		} else {
			var tr executor.TickRecord
			err = json.Unmarshal(rec.Payload, &tr)
			ticks = append(ticks, tr)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ticks, replays
}

// TestTickReplaysWhileFirstAttemptInFlight: a key already completed is
// replayed by many clients at once while the first attempt of another key
// is held inside its broker call. The replays all answer before that tick
// goes on (they wait for nothing), each with its own audit record; the
// duplicates of the held key wait for it and replay its envelope; one order
// per key; the chain verifies with one record per call.
func TestTickReplaysWhileFirstAttemptInFlight(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ex := paperExecutor(t, db)
		paper := ex.Brokers
		gate := gatedBroker{placing: make(chan struct{}), once: new(sync.Once), release: make(chan struct{})}
		gateOn := make(chan struct{}) // closed when ticks should meet the gate
		ex.Brokers = func(ctx context.Context, tenant contract.TenantSlot) (broker.Broker, error) {
			b, err := paper(ctx, tenant)
			select {
			case <-gateOn:
				g := gate
				g.Broker = b
				return g, err
			default:
				return b, err
			}
		}
		done, err := ex.TickAs(t.Context(), tickCaller, buySPY(t, "done-key-0001", ""))
		if err != nil || done.Actions[0].Status != executor.StatusPlaced {
			t.Fatalf("first tick of the completed key: %+v, %v", done, err)
		}
		close(gateOn)

		const n = 40
		held := make([]executor.Envelope, n+1)
		heldErrs := make([]error, n+1)
		var heldWG sync.WaitGroup
		heldWG.Go(func() {
			held[0], heldErrs[0] = ex.TickAs(context.Background(), tickCaller, buySPY(t, "held-key-0001", ""))
		})
		select {
		case <-gate.placing:
		case <-t.Context().Done():
			t.Fatal("the first attempt never reached its broker call")
		}
		for i := 1; i <= n; i++ {
			heldWG.Go(func() {
				held[i], heldErrs[i] = ex.TickAs(context.Background(), tickCaller, buySPY(t, "held-key-0001", ""))
			})
		}
		replays := make([]executor.Envelope, n)
		replayErrs := make([]error, n)
		var replayWG sync.WaitGroup
		for i := range n {
			replayWG.Go(func() {
				replays[i], replayErrs[i] = ex.TickAs(context.Background(), tickCaller, buySPY(t, "done-key-0001", ""))
			})
		}
		// The replays finish while the held tick is still in its broker
		// call: nothing of theirs waits for it.
		replayWG.Wait()
		for i := range n {
			if err := replayErrs[i]; err != nil || !replays[i].Replay || !replays[i].Audited || replays[i].TickID != done.TickID {
				t.Fatalf("replay %d of the completed key: %+v, %v", i, replays[i], err)
			}
		}
		close(gate.release)
		heldWG.Wait()
		fresh := 0
		for i := range held {
			if err := heldErrs[i]; err != nil || held[i].TickID != held[0].TickID || held[i].Actions[0].Status != executor.StatusPlaced {
				t.Fatalf("tick %d of the held key: %+v, %v", i, held[i], err)
			}
			if !held[i].Replay {
				fresh++
			}
		}
		if fresh != 1 || held[0].Replay {
			t.Fatalf("%d fresh ticks of the held key (the first: replay %v); want exactly the first", fresh, held[0].Replay)
		}
		if os := paperOrders(t, db); len(os) != 2 {
			t.Fatalf("%d orders; want 2, one per key", len(os))
		}
		ticks, rrs := tickRecords(t, db, "slot-1")
		if len(ticks) != 2 || len(rrs) != 2*n {
			t.Fatalf("%d tick records and %d replay records; want 2 and %d", len(ticks), len(rrs), 2*n)
		}
		per := map[string]int{}
		for _, r := range rrs {
			per[r.IdempotencyKey+" "+r.TickID]++
		}
		if per["done-key-0001 "+done.TickID] != n || per["held-key-0001 "+held[0].TickID] != n {
			t.Fatalf("replay records per key and tick: %v", per)
		}
	})
}

// TestTickReplayRecordCommitsWithTheRead: a replay whose stored envelope
// cannot be read answers an internal error and leaves no audit record (the
// record is written in the transaction that reads the key); a sound replay
// appends exactly one record naming the tick it replayed.
func TestTickReplayRecordCommitsWithTheRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ex := paperExecutor(t, db)
		ctx := t.Context()
		first, err := ex.TickAs(ctx, tickCaller, buySPY(t, "read-key-0001", ""))
		if err != nil {
			t.Fatal(err)
		}
		again, err := ex.TickAs(ctx, tickCaller, buySPY(t, "read-key-0001", ""))
		if err != nil || !again.Replay || !again.Audited || again.TickID != first.TickID {
			t.Fatalf("replay: %+v, %v", again, err)
		}
		ticks, rrs := tickRecords(t, db, "slot-1")
		if len(ticks) != 1 || len(rrs) != 1 || rrs[0] != (executor.ReplayRecord{TickID: first.TickID, Strategy: "momentum", IdempotencyKey: "read-key-0001", Replay: true}) {
			t.Fatalf("records after a tick and its replay: %+v, %+v", ticks, rrs)
		}
		if _, err := db.Exec(ctx, `UPDATE idempotency SET result = ? WHERE key = ?`, "{not json", "read-key-0001"); err != nil {
			t.Fatal(err)
		}
		if env, err := ex.TickAs(ctx, tickCaller, buySPY(t, "read-key-0001", "")); err == nil || contract.KindOf(err) != contract.KindInternal || env.Audited {
			t.Fatalf("replay of an unreadable envelope: %+v, %v; want an internal error", env, err)
		}
		if _, rrs := tickRecords(t, db, "slot-1"); len(rrs) != 1 {
			t.Fatalf("%d replay records after the failed replay; want still 1", len(rrs))
		}
	})
}

// TestTickReplayAuditElsewhere: an executor whose audit log is not the
// store's (here in memory) replays through ClaimTick and appends the replay
// record to its own log.
func TestTickReplayAuditElsewhere(t *testing.T) {
	db := storetest.OpenSQLite(t)
	ex := paperExecutor(t, db)
	mem := audit.NewMemory()
	ex.Audit = mem
	first, err := ex.TickAs(t.Context(), tickCaller, buySPY(t, "mem-key-0001", ""))
	if err != nil {
		t.Fatal(err)
	}
	again, err := ex.TickAs(t.Context(), tickCaller, buySPY(t, "mem-key-0001", ""))
	if err != nil || !again.Replay || !again.Audited || again.TickID != first.TickID {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	recs := mem.Records("slot-1")
	if len(recs) != 2 || !strings.Contains(string(recs[1].Payload), `"replay":true`) {
		t.Fatalf("memory log after a tick and its replay: %d records", len(recs))
	}
	if ticks, rrs := tickRecords(t, db, "slot-1"); len(ticks)+len(rrs) != 0 {
		t.Fatalf("the store's chain got %d records; the executor's log is elsewhere", len(ticks)+len(rrs))
	}
}

// TestClaimOrReplayTick: the store's one-transaction claim-or-replay on
// every state of a key. With claim false a free, held or expired key is
// left as it is; with claim true a free key is claimed, a held one is not,
// an expired one is taken over; another input is a conflict; a completed key
// calls record with its envelope and appends that entry in the same
// transaction, and an error of record leaves no record behind. AuditsTo
// accepts only the same database's audit log.
func TestClaimOrReplayTick(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		s := executorsql.New(db)
		if !s.AuditsTo(db.Audit()) || s.AuditsTo(audit.NewMemory()) || s.AuditsTo(storetest.OpenSQLite(t).Audit()) {
			t.Fatal("AuditsTo must accept exactly the store's own audit log")
		}
		now := time.Unix(1_800_000_000, 0)
		db.Now = func() time.Time { return now }
		const tenant = contract.TenantSlot("slot-1")
		calls := 0
		entry := func(env []byte) (audit.Entry, error) {
			calls++
			return audit.Entry{
				Outcome: contract.AuditOutcome{At: contract.Timestamp(now), Identity: tickCaller.Identity, Action: executor.AuditAction, Resource: "strategist:test", Outcome: contract.OutcomeAllow},
				Payload: json.RawMessage(env),
			}, nil
		}
		claim := func(key, hash string, lease time.Duration, claim bool) executor.TickClaim {
			t.Helper()
			c, err := s.ClaimOrReplayTick(ctx, tenant, key, hash, lease, claim, entry)
			if err != nil {
				t.Fatalf("ClaimOrReplayTick(%s, %s, claim %v): %v", key, hash, claim, err)
			}
			return c
		}
		records := func() int64 {
			rep, err := audit.Verify(context.Background(), db.Audit(), nil, tenant)
			if err != nil || rep.Break != nil {
				t.Fatalf("verify: %v, %v", err, rep.Break)
			}
			return rep.Records
		}

		if c := claim("cor-key-0001", "h1", time.Minute, false); c.Claimed || c.Envelope != nil {
			t.Fatalf("free key, claim false: %+v", c)
		}
		if c := claim("cor-key-0001", "h1", time.Minute, true); !c.Claimed {
			t.Fatalf("free key, claim true: %+v", c)
		}
		for _, cl := range []bool{false, true} {
			if c := claim("cor-key-0001", "h1", time.Minute, cl); c.Claimed || c.Envelope != nil {
				t.Fatalf("held key, claim %v: %+v", cl, c)
			}
		}
		if _, err := s.ClaimOrReplayTick(ctx, tenant, "cor-key-0001", "h2", time.Minute, false, entry); contract.KindOf(err) != contract.KindConflict {
			t.Fatalf("held key, other input: %v; want a conflict", err)
		}
		now = now.Add(2 * time.Minute) // the claim's lease ran out
		if c := claim("cor-key-0001", "h1", time.Minute, false); c.Claimed || c.Envelope != nil {
			t.Fatalf("expired claim, claim false: %+v", c)
		}
		if c := claim("cor-key-0001", "h1", time.Minute, true); !c.Claimed {
			t.Fatalf("expired claim, claim true: %+v; want taken over", c)
		}
		if calls != 0 || records() != 0 {
			t.Fatalf("record called %d times, %d records, before any key completed", calls, records())
		}

		if err := s.CompleteTick(ctx, tenant, "cor-key-0001", []byte(`{"tick_id":"tick_1"}`)); err != nil {
			t.Fatal(err)
		}
		for i, cl := range []bool{false, true} {
			if c := claim("cor-key-0001", "h1", time.Minute, cl); c.Claimed || string(c.Envelope) != `{"tick_id":"tick_1"}` {
				t.Fatalf("completed key, claim %v: %+v", cl, c)
			}
			if calls != i+1 || records() != int64(i+1) {
				t.Fatalf("after %d replays: record called %d times, %d records", i+1, calls, records())
			}
		}
		if _, err := s.ClaimOrReplayTick(ctx, tenant, "cor-key-0001", "h2", time.Minute, true, entry); contract.KindOf(err) != contract.KindConflict {
			t.Fatalf("completed key, other input: %v; want a conflict", err)
		}
		failed := errors.New("cannot record")
		if _, err := s.ClaimOrReplayTick(ctx, tenant, "cor-key-0001", "h1", time.Minute, true, func([]byte) (audit.Entry, error) { return audit.Entry{}, failed }); !errors.Is(err, failed) {
			t.Fatalf("record failing: %v; want its error", err)
		}
		bad := func([]byte) (audit.Entry, error) {
			return audit.Entry{Outcome: contract.AuditOutcome{Action: "x"}}, nil
		}
		if _, err := s.ClaimOrReplayTick(ctx, tenant, "cor-key-0001", "h1", time.Minute, true, bad); contract.KindOf(err) != contract.KindInvalid {
			t.Fatalf("record giving an invalid entry: %v; want invalid", err)
		}
		if n := records(); n != 2 {
			t.Fatalf("%d records after the failed replays; want still 2", n)
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
// with the same input (a client's retry): the input hashed, then one write
// transaction that reads the key, decodes the stored envelope and appends
// the replay's audit record to the SQLite chain; no broker call. The
// keyread sub-benchmark is the same replay by an executor whose audit log
// is elsewhere (in memory): the key read on the reader pool (ClaimTick), the
// record appended to the other log, so it is the cost of the idempotency hit
// without the SQLite audit write.
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
	// Replays from 16 clients at once: the replays' audit records share
	// group commits, so this is the cost per replay of a server under load
	// (ns/op is wall time divided by replays).
	b.Run("full-parallel", func(b *testing.B) {
		db := storetest.OpenSQLite(b)
		ex := paperExecutor(b, db)
		in := buySPY(b, "bench-key-0001", "")
		if env, err := ex.TickAs(b.Context(), tickCaller, in); err != nil || env.Actions[0].Status != executor.StatusPlaced {
			b.Fatalf("first tick: %+v, %v", env, err)
		}
		b.ReportAllocs()
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				env, err := ex.TickAs(context.Background(), tickCaller, in)
				if err != nil || !env.Replay {
					b.Error(fmt.Sprint(env, err))
					return
				}
			}
		})
	})
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
			brokers, err := paper.Brokers(executorsql.New(db), []byte(scenario))
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
		brokers, _ := paper.Brokers(executorsql.New(a), []byte(scenario))
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

// diesBeforeCompleting is a store whose process "dies" after its tick ran:
// the envelope is never stored, so the key stays claimed.
type diesBeforeCompleting struct{ *executorsql.Store }

func (diesBeforeCompleting) CompleteTick(context.Context, contract.TenantSlot, string, []byte) error {
	return errors.New("process died before storing the envelope")
}

// TestTakeoverReportsTheDeadRunsOrder: a keyed tick placed its order and
// its process died before storing the envelope. After the lease, the same
// key is taken over by another process: it places under the ref_ids
// recorded with the key, finds the dead run's order by its ref_id and
// reports it already_placed (reason ref_id_exists, that order's id), never
// placed; there is still one order.
func TestTakeoverReportsTheDeadRunsOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		var skew time.Duration
		db.Now = func() time.Time { return time.Now().Add(skew) }
		dead := paperExecutor(t, db)
		dead.Store = diesBeforeCompleting{executorsql.New(db)}
		first, err := dead.TickAs(t.Context(), tickCaller, buySPY(t, "dead-key-0001", ""))
		if err == nil || first.Actions[0].Status != executor.StatusPlaced || first.Actions[0].OrderID == nil {
			t.Fatalf("dying run: %+v, %v; want placed and an error storing the envelope", first, err)
		}
		skew = executor.TickKeyLease + time.Minute // the dead claim's lease ran out
		taker := paperExecutor(t, db)
		env, err := taker.TickAs(t.Context(), tickCaller, buySPY(t, "dead-key-0001", ""))
		if err != nil || env.Replay || len(env.Actions) != 1 {
			t.Fatalf("takeover: %+v, %v", env, err)
		}
		a := env.Actions[0]
		if a.Status != executor.StatusAlreadyPlaced || a.Reason != executor.ReasonRefIDExists || a.OrderID == nil ||
			*a.OrderID != *first.Actions[0].OrderID || a.RefID != first.Actions[0].RefID {
			t.Fatalf("takeover action %+v; want already_placed ref_id_exists with the dead run's order %s under ref_id %s",
				a, *first.Actions[0].OrderID, first.Actions[0].RefID)
		}
		if os := paperOrders(t, db); len(os) != 1 {
			t.Fatalf("%d orders; want the dead run's only", len(os))
		}
		// The completed takeover replays from now on.
		again, err := taker.TickAs(t.Context(), tickCaller, buySPY(t, "dead-key-0001", ""))
		if err != nil || !again.Replay || again.Actions[0].Status != executor.StatusAlreadyPlaced {
			t.Fatalf("retry after the takeover: %+v, %v", again, err)
		}
	})
}
