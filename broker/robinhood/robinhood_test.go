package robinhood_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/broker/robinhood"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

const scenario = `
accounts:
  - account_number: "619508153"
    is_default: true
    agentic_allowed: true
    option_level: option_level_2
    portfolio: {total_value: 1000.00, buying_power: 998.50, cash: 998.50}
    positions: [{symbol: SPY, quantity: 2, shares_available_for_sells: 1.5, average_buy_price: 500}]
    realized_pnl_day: -12.34
review_alerts:
  TSLA: [{type: PATTERN_DAY_TRADE_PROTECTION, message: "pdt"}]
orders:
  - {id: ord-1, account_number: "619508153", symbol: SPY, side: buy, type: limit, state: queued, quantity: 1, limit_price: 400}
quotes:
  SPY: {last_trade_price: 481.50, bid_price: 481.40, ask_price: 481.60}
`

func newFake(t *testing.T, extra string) (*fake, *robinhood.Client) {
	t.Helper()
	s, err := paper.ParseScenario([]byte(scenario + extra))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 6, 26, 14, 0, 0, 0, time.UTC)
	sim, err := paper.New(s, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{sim: sim, token: "tok-123", override: map[string]func(map[string]any) *mcp.CallToolResult{}}
	url := f.serve(t)
	c, err := robinhood.Dial(t.Context(), url, "tok-123", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return f, c
}

func TestMapping(t *testing.T) {
	f, c := newFake(t, "  TSLA: {last_trade_price: 250, bid_price: 249.9, ask_price: 250.1}\n")
	ctx := t.Context()
	as, err := c.Accounts(ctx)
	if err != nil || len(as) != 1 || as[0] != (broker.Account{AccountNumber: "619508153", IsDefault: true, AgenticAllowed: true, OptionLevel: "option_level_2"}) {
		t.Fatalf("accounts = %+v, %v", as, err)
	}
	p, err := c.Portfolio(ctx, "619508153")
	if err != nil || p != (broker.Portfolio{TotalValue: 1000, BuyingPower: 998.5, Cash: 998.5}) {
		t.Fatalf("portfolio = %+v, %v", p, err)
	}
	ps, err := c.Positions(ctx, "619508153")
	if err != nil || len(ps) != 1 || ps[0] != (broker.Position{Symbol: "SPY", Quantity: 2, SharesAvailableForSells: 1.5}) {
		t.Fatalf("positions = %+v, %v", ps, err)
	}
	qs, err := c.Quotes(ctx, []string{"SPY", "NOPE"})
	if err != nil || len(qs) != 1 || qs[0] != (broker.Quote{Symbol: "SPY", LastTradePrice: 481.5, BidPrice: 481.4, AskPrice: 481.6}) {
		t.Fatalf("quotes = %+v, %v", qs, err)
	}
	req := broker.OrderRequest{AccountNumber: "619508153", Symbol: "SPY", Side: "buy", Type: "market", TimeInForce: "gfd", MarketHours: "regular_hours", Quantity: 1}
	r, err := c.Review(ctx, req)
	if err != nil || r.Quote.AskPrice != 481.6 || len(r.Alerts) != 0 {
		t.Fatalf("clean review (order_checks {}) = %+v, %v", r, err)
	}
	tsla := req
	tsla.Symbol = "TSLA"
	r, err = c.Review(ctx, tsla)
	if err != nil || len(r.Alerts) != 1 || r.Alerts[0] != (broker.Alert{Type: "PATTERN_DAY_TRADE_PROTECTION", Message: "pdt"}) {
		t.Fatalf("alerting review = %+v, %v", r, err)
	}
	req.RefID = "ref-1"
	o, err := c.Place(ctx, req)
	if err != nil || o.ID == "" || o.RefID != "ref-1" || o.State != broker.StateFilled || o.AveragePrice != 481.6 {
		t.Fatalf("place = %+v, %v", o, err)
	}
	again, err := c.Place(ctx, req)
	if err != nil || again.ID != o.ID {
		t.Fatalf("repeat place with the same ref_id = %+v, %v; want order %s", again, err, o.ID)
	}
	os, err := c.Orders(ctx, "619508153")
	if err != nil || len(os) != 2 || os[0].ID != "ord-1" || !os[0].Open() || os[0].LimitPrice != 400 {
		t.Fatalf("orders = %+v, %v", os, err)
	}
	co, err := c.Cancel(ctx, "619508153", "ord-1")
	if err != nil || co.ID != "ord-1" || co.State != broker.StateCancelled {
		t.Fatalf("cancel = %+v, %v", co, err)
	}
	pnl, err := c.RealizedPnL(ctx, "619508153", "day")
	if err != nil || pnl.TotalRealizedGain != -12.34 {
		t.Fatalf("pnl = %+v, %v", pnl, err)
	}
	if len(f.calls) != 11 {
		t.Fatalf("server saw %d calls: %v", len(f.calls), f.calls)
	}
}

func TestReplyShapes(t *testing.T) {
	f, c := newFake(t, "")
	ctx := t.Context()
	f.override["get_accounts"] = func(map[string]any) *mcp.CallToolResult {
		return text(map[string]any{"data": []map[string]any{{"account_number": "1", "is_default": "true", "agentic_allowed": "false"}}})
	}
	f.override["get_portfolio"] = func(map[string]any) *mcp.CallToolResult {
		return text(map[string]any{"data": map[string]any{"equity": "12.50", "buying_power": "3.25", "cash": nil}})
	}
	f.override["get_equity_quotes"] = func(map[string]any) *mcp.CallToolResult {
		return text(map[string]any{"data": []any{nil, map[string]any{"symbol": "SPY", "last_trade_price": 1, "bid_price": "0.99", "ask_price": "1.01"}}})
	}
	f.override["review_equity_order"] = func(map[string]any) *mcp.CallToolResult {
		return text(map[string]any{"data": map[string]any{"quote_data": map[string]any{"ask_price": "2.00", "bid_price": "1.90"},
			"order_checks": []map[string]any{{"alertType": "PRICE_COLLAR", "message": "collared"}, {"message": "no type"}}}})
	}
	f.override["place_equity_order"] = func(map[string]any) *mcp.CallToolResult {
		return text(map[string]any{"data": map[string]any{"order": map[string]any{"id": "o-9", "state": "confirmed", "type": "limit", "price": "5.00"}}})
	}
	f.override["get_realized_pnl"] = func(map[string]any) *mcp.CallToolResult {
		return text(map[string]any{"data": map[string]any{"total_returns": map[string]any{"realized_gain": "-7.5"}}})
	}
	as, err := c.Accounts(ctx)
	if err != nil || len(as) != 1 || !as[0].IsDefault || as[0].AgenticAllowed {
		t.Fatalf("bare account list with string booleans = %+v, %v", as, err)
	}
	p, err := c.Portfolio(ctx, "1")
	if err != nil || p != (broker.Portfolio{TotalValue: 12.5, BuyingPower: 3.25}) {
		t.Fatalf("equity + bare buying_power = %+v, %v", p, err)
	}
	qs, err := c.Quotes(ctx, []string{"X", "SPY"})
	if err != nil || len(qs) != 1 || qs[0].AskPrice != 1.01 || qs[0].LastTradePrice != 1 {
		t.Fatalf("quotes with a null entry = %+v, %v", qs, err)
	}
	r, err := c.Review(ctx, broker.OrderRequest{Symbol: "SPY", Side: "buy"})
	if err != nil || r.Quote.Symbol != "SPY" || r.Quote.AskPrice != 2 || len(r.Alerts) != 2 || r.Alerts[0].Type != "PRICE_COLLAR" || r.Alerts[1].Type != "UNKNOWN" {
		t.Fatalf("review with a list of checks = %+v, %v", r, err)
	}
	o, err := c.Place(ctx, broker.OrderRequest{RefID: "r"})
	if err != nil || o.ID != "o-9" || o.RefID != "r" || o.LimitPrice != 5 || !o.Open() {
		t.Fatalf("place under data.order = %+v, %v", o, err)
	}
	pnl, err := c.RealizedPnL(ctx, "1", "day")
	if err != nil || pnl.TotalRealizedGain != -7.5 {
		t.Fatalf("total_returns object = %+v, %v", pnl, err)
	}
}

func TestErrors(t *testing.T) {
	f, c := newFake(t, "")
	ctx := t.Context()
	for _, tc := range []struct {
		name      string
		reply     *mcp.CallToolResult
		status    int
		retryable bool
		msg       string
	}{
		{"refused with status", toolErr(map[string]any{"error": map[string]any{"status": 400, "message": "bad qty"}}), 400, false, "bad qty"},
		{"unavailable", toolErr(map[string]any{"error": map[string]any{"code": 503, "message": "try later"}}), 503, true, "try later"},
		{"top-level status", toolErr(map[string]any{"status": "429", "message": "slow down"}), 429, false, "slow down"},
		{"plain text error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "market closed"}}}, 400, false, "market closed"},
		{"no data envelope", text(map[string]any{"accounts": []any{}}), 502, true, "data"},
		{"bad decimal", text(map[string]any{"data": map[string]any{"total_value": "abc"}}), 502, true, "decimal"},
	} {
		f.override["get_portfolio"] = func(map[string]any) *mcp.CallToolResult { return tc.reply }
		_, err := c.Portfolio(ctx, "1")
		if broker.StatusOf(err) != tc.status || broker.Retryable(err) != tc.retryable || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err = %v (status %d, retryable %v); want %d %v containing %q", tc.name, err, broker.StatusOf(err), broker.Retryable(err), tc.status, tc.retryable, tc.msg)
		}
	}

	// A call that outlives its deadline is a timeout: outcome unknown.
	late := make(chan struct{})
	defer close(late)
	f.override["place_equity_order"] = func(map[string]any) *mcp.CallToolResult {
		<-late // answers only after the caller has given up
		return text(map[string]any{"data": map[string]any{"id": "late"}})
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := c.Place(dctx, broker.OrderRequest{RefID: "r"})
	if !broker.IsTimeout(err) || broker.StatusOf(err) != broker.StatusTimeout {
		t.Errorf("deadline: err = %v, want a timeout", err)
	}
}

func TestBearerToken(t *testing.T) {
	f, _ := newFake(t, "")
	url := f.serve(t)
	if _, err := robinhood.Dial(t.Context(), url, "wrong", nil); err == nil {
		t.Fatal("dial with a wrong token succeeded")
	}
	if _, err := robinhood.Dial(t.Context(), "", "tok", nil); err == nil {
		t.Fatal("dial without an endpoint succeeded")
	}
}

// TestExecutorOverMCP runs cron ticks through the executor, the MCP client
// and the fake server: review, PDT anomaly, placement and a cancel, the
// 5xx retry with the same ref_id, all on the wire.
func TestExecutorOverMCP(t *testing.T) {
	f, c := newFake(t, "  TSLA: {last_trade_price: 250, bid_price: 249.9, ask_price: 250.1}\nfaults: {place_equity_order: [503]}\n")
	dir := t.TempDir()
	writeManifest(t, dir, "rh", "---\nname: rh\nstrategist:\n  mode: live\n  account_lock: \"619508153\"\n  allowlist: [SPY, TSLA]\n  max_position_pct: 100\n  max_concurrent_positions: 5\n  profile_compatibility: [claude-code]\n---\n")
	log := audit.NewMemory()
	ex := &executor.Executor{Broker: c, Store: executortest.NewMemory(), Audit: log, Skills: dir}
	id := contract.Identity{TenantSlot: "slot-3", Subject: "usr_00000000000000000000000000000003", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter}
	env, err := ex.Tick(t.Context(), executor.TickRequest{
		Identity: id, Context: executor.ContextCron,
		Payload: []byte(`{"strategy":"rh","intents":[
			{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1},
			{"symbol":"TSLA","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":250.10,"max_slippage_pct":1},
			{"side":"cancel","order_id":"ord-1"}]}`),
		Now: time.Date(2026, 6, 26, 14, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range env.Actions {
		got = append(got, a.Symbol+":"+a.Status)
	}
	want := []string{"SPY:placed", "TSLA:review_anomaly", "SPY:cancelled"}
	if env.Aborted != nil || !slices.Equal(got, want) || env.AccountValue != 1000 || env.BuyingPower != 998.5 {
		t.Fatalf("envelope %+v: actions %v, want %v", env, got, want)
	}
	if n := len(f.sim.AllOrders()); n != 2 { // ord-1 and the one SPY buy, despite the 503 retry
		t.Fatalf("%d orders on the server, want 2", n)
	}
	places := 0
	for _, name := range f.calls {
		if name == "place_equity_order" {
			places++
		}
	}
	if places != 2 {
		t.Fatalf("place_equity_order called %d times, want 2 (one 503, one retry)", places)
	}
	if recs := log.Records("slot-3"); len(recs) != 1 {
		t.Fatalf("%d audit records", len(recs))
	}
	if errors.Is(err, context.Canceled) {
		t.Fatal("unreachable")
	}
}
