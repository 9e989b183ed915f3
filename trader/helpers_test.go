package trader_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

var update = flag.Bool("update", false, "rewrite golden files")

const (
	t1      = tradertest.T1
	concern = tradertest.Concern
	sA      = tradertest.StrategyA
	sB      = tradertest.StrategyB
	sC      = tradertest.StrategyC
	sX      = tradertest.StrategyX
)

// clock is a fixed, advancing clock so responses are reproducible.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { c.t = c.t.Add(time.Second); return c.t }

type env struct {
	mem *tradertest.Memory
	svc *trader.Service
}

func newEnv(t testing.TB, o trader.Options) *env {
	t.Helper()
	mem := tradertest.NewMemory()
	tradertest.Seed(t, mem, t1)
	c := &clock{t: time.Date(2026, 4, 16, 20, 15, 0, 0, time.UTC)}
	if o.Now == nil {
		o.Now = c.now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	svc, err := trader.New(mem, o)
	if err != nil {
		t.Fatal(err)
	}
	return &env{mem: mem, svc: svc}
}

var hermes = tradertest.Caller(t1, "hermes", contract.ScopeOperate, contract.ScopeRoute)
var operator = tradertest.Caller(t1, "operator", contract.ScopeConfigure)

func (e *env) apply(t testing.TB, body []byte) trader.Response {
	t.Helper()
	resp, err := e.svc.Apply(context.Background(), hermes, body)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	checkResponseSchema(t, resp)
	return resp
}

func (e *env) strategy(t testing.TB, id string) trader.Strategy {
	t.Helper()
	s, err := e.svc.GetStrategy(context.Background(), t1, id)
	if err != nil {
		t.Fatalf("GetStrategy(%s): %v", id, err)
	}
	return s
}

// set changes one strategy directly in the store.
func (e *env) set(t testing.TB, id string, edit func(*trader.Strategy)) {
	t.Helper()
	err := e.mem.InTx(context.Background(), t1, func(tx trader.Tx) error {
		s, _, err := tx.Strategy(context.Background(), id)
		if err != nil {
			return err
		}
		old := s.Revision
		edit(&s)
		s.Revision = old + 1
		return tx.UpdateStrategy(context.Background(), s, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *env) degrade(t testing.TB) {
	t.Helper()
	c, err := e.svc.GetConcern(context.Background(), t1, concern)
	if err != nil {
		t.Fatal(err)
	}
	c.ExecutionState = trader.Degraded
	if _, err := e.svc.PutConcern(context.Background(), operator, c, c.Revision); err != nil {
		t.Fatal(err)
	}
}

// base is the seed's example request: switch A -> B, guarded.
func base() map[string]any {
	return map[string]any{
		"decision_id":                 "dec_2026_04_16_001",
		"concern_id":                  concern,
		"account_id":                  tradertest.Account,
		"market_symbol":               tradertest.Market,
		"action":                      "switch",
		"target_strategy_id":          sB,
		"expected_active_strategy_id": sA,
		"risk_mode":                   "normal",
		"reason":                      "trend strategy still fits the directional narrative",
		"confidence":                  0.83,
		"dry_run":                     false,
		"override":                    false,
		"requested_at":                "2026-04-16T20:15:00Z",
	}
}

// body returns base() with set applied and del removed.
func body(set map[string]any, del ...string) []byte {
	m := base()
	for k, v := range set {
		m[k] = v
	}
	for _, k := range del {
		delete(m, k)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func checkResponseSchema(t testing.TB, resp trader.Response) {
	t.Helper()
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if err := trader.ValidateResponse(b); err != nil {
		t.Errorf("response does not validate against %s: %v\n%s", trader.ResponseSchemaFile, err, b)
	}
}

// golden compares got (as indented JSON) with testdata/<name>, rewriting it
// under -update.
func golden(t *testing.T, name string, got any) {
	t.Helper()
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s differs from the golden file:\n got %s\nwant %s", path, b, want)
	}
}
