package trader_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradertest"
)

const sNew = "6ca1cf73-50c3-4faa-a453-a26c7f8091a2"

func newStrategy() trader.Strategy {
	return trader.Strategy{ID: sNew, AccountID: "acct9", MarketSymbol: "ethusd", Name: "eth trend", Status: trader.StatusActive, Runnable: true, RiskMode: "normal"}
}

func TestPutStrategy(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, trader.Options{})
	s, err := e.svc.PutStrategy(ctx, operator, newStrategy(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Revision != 1 || s.UpdatedAt.IsZero() {
		t.Errorf("created: %+v", s)
	}
	// Its concern was created healthy, so decisions can act on it.
	if c, err := e.svc.GetConcern(ctx, t1, "acct9:ethusd"); err != nil || c.ExecutionState != trader.Healthy {
		t.Errorf("concern: %+v %v", c, err)
	}
	// The runtime instance follows.
	hist := e.mem.Records(t1)
	if hist[len(hist)-1].Outcome.Action != trader.AuditPutStrategy {
		t.Errorf("audit action %s", hist[len(hist)-1].Outcome.Action)
	}

	for _, c := range []struct {
		name    string
		edit    func(*trader.Strategy)
		ifMatch contract.Revision
		kind    contract.Kind
		code    string
	}{
		{"create over existing", nil, 0, contract.KindPrecondition, "if_match_required"},
		{"stale revision", nil, 7, contract.KindConflict, "revision_mismatch"},
		{"move concern", func(s *trader.Strategy) { s.MarketSymbol = "btcusd" }, 1, contract.KindInvalid, "immutable_field"},
		{"bad id", func(s *trader.Strategy) { s.ID = "not-a-uuid" }, 1, contract.KindInvalid, trader.CodeInvalidField},
		// Its refusal's record names it as valid UTF-8, so the refusal stays a refusal.
		{"id not UTF-8", func(s *trader.Strategy) { s.ID = "\xff\xfe" }, 1, contract.KindInvalid, trader.CodeInvalidField},
		{"bad status", func(s *trader.Strategy) { s.Status = "running" }, 1, contract.KindInvalid, trader.CodeInvalidField},
		{"bad risk mode", func(s *trader.Strategy) { s.RiskMode = "yolo" }, 1, contract.KindInvalid, trader.CodeUnknownRiskMode},
		{"no name", func(s *trader.Strategy) { s.Name = "" }, 1, contract.KindInvalid, trader.CodeInvalidField},
		{"bad account", func(s *trader.Strategy) { s.AccountID = "a:b" }, 1, contract.KindInvalid, trader.CodeInvalidField},
		{"missing with If-Match", func(s *trader.Strategy) { s.ID = "00000000-0000-4000-8000-000000000000" }, 3, contract.KindConflict, "revision_mismatch"},
		{"second current", func(s *trader.Strategy) {
			s.ID = sB
			s.AccountID, s.MarketSymbol = tradertest.Account, tradertest.Market
		}, 1, contract.KindConflict, "concern_has_current"},
	} {
		st := newStrategy()
		if c.edit != nil {
			c.edit(&st)
		}
		before := len(e.mem.Records(t1))
		_, err := e.svc.PutStrategy(ctx, operator, st, c.ifMatch)
		ce := contract.AsError(err)
		if ce == nil || ce.Kind != c.kind || ce.Code != c.code {
			t.Errorf("%s: %v, want %s %s", c.name, err, c.kind, c.code)
			continue
		}
		if recs := e.mem.Records(t1); len(recs) != before+1 || recs[before].Outcome.Outcome != c.kind.Outcome() {
			t.Errorf("%s: refusal not audited as %s", c.name, c.kind.Outcome())
		}
	}
	if got := e.strategy(t, sNew); got.Revision != 1 || got.MarketSymbol != "ethusd" {
		t.Errorf("refused writes changed the strategy: %+v", got)
	}

	// An update with the right revision.
	st := newStrategy()
	st.Status, st.RiskMode = trader.StatusPaused, "defensive"
	s, err = e.svc.PutStrategy(ctx, operator, st, 1)
	if err != nil || s.Revision != 2 || s.Status != trader.StatusPaused {
		t.Fatalf("update: %+v %v", s, err)
	}
	err = e.mem.InTx(ctx, t1, func(tx trader.Tx) error {
		in, ok, err := tx.Instance(ctx, sNew)
		if !ok || in.Desired != trader.StatusPaused || in.RiskMode != "defensive" {
			t.Errorf("instance not reconciled: %+v", in)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// Scopes.
	if _, err := e.svc.PutStrategy(ctx, hermes, newStrategy(), 2); contract.KindOf(err) != contract.KindDeny {
		t.Errorf("operate-only caller: %v", err)
	}
}

func TestPutConcern(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, trader.Options{})
	c, err := e.svc.GetConcern(ctx, t1, concern)
	if err != nil {
		t.Fatal(err)
	}
	c.ExecutionState = trader.Degraded
	if _, err := e.svc.PutConcern(ctx, operator, c, c.Revision+1); contract.KindOf(err) != contract.KindConflict {
		t.Errorf("stale: %v", err)
	}
	if _, err := e.svc.PutConcern(ctx, operator, c, 0); contract.KindOf(err) != contract.KindPrecondition {
		t.Errorf("create over existing: %v", err)
	}
	got, err := e.svc.PutConcern(ctx, operator, c, c.Revision)
	if err != nil || got.Revision != 2 || got.ExecutionState != trader.Degraded {
		t.Fatalf("put: %+v %v", got, err)
	}
	if r := e.apply(t, body(nil)); r.Status != trader.Rejected || r.ErrorCodes()[0] != trader.CodeExecutionDegraded {
		t.Errorf("decision on a degraded concern: %s %v", r.Status, r.ErrorCodes())
	}
	for _, bad := range []trader.Concern{{ConcernID: "nocolon", ExecutionState: trader.Healthy}, {ConcernID: "a:b:c", ExecutionState: trader.Healthy}, {ConcernID: "a:b", ExecutionState: "sick"}} {
		if _, err := e.svc.PutConcern(ctx, operator, bad, 0); contract.KindOf(err) != contract.KindInvalid {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	created, err := e.svc.PutConcern(ctx, operator, trader.Concern{ConcernID: "a:b", ExecutionState: trader.Healthy}, 0)
	if err != nil || created.Revision != 1 {
		t.Errorf("create: %+v %v", created, err)
	}
	list, err := e.svc.ListConcerns(ctx, t1)
	if err != nil || len(list) != 2 || list[0].ConcernID != "a:b" {
		t.Errorf("list: %+v %v", list, err)
	}
}

func TestReads(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, trader.Options{})
	if _, err := e.svc.GetStrategy(ctx, t1, "00000000-0000-4000-8000-000000000000"); contract.KindOf(err) != contract.KindNotFound {
		t.Errorf("missing strategy: %v", err)
	}
	if _, err := e.svc.GetStrategy(ctx, "tenant-1", sA); contract.KindOf(err) != contract.KindInvalid {
		t.Errorf("bad tenant: %v", err)
	}
	if _, err := e.svc.GetStrategy(ctx, "slot-2", sA); contract.KindOf(err) != contract.KindNotFound {
		t.Errorf("other tenant reads T1's strategy: %v", err)
	}
	list, err := e.svc.ListStrategies(ctx, t1, trader.StrategyFilter{Status: trader.StatusActive})
	if err != nil || len(list) != 1 || list[0].ID != sA {
		t.Errorf("active: %+v %v", list, err)
	}
	if _, err := e.svc.ListStrategies(ctx, t1, trader.StrategyFilter{Status: "on"}); contract.KindOf(err) != contract.KindInvalid {
		t.Errorf("bad status filter: %v", err)
	}
	if _, err := e.svc.Decision(ctx, t1, "nope"); contract.KindOf(err) != contract.KindNotFound {
		t.Errorf("missing decision: %v", err)
	}
	// A refused-before-lookup attempt is readable by its id, without a
	// stored decision.
	e.apply(t, body(map[string]any{"decision_id": "only-attempt", "confidence": 3}))
	v, err := e.svc.Decision(ctx, t1, "only-attempt")
	if err != nil || v.Decision != nil || len(v.Attempts) != 1 {
		t.Errorf("attempt-only decision: %+v %v", v, err)
	}
	for i := range 3 {
		e.apply(t, body(map[string]any{"decision_id": "h" + string(rune('0'+i)), "action": "resume"}, "target_strategy_id"))
	}
	hist, err := e.svc.History(ctx, t1, concern, 2)
	if err != nil || len(hist) != 2 || hist[0].DecisionID != "h2" || hist[1].DecisionID != "h1" {
		t.Errorf("history: %+v %v", hist, err)
	}
	all, _ := e.svc.History(ctx, t1, "", 0)
	if len(all) != 4 {
		t.Errorf("full history: %d", len(all))
	}
	// Reads are not audited here (the server audits them).
	before := len(e.mem.Records(t1))
	_, _ = e.svc.ListStrategies(ctx, t1, trader.StrategyFilter{})
	if len(e.mem.Records(t1)) != before {
		t.Error("a read wrote an audit record")
	}
}

func TestImport(t *testing.T) {
	ctx := context.Background()
	mem := tradertest.NewMemory()
	svc, err := trader.New(mem, trader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("testdata/import/issue3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Import(ctx, operator, file, trader.FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	if res != (trader.ImportResult{ConcernsCreated: 1, StrategiesCreated: 1}) {
		t.Errorf("first import: %+v", res)
	}
	records := len(mem.Records(t1))
	res, err = svc.Import(ctx, operator, file, trader.FormatYAML)
	if err != nil || res.Changed() || res.Unchanged != 2 {
		t.Errorf("re-import: %+v %v", res, err)
	}
	if recs := mem.Records(t1); len(recs) != records+1 || recs[records].Outcome.Reason != "unchanged" {
		t.Error("a re-import is not audited once as unchanged")
	}
	s, err := svc.GetStrategy(ctx, t1, sA)
	if err != nil || s.Revision != 1 || s.Status != trader.StatusActive || !s.Runnable || s.Name != "trend" {
		t.Errorf("imported strategy: %+v %v", s, err)
	}

	// A JSON file that switches the current strategy and degrades the concern.
	js := `{"concerns":[{"concern_id":"qndd8o9ppop6:xrpusd","execution_state":"degraded"}],
	"strategies":[
	 {"id":"` + sB + `","account_id":"qndd8o9ppop6","market_symbol":"xrpusd","name":"mean-revert","status":"active","runnable":true},
	 {"id":"` + sA + `","account_id":"qndd8o9ppop6","market_symbol":"xrpusd","name":"trend","status":"inactive","runnable":true,"risk_mode":"normal"}]}`
	res, err = svc.Import(ctx, operator, []byte(js), trader.FormatJSON)
	if err != nil || res != (trader.ImportResult{ConcernsUpdated: 1, StrategiesCreated: 1, StrategiesUpdated: 1}) {
		t.Fatalf("switching import: %+v %v", res, err)
	}
	b, _ := svc.GetStrategy(ctx, t1, sB)
	if b.Status != trader.StatusActive || b.RiskMode != "normal" {
		t.Errorf("B after import: %+v", b)
	}

	for _, c := range []struct {
		name, data string
		format     trader.Format
		code       string
	}{
		{"unknown field", "strategies:\n  - {id: " + sA + ", colour: red}\n", trader.FormatYAML, "bad_file"},
		{"wrong type", "strategies:\n  - {id: " + sA + ", account_id: a, market_symbol: b, name: n, status: active, runnable: maybe}\n", trader.FormatYAML, "bad_file"},
		{"missing runnable", "strategies:\n  - {id: " + sNew + ", account_id: a, market_symbol: b, name: n, status: inactive}\n", trader.FormatYAML, trader.CodeMissingField},
		{"bad status", "strategies:\n  - {id: " + sNew + ", account_id: a, market_symbol: b, name: n, status: on, runnable: true}\n", trader.FormatYAML, trader.CodeInvalidField},
		{"bad concern", "concerns:\n  - {concern_id: nocolon, execution_state: healthy}\n", trader.FormatYAML, trader.CodeInvalidField},
		{"duplicate id", "strategies:\n  - {id: " + sNew + ", account_id: a, market_symbol: b, name: n, status: inactive, runnable: true}\n  - {id: " + sNew + ", account_id: a, market_symbol: b, name: n, status: inactive, runnable: true}\n", trader.FormatYAML, "duplicate_id"},
		{"two documents", "concerns: []\n---\nconcerns: []\n", trader.FormatYAML, "bad_file"},
		{"empty", "", trader.FormatYAML, "bad_file"},
		{"json trailing", `{"concerns":[]} {}`, trader.FormatJSON, "bad_file"},
		{"bad format", `{}`, "toml", "bad_format"},
		{"two current", "strategies:\n  - {id: " + sNew + ", account_id: qndd8o9ppop6, market_symbol: xrpusd, name: n, status: paused, runnable: true}\n", trader.FormatYAML, "concern_has_current"},
		{"move a strategy", "strategies:\n  - {id: " + sA + ", account_id: other, market_symbol: xrpusd, name: trend, status: inactive, runnable: true}\n", trader.FormatYAML, "immutable_field"},
	} {
		before := len(mem.Records(t1))
		_, err := svc.Import(ctx, operator, []byte(c.data), c.format)
		if ce := contract.AsError(err); ce == nil || ce.Kind != contract.KindInvalid || ce.Code != c.code {
			t.Errorf("%s: %v, want invalid %s", c.name, err, c.code)
		}
		if len(mem.Records(t1)) != before+1 {
			t.Errorf("%s: the refused import was not audited", c.name)
		}
	}
	// A refused import changed nothing, not even partly.
	partial := "strategies:\n  - {id: " + sNew + ", account_id: qndd8o9ppop6, market_symbol: xrpusd, name: first, status: inactive, runnable: true}\n  - {id: " + sA + ", account_id: moved, market_symbol: xrpusd, name: trend, status: inactive, runnable: true}\n"
	if _, err := svc.Import(ctx, operator, []byte(partial), trader.FormatYAML); err == nil {
		t.Fatal("partial import accepted")
	}
	if _, err := svc.GetStrategy(ctx, t1, sNew); contract.KindOf(err) != contract.KindNotFound {
		t.Errorf("a refused import left a strategy behind: %v", err)
	}
	if _, err := svc.Import(ctx, hermes, file, trader.FormatYAML); contract.KindOf(err) != contract.KindDeny {
		t.Errorf("operate-only import: %v", err)
	}
}

func TestFormatOf(t *testing.T) {
	for name, want := range map[string]trader.Format{"a.yaml": trader.FormatYAML, "b.YML": trader.FormatYAML, "dir/c.json": trader.FormatJSON} {
		if got, err := trader.FormatOf(name); err != nil || got != want {
			t.Errorf("%s: %s %v", name, got, err)
		}
	}
	if _, err := trader.FormatOf("x.toml"); contract.KindOf(err) != contract.KindInvalid || !strings.Contains(err.Error(), "x.toml") {
		t.Errorf("toml: %v", err)
	}
	if !slices.Equal(trader.DefaultRiskModes, []string{"normal", "reduced", "defensive"}) {
		t.Errorf("default risk modes %v", trader.DefaultRiskModes)
	}
}
